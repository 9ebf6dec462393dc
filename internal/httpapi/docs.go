package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"sort"
	"strings"
)

// The /docs page renders the OpenAPI document on the server into one
// self-contained HTML page: no script, no font, no CDN (the machines have
// no internet).

type docOperation struct {
	Method, Path, Summary, Description, Role, ID string
	Public                                       bool
	Params                                       []docParam
	Body                                         *docBody
	Responses                                    []docResponse
}

type docParam struct {
	Name, In, Type, Description string
	Required                    bool
}

type docBody struct {
	Description string
	Media       []docMedia
}

type docMedia struct {
	Type   string
	Schema template.HTML
}

type docResponse struct {
	Code, Description string
	Media             []docMedia
}

type docTag struct {
	Name, Description string
	Ops               []docOperation
}

type docSchema struct {
	Name string
	Body template.HTML
}

type docPage struct {
	Title, Version, Description string
	Tags                        []docTag
	Schemas                     []docSchema
}

var methodOrder = map[string]int{"get": 0, "post": 1, "put": 2, "patch": 3, "delete": 4}

// RenderDocs turns an OpenAPI document (JSON) into the /docs page: one
// self-contained HTML page, with no script, font or link elsewhere.
func RenderDocs(openapi []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openapi, &doc); err != nil {
		return nil, err
	}
	comps, _ := doc["components"].(map[string]any)
	r := &docRenderer{components: comps}
	info, _ := doc["info"].(map[string]any)
	page := docPage{Title: str(info["title"]), Version: str(info["version"]), Description: str(info["description"])}
	tagIndex := map[string]int{}
	for _, t := range list(doc["tags"]) {
		tm, _ := t.(map[string]any)
		tagIndex[str(tm["name"])] = len(page.Tags)
		page.Tags = append(page.Tags, docTag{Name: str(tm["name"]), Description: str(tm["description"])})
	}
	paths, _ := doc["paths"].(map[string]any)
	for _, path := range sortedKeys(paths) {
		item, _ := paths[path].(map[string]any)
		shared := list(item["parameters"])
		methods := sortedKeys(item)
		sort.SliceStable(methods, func(i, j int) bool { return methodOrder[methods[i]] < methodOrder[methods[j]] })
		for _, m := range methods {
			op, ok := item[m].(map[string]any)
			if !ok || m == "parameters" {
				continue
			}
			o := docOperation{
				Method: strings.ToUpper(m), Path: path, Summary: str(op["summary"]), Description: str(op["description"]),
				Role: str(op["x-mlsysops-role"]), ID: str(op["operationId"]),
			}
			if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
				o.Public = true
			}
			for _, p := range append(append([]any{}, shared...), list(op["parameters"])...) {
				pm := r.deref(p)
				o.Params = append(o.Params, docParam{
					Name: str(pm["name"]), In: str(pm["in"]), Description: str(pm["description"]),
					Required: pm["required"] == true, Type: r.typeText(pm["schema"]),
				})
			}
			if rb, ok := op["requestBody"]; ok {
				bm := r.deref(rb)
				o.Body = &docBody{Description: str(bm["description"]), Media: r.media(bm["content"])}
			}
			resps, _ := op["responses"].(map[string]any)
			for _, code := range sortedKeys(resps) {
				rm := r.deref(resps[code])
				o.Responses = append(o.Responses, docResponse{Code: code, Description: str(rm["description"]), Media: r.media(rm["content"])})
			}
			tag := "other"
			if tags := list(op["tags"]); len(tags) > 0 {
				tag = str(tags[0])
			}
			i, ok := tagIndex[tag]
			if !ok {
				i = len(page.Tags)
				tagIndex[tag] = i
				page.Tags = append(page.Tags, docTag{Name: tag})
			}
			page.Tags[i].Ops = append(page.Tags[i].Ops, o)
		}
	}
	schemas, _ := comps["schemas"].(map[string]any)
	for _, name := range sortedKeys(schemas) {
		page.Schemas = append(page.Schemas, docSchema{Name: name, Body: r.schema(schemas[name], 0)})
	}
	var b bytes.Buffer
	if err := docsTemplate.Execute(&b, page); err != nil {
		return nil, fmt.Errorf("render /docs: %w", err)
	}
	return b.Bytes(), nil
}

type docRenderer struct {
	components map[string]any
}

// deref follows a local $ref.
func (r *docRenderer) deref(v any) map[string]any {
	m, _ := v.(map[string]any)
	for i := 0; i < 8 && m != nil; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
		if len(parts) != 2 {
			return m
		}
		group, _ := r.components[parts[0]].(map[string]any)
		m, _ = group[parts[1]].(map[string]any)
	}
	return m
}

func (r *docRenderer) media(content any) []docMedia {
	cm, _ := content.(map[string]any)
	var out []docMedia
	for _, mt := range sortedKeys(cm) {
		m, _ := cm[mt].(map[string]any)
		out = append(out, docMedia{Type: mt, Schema: r.schema(m["schema"], 0)})
	}
	return out
}

// typeText is a one-line type for parameters.
func (r *docRenderer) typeText(s any) string {
	m := r.deref(s)
	t := str(m["type"])
	if t == "array" {
		t = "array of " + r.typeText(m["items"])
	}
	if e := list(m["enum"]); len(e) > 0 {
		var vs []string
		for _, v := range e {
			vs = append(vs, fmt.Sprint(v))
		}
		t += " (" + strings.Join(vs, ", ") + ")"
	}
	return t
}

// schema renders a schema as nested lists; references become links.
func (r *docRenderer) schema(s any, depth int) template.HTML {
	m, _ := s.(map[string]any)
	if m == nil {
		return ""
	}
	esc := template.HTMLEscapeString
	if ref, ok := m["$ref"].(string); ok {
		name := ref[strings.LastIndex(ref, "/")+1:]
		return template.HTML(fmt.Sprintf(`<a href="#schema-%s">%s</a>`, esc(name), esc(name)))
	}
	var b strings.Builder
	typ := str(m["type"])
	for _, k := range []string{"allOf", "oneOf", "anyOf"} {
		if parts := list(m[k]); len(parts) > 0 {
			var rs []string
			for _, p := range parts {
				rs = append(rs, string(r.schema(p, depth+1)))
			}
			word := map[string]string{"allOf": " and ", "oneOf": " or ", "anyOf": " or "}[k]
			b.WriteString(strings.Join(rs, word))
		}
	}
	switch {
	case typ == "array":
		b.WriteString("array of " + string(r.schema(m["items"], depth+1)))
	case typ != "":
		b.WriteString(`<span class="type">` + esc(typ) + `</span>`)
	}
	if m["nullable"] == true {
		b.WriteString(" or null")
	}
	if e := list(m["enum"]); len(e) > 0 {
		var vs []string
		for _, v := range e {
			vs = append(vs, esc(fmt.Sprint(v)))
		}
		b.WriteString(" <span class=\"enum\">one of " + strings.Join(vs, ", ") + "</span>")
	}
	if d := str(m["description"]); d != "" && depth > 0 {
		b.WriteString(` <span class="desc">` + esc(d) + `</span>`)
	}
	props, _ := m["properties"].(map[string]any)
	if len(props) > 0 && depth < 6 {
		req := map[string]bool{}
		for _, x := range list(m["required"]) {
			req[str(x)] = true
		}
		b.WriteString("<ul>")
		for _, name := range sortedKeys(props) {
			mark := ""
			if req[name] {
				mark = ` <span class="req">required</span>`
			}
			b.WriteString("<li><code>" + esc(name) + "</code>" + mark + ": " + string(r.schema(props[name], depth+1)) + "</li>")
		}
		b.WriteString("</ul>")
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok && len(ap) > 0 {
		b.WriteString(" map of " + string(r.schema(ap, depth+1)))
	}
	return template.HTML(b.String())
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var docsTemplate = template.Must(template.New("docs").Funcs(template.FuncMap{
	"lower": strings.ToLower,
	"paras": func(s string) template.HTML {
		var out []string
		for _, p := range strings.Split(strings.TrimSpace(s), "\n\n") {
			p = template.HTMLEscapeString(p)
			// `code` spans.
			parts := strings.Split(p, "`")
			for i := 1; i < len(parts); i += 2 {
				parts[i] = "<code>" + parts[i] + "</code>"
			}
			out = append(out, "<p>"+strings.Join(parts, "")+"</p>")
		}
		return template.HTML(strings.Join(out, "\n"))
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} {{.Version}}</title>
<style>
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;background:#fafbfc}
header{background:#1d3557;color:#fff;padding:1.2em 2em}header h1{margin:0;font-size:1.5em}
nav{position:fixed;top:0;bottom:0;left:0;width:17em;overflow:auto;padding:1em;background:#eef1f5;font-size:.9em}
nav a{display:block;color:#1d3557;text-decoration:none;padding:.1em 0}nav .t{font-weight:600;margin-top:.8em}
main{margin-left:19em;padding:0 2em 3em}section.op{background:#fff;border:1px solid #dde2e8;border-radius:6px;margin:1em 0;padding:.8em 1.2em}
.m{display:inline-block;min-width:4.5em;text-align:center;font-weight:700;border-radius:4px;padding:.1em .4em;color:#fff;font-size:.85em}
.get{background:#2a7ab0}.post{background:#2e8b57}.put{background:#b8860b}.delete{background:#b03a2e}
.path{font-family:ui-monospace,monospace;font-size:1.05em;margin-left:.6em}.role{float:right;font-size:.8em;color:#555}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #e1e4e8;padding:.25em .6em;text-align:left;vertical-align:top;font-size:.9em}
code{font-family:ui-monospace,monospace;background:#f0f2f5;padding:0 .2em;border-radius:3px}.type{color:#6f42c1}.enum{color:#555}.desc{color:#666}.req{color:#b03a2e;font-size:.8em}
ul{margin:.2em 0 .2em 1.2em;padding:0}h2{border-bottom:2px solid #dde2e8;padding-bottom:.2em;margin-top:1.6em}
</style></head><body>
<nav><div class="t">{{.Title}}</div>
{{range .Tags}}<div class="t">{{.Name}}</div>{{range .Ops}}<a href="#op-{{.ID}}">{{.Method}} {{.Path}}</a>{{end}}{{end}}
<div class="t"><a href="#schemas">Schemas</a></div></nav>
<main><header><h1>{{.Title}} <small>{{.Version}}</small></h1></header>
{{paras .Description}}
{{range .Tags}}<h2 id="tag-{{.Name}}">{{.Name}}</h2>{{if .Description}}<p>{{.Description}}</p>{{end}}
{{range .Ops}}<section class="op" id="op-{{.ID}}">
<span class="m {{lower .Method}}">{{.Method}}</span><span class="path">{{.Path}}</span>
<span class="role">{{if .Public}}public{{else}}role: {{.Role}}{{end}}</span>
<p><b>{{.Summary}}</b></p>{{if .Description}}{{paras .Description}}{{end}}
{{if .Params}}<table><tr><th>parameter</th><th>in</th><th>type</th><th>description</th></tr>
{{range .Params}}<tr><td><code>{{.Name}}</code>{{if .Required}} <span class="req">required</span>{{end}}</td><td>{{.In}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>{{end}}</table>{{end}}
{{with .Body}}<p>Request body{{if .Description}}: {{.Description}}{{end}}</p><table>{{range .Media}}<tr><td><code>{{.Type}}</code></td><td>{{.Schema}}</td></tr>{{end}}</table>{{end}}
<table><tr><th>status</th><th>meaning</th><th>body</th></tr>
{{range .Responses}}<tr><td>{{.Code}}</td><td>{{.Description}}</td><td>{{range .Media}}<code>{{.Type}}</code> {{.Schema}}<br>{{end}}</td></tr>{{end}}</table>
</section>{{end}}{{end}}
<h2 id="schemas">Schemas</h2>
{{range .Schemas}}<section class="op" id="schema-{{.Name}}"><b>{{.Name}}</b> {{.Body}}</section>{{end}}
</main></body></html>
`))

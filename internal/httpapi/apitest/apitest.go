// Package apitest checks that an API built with internal/httpapi and its
// OpenAPI document agree, for the tests of each API.
package apitest

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
)

// Doc returns s's OpenAPI document.
func Doc(t *testing.T, s *httpapi.Server) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(s.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

var operationMethods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

// MatchesRoutes checks that every chi route of s is documented and every
// documented operation routed, with the same role and publicness.
func MatchesRoutes(t *testing.T, s *httpapi.Server) {
	t.Helper()
	doc := Doc(t, s)

	var routed []string
	err := chi.Walk(s.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed = append(routed, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	roles := map[string]string{}
	public := map[string]bool{}
	paths := doc["paths"].(map[string]any)
	for path, item := range paths {
		for _, m := range operationMethods {
			op, ok := item.(map[string]any)[m].(map[string]any)
			if !ok {
				continue
			}
			key := strings.ToUpper(m) + " " + path
			documented = append(documented, key)
			roles[key], _ = op["x-mlsysops-role"].(string)
			if sec, ok := op["security"].([]any); ok && len(sec) == 0 {
				public[key] = true
			}
		}
	}
	sort.Strings(routed)
	sort.Strings(documented)
	if diff := cmp.Diff(routed, documented); diff != "" {
		t.Errorf("routes (-chi +openapi.yaml):\n%s", diff)
	}
	for _, rt := range s.Routes() {
		key := rt.Method + " " + rt.Pattern
		if roles[key] != string(rt.Role) {
			t.Errorf("%s: role %s in the route table, x-mlsysops-role %q in openapi.yaml", key, rt.Role, roles[key])
		}
		if want := s.Public(rt.Pattern); public[key] != want {
			t.Errorf("%s: public %v by default, documented public %v", key, want, public[key])
		}
	}
}

// Consistent checks what a reader of s's OpenAPI document relies on:
// references resolve, path parameters are declared, operation ids are
// unique, and the error answers a route can give are documented.
func Consistent(t *testing.T, s *httpapi.Server) {
	t.Helper()
	doc := Doc(t, s)
	comps := doc["components"].(map[string]any)

	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
				group, _ := comps[parts[0]].(map[string]any)
				if len(parts) != 2 || group[parts[1]] == nil {
					t.Errorf("%s: $ref %s does not resolve", where, ref)
				}
			}
			for k, e := range x {
				walk(where+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(where, e)
			}
		}
	}
	walk("", doc)

	deref := func(v any) map[string]any {
		m := v.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
			return comps[parts[0]].(map[string]any)[parts[1]].(map[string]any)
		}
		return m
	}
	ids := map[string]string{}
	paramRE := regexp.MustCompile(`\{([^}]+)\}`)
	for path, it := range doc["paths"].(map[string]any) {
		item := it.(map[string]any)
		var want []string
		for _, m := range paramRE.FindAllStringSubmatch(path, -1) {
			want = append(want, m[1])
		}
		sort.Strings(want)
		shared, _ := item["parameters"].([]any)
		for _, m := range operationMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			key := strings.ToUpper(m) + " " + path
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s: no operationId", key)
			} else if prev, dup := ids[id]; dup {
				t.Errorf("%s: operationId %s also used by %s", key, id, prev)
			}
			ids[id] = key
			var got []string
			own, _ := op["parameters"].([]any)
			for _, p := range append(append([]any{}, shared...), own...) {
				pm := deref(p)
				if pm["in"] == "path" {
					got = append(got, pm["name"].(string))
				}
			}
			sort.Strings(got)
			if !cmp.Equal(want, got, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") })) {
				t.Errorf("%s: path parameters %v, declared %v", key, want, got)
			}
			resps := op["responses"].(map[string]any)
			if len(resps) == 0 {
				t.Errorf("%s: no responses", key)
			}
			sec, hasSec := op["security"].([]any)
			if !(hasSec && len(sec) == 0) && resps["401"] == nil {
				t.Errorf("%s: needs a token but does not document 401", key)
			}
			if op["x-mlsysops-role"] == "operator" && resps["403"] == nil {
				t.Errorf("%s: operator route does not document 403", key)
			}
			if _, ok := op["requestBody"]; ok {
				for _, code := range []string{"413", "415"} {
					if resps[code] == nil {
						t.Errorf("%s: takes a body but does not document %s", key, code)
					}
				}
			}
		}
	}
}

// DocsPage checks that s's /docs page names every operation and loads
// nothing from elsewhere.
func DocsPage(t *testing.T, s *httpapi.Server) {
	t.Helper()
	page := string(s.Docs())
	for _, rt := range s.Routes() {
		if !strings.Contains(page, ">"+rt.Method+"</span><span class=\"path\">"+rt.Pattern+"<") {
			t.Errorf("/docs lacks %s %s", rt.Method, rt.Pattern)
		}
	}
	for _, bad := range []string{"<script", "src=", `href="http`, "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("/docs contains %q; it must be self-contained", bad)
		}
	}
	if !strings.Contains(page, `id="schema-Problem"`) {
		t.Error("/docs lacks the Problem schema")
	}
}

// SchemasMatchTypes checks that the documented properties of the named
// schemas are exactly the JSON fields of the Go values' types (structs).
func SchemasMatchTypes(t *testing.T, s *httpapi.Server, types map[string]any) {
	t.Helper()
	schemas := Doc(t, s)["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range types {
		sch, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s in the OpenAPI document", name)
			continue
		}
		var documented []string
		props, _ := sch["properties"].(map[string]any)
		for p := range props {
			documented = append(documented, p)
		}
		var fields []string
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			if tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
				fields = append(fields, tag)
			}
		}
		sort.Strings(documented)
		sort.Strings(fields)
		if diff := cmp.Diff(fields, documented); diff != "" {
			t.Errorf("schema %s (-%T +openapi.yaml):\n%s", name, v, diff)
		}
	}
}

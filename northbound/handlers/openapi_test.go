package handlers

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
	"github.com/redis/go-redis/v9"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/auth"
)

// newOffline builds the API on a Redis client that is never used.
func newOffline(t *testing.T) *API {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	a, err := New(Config{Store: state.New(rdb, state.Options{}), Auth: auth.Static(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func openAPIDoc(t *testing.T, a *API) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(a.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

var operationMethods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

// TestOpenAPIMatchesRoutes: every chi route is documented, every
// documented operation is routed, with the same role and publicness.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	a := newOffline(t)
	doc := openAPIDoc(t, a)

	var routed []string
	err := chi.Walk(a.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
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
	for _, rt := range a.Routes() {
		key := rt.Method + " " + rt.Pattern
		if roles[key] != string(rt.Role) {
			t.Errorf("%s: role %s in the route table, x-mlsysops-role %q in openapi.yaml", key, rt.Role, roles[key])
		}
		if want := a.public(rt.Pattern); public[key] != want {
			t.Errorf("%s: public %v by default, documented public %v", key, want, public[key])
		}
	}
}

// TestOpenAPIConsistent checks what a reader relies on: references
// resolve, path parameters are declared, operation ids are unique, and
// the error answers a route can give are documented.
func TestOpenAPIConsistent(t *testing.T) {
	a := newOffline(t)
	doc := openAPIDoc(t, a)
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

// TestDocsPage: the /docs page names every operation and loads nothing
// from elsewhere.
func TestDocsPage(t *testing.T) {
	a := newOffline(t)
	page := string(a.docs)
	for _, rt := range a.Routes() {
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

func TestRolesAllow(t *testing.T) {
	cases := map[string]struct {
		have, need api.Role
		want       bool
	}{
		"viewer reads":        {api.RoleViewer, api.RoleViewer, true},
		"viewer cannot write": {api.RoleViewer, api.RoleOperator, false},
		"operator reads":      {api.RoleOperator, api.RoleViewer, true},
		"operator writes":     {api.RoleOperator, api.RoleOperator, true},
		"unknown role":        {api.Role("admin"), api.RoleViewer, false},
	}
	for name, tc := range cases {
		if got := tc.have.Allows(tc.need); got != tc.want {
			t.Errorf("%s: %s.Allows(%s) = %v", name, tc.have, tc.need, got)
		}
	}
}

// TestOpenAPIPhases: the phase filter documents exactly the phases of
// the MLSysOpsApp status.
func TestOpenAPIPhases(t *testing.T) {
	doc := openAPIDoc(t, newOffline(t))
	param := doc["components"].(map[string]any)["parameters"].(map[string]any)["Phase"].(map[string]any)
	var documented []string
	for _, p := range param["schema"].(map[string]any)["items"].(map[string]any)["enum"].([]any) {
		documented = append(documented, p.(string))
	}
	var want []string
	for _, p := range mlsysopsv1.AppPhases {
		want = append(want, string(p))
	}
	if diff := cmp.Diff(want, documented); diff != "" {
		t.Errorf("phase enum (-mlsysopsv1.AppPhases +openapi.yaml):\n%s", diff)
	}
}

// TestOpenAPISchemasMatchTypes: the documented properties of these
// schemas are exactly the JSON fields of their Go types.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	schemas := openAPIDoc(t, newOffline(t))["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range map[string]any{
		"Endpoint": api.Endpoint{}, "ComponentPlacement": api.ComponentPlacement{}, "Summary": api.Summary{},
		"List": api.List{}, "UpstreamModelStatus": api.UpstreamModelStatus{}, "Event": api.Event{},
	} {
		var documented []string
		for p := range schemas[name].(map[string]any)["properties"].(map[string]any) {
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

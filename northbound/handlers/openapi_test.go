package handlers

import (
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/httpapi/apitest"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
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
	return apitest.Doc(t, a.Server())
}

// TestOpenAPIMatchesRoutes: every chi route is documented, every
// documented operation is routed, with the same role and publicness.
func TestOpenAPIMatchesRoutes(t *testing.T) { apitest.MatchesRoutes(t, newOffline(t).Server()) }

// TestOpenAPIConsistent: references resolve, path parameters are
// declared, operation ids are unique, error answers are documented.
func TestOpenAPIConsistent(t *testing.T) { apitest.Consistent(t, newOffline(t).Server()) }

// TestDocsPage: the /docs page names every operation and loads nothing
// from elsewhere.
func TestDocsPage(t *testing.T) { apitest.DocsPage(t, newOffline(t).Server()) }

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
	apitest.SchemasMatchTypes(t, newOffline(t).Server(), map[string]any{
		"Endpoint": api.Endpoint{}, "ComponentPlacement": api.ComponentPlacement{}, "Summary": api.Summary{},
		"List": api.List{}, "UpstreamModelStatus": api.UpstreamModelStatus{}, "Pod": api.Pod{}, "ContainerState": api.ContainerState{},
	})
}

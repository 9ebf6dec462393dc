package northbound_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

// fuzzRoutes are the routes that take a body, with a path placeholder
// for an id.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/v1/applications"},
	{"POST", "/v1/ml-deployments"},
	{"POST", "/apps/deploy"},
	{"POST", "/ml/deploy_ml"},
	{"PUT", "/v1/applications/%s"},
	{"PUT", "/v1/ml-deployments/%s"},
	{"PUT", "/v1/agents/mode"},
	{"PUT", "/v1/policies/node/policy-fuzz.star"},
}

var fuzzContentTypes = []string{
	"application/json", "application/yaml", "", "text/yaml", "application/x-yaml", "text/plain",
	"application/json; charset=utf-8", "application/x-www-form-urlencoded", "application/vnd.x+json",
}

// FuzzSubmit sends arbitrary bodies to the submission endpoints (and the
// other routes that read a body) and checks the API's promise: never a
// 5xx or a crash for anything a client sends, a problem document for every
// 4xx, and an accepted submission that can be read back.
func FuzzSubmit(f *testing.F) {
	for _, file := range []string{
		"examples/apps/gpu-inference.yaml", "examples/apps/edge-camera-arm64.yaml",
		"examples/apps/fpga-optical-flow.yaml", "examples/apps/test-application.yaml",
		"descriptions/nodes/cloud-gpu-h100-1.yaml",
	} {
		f.Add(uint8(0), uint8(1), repoFile(f, file))
	}
	f.Add(uint8(0), uint8(0), appJSON("fuzz-seed"))
	f.Add(uint8(4), uint8(0), appJSON("fuzz-seed"))
	f.Add(uint8(3), uint8(0), []byte(`{"MLSysOpsApplication": {"mlsysops-id": "m1", "components": [{"Component": {"name": "c"}, "containers": [{"image": "i", "ports": [{"containerPort": 8000}]}]}]}}`))
	f.Add(uint8(1), uint8(0), []byte(`{"MLSysOpsApplication": {"mlsysops-id": 7, "clusterPlacement": {"clusterID": "x"}, "components": [{"Component": 5}]}}`))
	f.Add(uint8(0), uint8(0), []byte(`{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "cr"}, "spec": {"components": [{"metadata": {"name": "c"}, "containers": [{"image": "i"}]}]}}`))
	f.Add(uint8(6), uint8(0), []byte(`{"mode": 1, "agents": ["a@b"]}`))
	f.Add(uint8(7), uint8(5), []byte("def initialize():\n  return {}\n"))
	for _, garbage := range []string{"", "{", "[]", "null", "0", `""`, "MLSysOpsApp:", "MLSysOpsApp: []", "---\n---\n", "\xff\xfe", "{\"a\":" + strings.Repeat("[", 10000)} {
		f.Add(uint8(0), uint8(2), []byte(garbage))
	}
	// A YAML alias bomb.
	f.Add(uint8(0), uint8(1), []byte("a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\nMLSysOpsApp: {name: bomb, components: *f}\n"))

	// The fuzz target may not log through f; errors go to stderr.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	e := newEnv(f, handlers.Config{Policies: policystore.NewDirStore(map[string][]string{"node": {f.TempDir(), f.TempDir()}}), MaxBodyBytes: 1 << 20, Logger: log})
	f.Fuzz(func(t *testing.T, route, ct uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := strings.ReplaceAll(rt.path, "%s", "fuzz-app")
		req := httptest.NewRequest(rt.method, path, bytes.NewReader(body))
		if c := fuzzContentTypes[int(ct)%len(fuzzContentTypes)]; c != "" {
			req.Header.Set("Content-Type", c)
		}
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		check(t, rt.method+" "+path, rec, body)

		// What was accepted can be read back and removed.
		if loc := rec.Header().Get("Location"); loc != "" && rec.Code < 300 {
			for _, m := range []string{"GET", "DELETE"} {
				r2 := httptest.NewRequest(m, loc, nil)
				r2.Header.Set("Authorization", "Bearer "+operatorToken)
				rec2 := httptest.NewRecorder()
				e.api.ServeHTTP(rec2, r2)
				check(t, m+" "+loc, rec2, body)
				if m == "GET" && rec2.Code != http.StatusOK {
					t.Fatalf("GET %s after it was accepted: %d %s", loc, rec2.Code, rec2.Body)
				}
			}
			// Stand in for the agent: forget the removed item, so the
			// name is free for the next input.
			switch {
			case strings.HasPrefix(loc, api.PathMLDeployments+"/"):
				_ = e.store.MLDeployments().Forget(req.Context(), strings.TrimPrefix(loc, api.PathMLDeployments+"/"))
			case strings.HasPrefix(loc, api.PathApplications+"/"):
				_ = e.store.Applications().Forget(req.Context(), strings.TrimPrefix(loc, api.PathApplications+"/"))
			}
		}
	})
}

func check(t *testing.T, what string, rec *httptest.ResponseRecorder, body []byte) {
	t.Helper()
	if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%s: %d for body %q:\n%s", what, rec.Code, body, rec.Body)
	}
	if rec.Code == http.StatusServiceUnavailable {
		// Only a dependency this test has not configured (XMPP) may be
		// unavailable.
		if !strings.Contains(rec.Body.String(), "XMPP") {
			t.Fatalf("%s: 503 for body %q:\n%s", what, body, rec.Body)
		}
		return
	}
	if rec.Code >= 400 {
		var p api.Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || p.Detail == "" {
			t.Fatalf("%s: %d without a problem document (%v): %s", what, rec.Code, err, rec.Body)
		}
		for _, fp := range p.Problems {
			if fp.Type == "" || fp.Message == "" {
				t.Fatalf("%s: incomplete problem %+v", what, fp)
			}
		}
		return
	}
	if rec.Code != http.StatusNoContent && !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%s: %d with a body that is not JSON: %s", what, rec.Code, rec.Body)
	}
}

package northbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/client"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

func TestAuthentication(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	cases := map[string]struct {
		method, path, auth string
		status             int
		challenge          string
	}{
		"no token":                  {"GET", "/v1/applications", "", 401, `Bearer realm="mlsysops"`},
		"basic auth":                {"GET", "/v1/applications", "Basic dXNlcjpwdw==", 401, `Bearer realm="mlsysops", error="invalid_request"`},
		"empty bearer":              {"GET", "/v1/applications", "Bearer ", 401, `Bearer realm="mlsysops", error="invalid_request"`},
		"unknown token":             {"GET", "/v1/applications", "Bearer not-a-real-token-at-all", 401, `Bearer realm="mlsysops", error="invalid_token"`},
		"viewer writes":             {"DELETE", "/v1/applications/x", "Bearer " + viewerToken, 403, `Bearer realm="mlsysops", error="insufficient_scope"`},
		"viewer sets a mode":        {"PUT", "/v1/agents/mode", "Bearer " + viewerToken, 403, `Bearer realm="mlsysops", error="insufficient_scope"`},
		"viewer uploads a policy":   {"PUT", "/v1/policies/node/policy-x.star", "Bearer " + viewerToken, 403, `Bearer realm="mlsysops", error="insufficient_scope"`},
		"unknown route, no token":   {"GET", "/v2/whatever", "", 401, `Bearer realm="mlsysops"`},
		"unknown route with token":  {"GET", "/v2/whatever", "Bearer " + viewerToken, 404, ""},
		"wrong method":              {"PATCH", "/v1/applications", "Bearer " + operatorToken, 405, ""},
		"docs need a token":         {"GET", "/docs", "", 401, `Bearer realm="mlsysops"`},
		"openapi needs a token":     {"GET", "/openapi.json", "", 401, `Bearer realm="mlsysops"`},
		"bearer scheme is any case": {"GET", "/v1/applications", "bearer " + viewerToken, 200, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.srv.URL+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("Www-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
		})
	}
	// Public paths need no token.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := e.do(t, "GET", p, "", "", nil); r.StatusCode != 200 {
			t.Errorf("GET %s without a token: %d %s", p, r.StatusCode, r.Body)
		}
	}
	// Operators read too.
	if r := e.do(t, "GET", "/docs", operatorToken, "", nil); r.StatusCode != 200 || !strings.Contains(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /docs: %d %s", r.StatusCode, r.Header.Get("Content-Type"))
	}
	doc := decode[map[string]any](t, e.do(t, "GET", "/openapi.json", viewerToken, "", nil), 200)
	if doc["openapi"] != "3.0.3" {
		t.Errorf("openapi.json: %v", doc["openapi"])
	}
}

func TestPublicPathsConfigurable(t *testing.T) {
	e := newEnv(t, handlers.Config{PublicPaths: []string{"/healthz", "/docs"}})
	if r := e.do(t, "GET", "/docs", "", "", nil); r.StatusCode != 200 {
		t.Errorf("/docs made public: %d", r.StatusCode)
	}
	if r := e.do(t, "GET", "/metrics", "", "", nil); r.StatusCode != 401 {
		t.Errorf("/metrics no longer public: %d", r.StatusCode)
	}
}

func TestSubmitApplication(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	ctx := ctxT(t)

	// Upstream form, YAML, from the repository's examples.
	r := e.do(t, "POST", "/v1/applications", operatorToken, "application/yaml", repoFile(t, "examples/apps/gpu-inference.yaml"))
	acc := decode[api.Accepted](t, r, 202)
	want := api.Accepted{ID: "llm-inference", Request: "deploy", Phase: "Queued", Generation: 1, Href: "/v1/applications/llm-inference"}
	if diff := cmp.Diff(want, acc); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}
	if loc := r.Header.Get("Location"); loc != "/v1/applications/llm-inference" {
		t.Errorf("Location %q", loc)
	}
	// Queued atomically with its status and spec, on the stream the
	// continuum agent reads.
	st, err := e.store.Applications().Status(ctx, "llm-inference")
	if err != nil || st.Phase != mlsysopsv1.AppQueued || st.Kind != state.KindDeploy || st.StreamID == "" {
		t.Errorf("status in Redis: %+v, %v", st, err)
	}
	q, err := e.store.Applications().Queue(ctx, state.DefaultGroup, "test", state.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := q.Read(ctx)
	if err != nil || len(entries) != 1 || entries[0].Submission.ID != "llm-inference" || entries[0].Submission.SubmittedBy != "test-operator" {
		t.Fatalf("stream entries: %+v, %v", entries, err)
	}
	var cr struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
	}
	if err := json.Unmarshal(entries[0].Submission.Spec, &cr); err != nil || cr.Kind != "MLSysOpsApp" || cr.APIVersion != "mlsysops.eu/v1" || cr.Metadata.Name != "llm-inference" {
		t.Errorf("queued spec is not the resource form: %+v %v", cr, err)
	}

	// Custom resource form, JSON.
	crBody := `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "cr-form"},
	  "spec": {"components": [{"metadata": {"name": "c"}, "containers": [{"image": "i"}]}]}}`
	if r := e.do(t, "POST", "/v1/applications", operatorToken, "application/json", []byte(crBody)); r.StatusCode != 202 {
		t.Fatalf("CR form: %d %s", r.StatusCode, r.Body)
	}
	// No Content-Type: the content decides.
	if r := e.do(t, "POST", "/v1/applications", operatorToken, "", appJSON("no-content-type")); r.StatusCode != 202 {
		t.Fatalf("no Content-Type: %d %s", r.StatusCode, r.Body)
	}

	// A duplicate is a conflict that says what to do.
	p := problem(t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", appJSON("cr-form")), 409)
	if !strings.Contains(p.Detail, "already exists") || !strings.Contains(p.Detail, "PUT /v1/applications/cr-form") {
		t.Errorf("409 detail: %s", p.Detail)
	}

	// A retried submission with its Idempotency-Key gets the first receipt.
	body := appJSON("retried")
	first := decode[api.Accepted](t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", body, "Idempotency-Key", "k-1"), 202)
	again := decode[api.Accepted](t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", body, "Idempotency-Key", "k-1"), 202)
	if first.Replayed || !again.Replayed || again.Generation != first.Generation {
		t.Errorf("idempotent retry: first %+v, again %+v", first, again)
	}
	problem(t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", body, "Idempotency-Key", "k-2"), 409)
	// The same key on another kind of request is another request.
	rm := decode[api.Accepted](t, e.do(t, "DELETE", "/v1/applications/retried", operatorToken, "", nil, "Idempotency-Key", "k-1"), 202)
	if rm.Replayed || rm.Phase != "Removing" {
		t.Errorf("removal with a deploy's key: %+v", rm)
	}
	// A client's request id is not an idempotency key.
	problem(t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", appJSON("cr-form"), "X-Request-Id", "same"), 409)
	problem(t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", appJSON("cr-form"), "X-Request-Id", "same"), 409)
	problem(t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", appJSON("x"), "Idempotency-Key", "has spaces"), 400)
}

func TestSubmitRejectsBadBodies(t *testing.T) {
	e := newEnv(t, handlers.Config{MaxBodyBytes: 64 << 10})
	big := bytes.Repeat([]byte("a"), 65<<10)
	cases := map[string]struct {
		contentType string
		body        []byte
		hdr         []string
		status      int
		fields      []string
		detail      string
	}{
		"empty body":             {"application/json", nil, nil, 400, nil, "the request body is empty"},
		"blank body":             {"application/yaml", []byte("  \n"), nil, 400, nil, "the request body is empty"},
		"not JSON":               {"application/json", []byte(`{"MLSysOpsApp": `), nil, 400, nil, "is not valid JSON"},
		"not YAML":               {"application/yaml", []byte("a: [1, 2\nb: c"), nil, 400, nil, "is not valid YAML"},
		"a list":                 {"application/json", []byte(`[1, 2]`), nil, 422, []string{""}, "must be a mapping"},
		"two YAML documents":     {"application/yaml", []byte("MLSysOpsApp: {}\n---\nMLSysOpsApp: {}\n"), nil, 422, []string{""}, "2 YAML documents"},
		"another kind":           {"application/yaml", repoFile(t, "descriptions/nodes/edge-1.yaml"), nil, 422, []string{"MLSysOpsNode"}, ""},
		"unnamed":                {"application/json", []byte(`{"MLSysOpsApp": {"components": [{"metadata": {"name": "c"}, "containers": [{"image": "i"}]}]}}`), nil, 422, []string{"MLSysOpsApp.name"}, ""},
		"too large by length":    {"application/json", big, nil, 413, nil, "larger than 65536 bytes"},
		"form encoded":           {"application/x-www-form-urlencoded", appJSON("f"), nil, 415, nil, "application/x-www-form-urlencoded"},
		"text/plain":             {"text/plain", appJSON("f"), nil, 415, nil, "send application/json, application/yaml"},
		"latin-1 JSON":           {"application/json; charset=iso-8859-1", appJSON("f"), nil, 415, nil, ""},
		"gzip":                   {"application/json", appJSON("f"), []string{"Content-Encoding", "gzip"}, 415, nil, "Content-Encoding"},
		"malformed content type": {"application/json;;;=", appJSON("f"), nil, 415, nil, ""},
		"every problem with its field path": {"application/yaml", []byte(`MLSysOpsApp:
  name: Bad_Name
  cluster_placement: {instances: 0, cloud_provider: ibm}
  components:
    - metadata: {name: a}
      depends_on: [ghost]
      restart_policy: Sometimes
      containers:
        - image: ""
          platform_requirements: {gpu: {requests: 1, limits: 2}}
          ports: [{container_port: 70000}]
    - metadata: {name: a}
  permitted_actions: [teleport]
`), nil, 422, []string{
			"MLSysOpsApp.cluster_placement.cloud_provider",
			"MLSysOpsApp.cluster_placement.instances",
			"MLSysOpsApp.components[0].containers[0].image",
			"MLSysOpsApp.components[0].containers[0].platform_requirements.gpu.requests",
			"MLSysOpsApp.components[0].containers[0].ports[0].container_port",
			"MLSysOpsApp.components[0].depends_on[0]",
			"MLSysOpsApp.components[0].restart_policy",
			"MLSysOpsApp.components[1].containers",
			"MLSysOpsApp.components[1].metadata.name",
			"MLSysOpsApp.name",
			"MLSysOpsApp.permitted_actions[0]",
		}, "11 problems"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/v1/applications", "/v1/ml-deployments", "/apps/deploy", "/ml/deploy_ml"} {
				p := problem(t, e.do(t, "POST", path, operatorToken, tc.contentType, tc.body, tc.hdr...), tc.status)
				if tc.detail != "" && !strings.Contains(p.Detail, tc.detail) {
					t.Errorf("%s: detail %q lacks %q", path, p.Detail, tc.detail)
				}
				if tc.fields != nil {
					got := fields(p.Problems)
					if tc.fields[0] != "" || len(got) != 1 {
						if diff := cmp.Diff(tc.fields, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" && path != "/v1/ml-deployments" && path != "/ml/deploy_ml" {
							t.Errorf("%s: problem fields (-want +got):\n%s", path, diff)
						}
					}
					for _, fp := range p.Problems {
						if fp.Type == "" || fp.Message == "" {
							t.Errorf("%s: incomplete problem %+v", path, fp)
						}
					}
				}
			}
		})
	}
	// A chunked body without Content-Length is cut at the limit too.
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/applications", struct{ *bytes.Reader }{bytes.NewReader(big)})
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || req.ContentLength != 0 {
		t.Errorf("chunked oversized body: %d (content length %d)", resp.StatusCode, req.ContentLength)
	}
}

func TestListPagination(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	ctx := ctxT(t)
	for i := 0; i < 25; i++ {
		if _, err := e.op.Applications().Submit(ctx, appJSON(fmt.Sprintf("app-%02d", i)), client.JSON); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 25; i += 3 {
		if _, err := e.store.Applications().SetStatus(ctx, fmt.Sprintf("app-%02d", i), state.StatusUpdate{Phase: "Running"}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	o := client.ListOptions{Limit: 10}
	for pages := 0; ; pages++ {
		page, err := e.view.Applications().List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != 25 || len(page.Items) > 10 {
			t.Fatalf("page %d: total %d, %d items", pages, page.Total, len(page.Items))
		}
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.Continue == "" {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
		o.Continue = page.Continue
	}
	if len(ids) != 25 || ids[0] != "app-00" || ids[24] != "app-24" {
		t.Errorf("ids over every page: %v", ids)
	}
	running, err := e.view.Applications().List(ctx, client.ListOptions{Phases: []string{"Running"}})
	if err != nil {
		t.Fatal(err)
	}
	if running.Total != 9 || len(running.Items) != 9 || running.Items[0].ID != "app-00" || running.Items[1].ID != "app-03" {
		t.Errorf("phase filter: %+v", running)
	}
	both, err := e.view.Applications().ListAll(ctx, "Running", "Queued")
	if err != nil || len(both) != 25 {
		t.Errorf("two phases: %d items, %v", len(both), err)
	}

	p := problem(t, e.do(t, "GET", "/v1/applications?phase=Sleeping&limit=0&continue=!!", viewerToken, "", nil), 400)
	if diff := cmp.Diff([]string{"phase", "limit", "continue"}, fields(p.Problems)); diff != "" {
		t.Errorf("query problems (-want +got):\n%s", diff)
	}
	problem(t, e.do(t, "GET", "/v1/applications?limit=1001", viewerToken, "", nil), 400)
	problem(t, e.do(t, "GET", "/v1/applications?limit=ten", viewerToken, "", nil), 400)
	problem(t, e.do(t, "GET", "/v1/applications?continue=Tm90IGFuIGlk", viewerToken, "", nil), 400)
}

func TestGetUpdateRemove(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	ctx := ctxT(t)
	if _, err := e.op.Applications().Submit(ctx, repoFile(t, "examples/apps/gpu-inference.yaml"), client.YAML); err != nil {
		t.Fatal(err)
	}
	app, err := e.view.Applications().Get(ctx, "llm-inference")
	if err != nil {
		t.Fatal(err)
	}
	if app.Phase != "Queued" || app.PhaseSource != "submission" || app.Resource != nil || len(app.Components) != 2 ||
		app.Components[0].Name != "llm-server" || app.Components[0].GPUModel != "NVIDIA-H100-80GB-HBM3" || app.Components[0].GPUs != 1 ||
		len(app.Warnings) != 1 || len(app.Description) == 0 {
		t.Errorf("application: %+v", app)
	}

	for _, id := range []string{"nope", "Bad_ID", strings.Repeat("a", 64), "a%2Fb"} {
		problem(t, e.do(t, "GET", "/v1/applications/"+id, viewerToken, "", nil), 404)
		problem(t, e.do(t, "GET", "/v1/applications/"+id+"/performance", viewerToken, "", nil), 404)
		problem(t, e.do(t, "DELETE", "/v1/applications/"+id, operatorToken, "", nil), 404)
		problem(t, e.do(t, "PUT", "/v1/applications/"+id, operatorToken, "application/json", appJSON("nope")), 404)
	}
	// The description must name the application in the path.
	p := problem(t, e.do(t, "PUT", "/v1/applications/llm-inference", operatorToken, "application/json", appJSON("other")), 422)
	if diff := cmp.Diff([]string{"metadata.name"}, fields(p.Problems)); diff != "" {
		t.Error(diff)
	}
	acc, err := e.op.Applications().Update(ctx, "llm-inference", bytes.Replace(repoFile(t, "examples/apps/gpu-inference.yaml"), []byte("1.4.2"), []byte("1.4.3"), 1), client.YAML)
	if err != nil || acc.Generation != 2 || acc.Request != "update" || acc.Phase != "Queued" {
		t.Fatalf("update: %+v, %v", acc, err)
	}
	rm, err := e.op.Applications().Remove(ctx, "llm-inference")
	if err != nil || rm.Phase != "Removing" || rm.Generation != 3 {
		t.Fatalf("remove: %+v, %v", rm, err)
	}
	if _, err := e.op.Applications().Remove(ctx, "llm-inference"); !client.IsConflict(err) {
		t.Errorf("second remove: %v, want 409", err)
	}
	if _, err := e.op.Applications().Update(ctx, "llm-inference", repoFile(t, "examples/apps/gpu-inference.yaml"), client.YAML); !client.IsConflict(err) {
		t.Errorf("update while removing: %v, want 409", err)
	}
	app, err = e.view.Applications().Get(ctx, "llm-inference")
	if err != nil || app.Phase != "Removing" || app.LastRequest != "remove" {
		t.Errorf("after remove: %+v, %v", app, err)
	}
	// Once the agent is done and forgets it, the name is free again.
	if err := e.store.Applications().Forget(ctx, "llm-inference"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.view.Applications().Get(ctx, "llm-inference"); !client.IsNotFound(err) {
		t.Errorf("forgotten application: %v, want 404", err)
	}
}

func TestPerformanceFromTelemetry(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	ctx := ctxT(t)
	if _, err := e.op.Applications().Submit(ctx, repoFile(t, "examples/apps/gpu-inference.yaml"), client.YAML); err != nil {
		t.Fatal(err)
	}
	perf, err := e.view.Applications().Performance(ctx, "llm-inference")
	if err != nil {
		t.Fatal(err)
	}
	if len(perf.Metrics) != 1 || perf.Metrics[0].Value != nil || perf.Metrics[0].Reason != "the component is not placed yet" ||
		perf.GlobalSatisfaction == nil || perf.GlobalSatisfaction.Value != nil {
		t.Errorf("before placement: %+v", perf)
	}
	// As the agents would record it: the placement, and the node's
	// latest telemetry.
	if _, err := e.store.Applications().SetStatus(ctx, "llm-inference", state.StatusUpdate{Phase: "Running",
		Placement: map[string]string{"llm-server": "cloud-1/cloud-gpu-h100-1", "gateway": "cloud-1/cloud-1"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if err := e.store.Telemetry().Put(ctx, state.Sample{Node: "cloud-gpu-h100-1", Time: now,
		Metrics: map[string]float64{`llm_request_latency_p95_ms{app="llm-inference",component="llm-server"}`: 420}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	perf, err = e.view.Applications().Performance(ctx, "llm-inference")
	if err != nil {
		t.Fatal(err)
	}
	m := perf.Metrics[0]
	if m.Value == nil || *m.Value != 420 || m.Satisfied == nil || !*m.Satisfied || m.Node != "cloud-gpu-h100-1" || !m.SampledAt.Equal(now) {
		t.Errorf("metric: %+v", m)
	}
	if g := perf.GlobalSatisfaction; g.Value == nil || *g.Value != 1 || g.Satisfied == nil || !*g.Satisfied {
		t.Errorf("global satisfaction: %+v", g)
	}
	// The upstream shape: [[metric, {value, ...}]].
	var up [][2]json.RawMessage
	if err := json.Unmarshal(e.do(t, "GET", "/apps/performance/llm-inference", viewerToken, "", nil).Body, &up); err != nil || len(up) != 1 ||
		string(up[0][0]) != `"llm_request_latency_p95_ms"` || !strings.Contains(string(up[0][1]), `"value":420`) {
		t.Errorf("upstream performance: %s, %v", up, err)
	}
}

func TestUpstreamApplicationPaths(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	up := decode[api.UpstreamDeployed](t, e.do(t, "POST", "/apps/deploy", operatorToken, "application/json",
		[]byte(`{"MLSysOpsApp": {"name": "test-application", "components": [{"metadata": {"name": "server-app", "uid": "server-app-v1"},
		"containers": [{"image": "harbor.nbfc.io/mlsysops/test-app:latest", "command": ["python", "TcpServer.py"]}]}]}}`)), 200)
	if up != (api.UpstreamDeployed{AppID: "test-application", Status: "Queued successfully"}) {
		t.Errorf("deploy: %+v", up)
	}
	problem(t, e.do(t, "POST", "/apps/deploy", operatorToken, "application/yaml", repoFile(t, "examples/apps/test-application.yaml")), 409)
	for _, p := range []string{"/apps/list_all/", "/apps/list_all"} {
		m := decode[api.UpstreamStatusMap](t, e.do(t, "GET", p, viewerToken, "", nil), 200)
		if diff := cmp.Diff(map[string]string{"test-application": "Queued"}, m.SystemStatus); diff != "" {
			t.Errorf("%s: %s", p, diff)
		}
	}
	st := decode[api.UpstreamAppStatus](t, e.do(t, "GET", "/apps/status/test-application", viewerToken, "", nil), 200)
	if st != (api.UpstreamAppStatus{AppID: "test-application", Status: "Queued"}) {
		t.Errorf("status: %+v", st)
	}
	for _, p := range []string{"/apps/apps/details/test-application", "/apps/details/test-application"} {
		d := decode[api.UpstreamAppDetails](t, e.do(t, "GET", p, viewerToken, "", nil), 200)
		if d.State != "Queued" || len(d.Components) != 1 || d.Components[0].Name != "server-app" || d.Components[0].Details.Pods == nil {
			t.Errorf("%s: %+v", p, d)
		}
	}
	// Upstream answered 500 for unknown ids; 404 here.
	for _, p := range []string{"/apps/status/ghost", "/apps/apps/details/ghost", "/apps/details/ghost", "/apps/performance/ghost"} {
		problem(t, e.do(t, "GET", p, viewerToken, "", nil), 404)
	}
	problem(t, e.do(t, "DELETE", "/apps/remove/ghost", operatorToken, "", nil), 404)
	rm := decode[api.UpstreamRemoved](t, e.do(t, "DELETE", "/apps/remove/test-application", operatorToken, "", nil), 200)
	if rm.AppID != "test-application" || rm.Message == "" {
		t.Errorf("remove: %+v", rm)
	}
	problem(t, e.do(t, "DELETE", "/apps/remove/test-application", operatorToken, "", nil), 409)
}

func TestMLDeployments(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	ctx := ctxT(t)
	legacy := []byte(`{"MLSysOpsApplication": {"name": "ml-app-1", "mlsysops-id": "d41d8cd9",
	  "clusterPlacement": {"clusterID": ["*"], "instances": 1},
	  "components": [{"Component": {"name": "ml-comp", "uid": "d41d8cd9"}, "nodePlacement": {"node": "*", "continuumLayer": ["cloud"]},
	    "restartPolicy": "OnFailure", "containers": [{"image": "registry.mlsysops.eu/usecases/augmenta-demo-testbed/d41d8cd9:0.0.1",
	    "imagePullPolicy": "IfNotPresent", "ports": [{"containerPort": 8000}]}]}]}}`)
	res := decode[api.UpstreamResult](t, e.do(t, "POST", "/ml/deploy_ml", operatorToken, "application/json", legacy), 200)
	if res.Status != "success" || res.Message != "Deployment request added to queue" || res.DeploymentID != "d41d8cd9" {
		t.Errorf("deploy_ml: %+v", res)
	}
	problem(t, e.do(t, "POST", "/v1/ml-deployments", operatorToken, "application/json", legacy), 409)
	// ML deployments and applications share one name space.
	problem(t, e.do(t, "POST", "/v1/applications", operatorToken, "application/json", appJSON("d41d8cd9")), 409)
	if _, err := e.op.Applications().Submit(ctx, appJSON("taken"), client.JSON); err != nil {
		t.Fatal(err)
	}
	problem(t, e.do(t, "POST", "/v1/ml-deployments", operatorToken, "application/json", appJSON("taken")), 409)

	acc, err := e.op.MLDeployments().Submit(ctx, appJSON("model-2"), client.JSON)
	if err != nil || acc.Href != "/v1/ml-deployments/model-2" {
		t.Fatalf("v1 ML submit: %+v %v", acc, err)
	}
	list, err := e.view.MLDeployments().ListAll(ctx)
	if err != nil || len(list) != 2 {
		t.Errorf("ML list: %+v %v", list, err)
	}
	got, err := e.view.MLDeployments().Get(ctx, "d41d8cd9")
	if err != nil || got.Phase != "Queued" || len(got.Components) != 1 || got.Components[0].Name != "ml-comp" {
		t.Errorf("ML get: %+v %v", got, err)
	}
	if _, err := e.view.MLDeployments().Get(ctx, "taken"); !client.IsNotFound(err) {
		t.Errorf("an application is not an ML deployment: %v", err)
	}
	m := decode[api.UpstreamStatusMap](t, e.do(t, "GET", "/ml/list_all/", viewerToken, "", nil), 200)
	if len(m.SystemStatus) != 2 || m.SystemStatus["d41d8cd9"] != "Queued" {
		t.Errorf("ml list_all: %+v", m)
	}
	var raw map[string]string
	if err := json.Unmarshal(e.do(t, "GET", "/ml/status/d41d8cd9", viewerToken, "", nil).Body, &raw); err != nil ||
		raw["Model "] != "d41d8cd9" || raw["model"] != "d41d8cd9" || raw["status"] != "Queued" {
		t.Errorf("ml status: %v %v", raw, err)
	}
	problem(t, e.do(t, "GET", "/ml/status/ghost", viewerToken, "", nil), 404)
	problem(t, e.do(t, "DELETE", "/ml/remove/ghost", operatorToken, "", nil), 404)
	rm := decode[api.UpstreamModelRemoved](t, e.do(t, "DELETE", "/ml/remove/d41d8cd9", operatorToken, "", nil), 200)
	if rm.ModelUID != "d41d8cd9" {
		t.Errorf("ml remove: %+v", rm)
	}
	if _, err := e.op.MLDeployments().Remove(ctx, "model-2"); err != nil {
		t.Error(err)
	}
	perf, err := e.view.MLDeployments().Performance(ctx, "model-2")
	if err != nil || len(perf.Metrics) != 1 {
		t.Errorf("ML performance: %+v %v", perf, err)
	}
	p := problem(t, e.do(t, "POST", "/v1/ml-deployments", operatorToken, "application/json",
		[]byte(`{"MLSysOpsApplication": {"mlsysops-id": "m3", "components": [{"Component": {"name": "c"}, "containers": [{"image": ""}]}]}}`)), 422)
	if diff := cmp.Diff([]string{"MLSysOpsApplication.components[0].containers[0].image"}, fields(p.Problems)); diff != "" {
		t.Errorf("legacy problems: %s", diff)
	}
}

func TestAgentsWithoutXMPP(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	ctx := ctxT(t)
	seen := time.Now().UTC().Truncate(time.Second)
	for _, a := range []state.Agent{
		{JID: "mls-continuum@mlsysops.local", Layer: "continuum", Online: true, LastSeen: seen},
		{JID: "cloud-1@mlsysops.local", Layer: "cluster", Cluster: "cloud-1", Online: true, LastSeen: seen},
		{JID: "edge-1@mlsysops.local", Layer: "node", Cluster: "edge-1", Node: "edge-1", Online: false, LastSeen: seen},
	} {
		if err := e.store.Agents().Register(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.view.Agents(ctx, "")
	if err != nil || len(all) != 3 || all[0].JID != "cloud-1@mlsysops.local" || !all[0].LastSeen.Equal(seen) {
		t.Fatalf("agents: %+v %v", all, err)
	}
	nodes, err := e.view.Agents(ctx, "node")
	if err != nil || len(nodes) != 1 || nodes[0].Online {
		t.Errorf("node agents: %+v %v", nodes, err)
	}
	off := decode[api.AgentList](t, e.do(t, "GET", "/v1/agents?online=false", viewerToken, "", nil), 200)
	if len(off.Items) != 1 || off.Items[0].JID != "edge-1@mlsysops.local" {
		t.Errorf("offline agents: %+v", off)
	}
	p := problem(t, e.do(t, "GET", "/v1/agents?layer=fog&online=maybe", viewerToken, "", nil), 400)
	if diff := cmp.Diff([]string{"layer", "online"}, fields(p.Problems)); diff != "" {
		t.Error(diff)
	}
	a, err := e.view.Agent(ctx, "cloud-1@mlsysops.local")
	if err != nil || a.Layer != "cluster" || a.Cluster != "cloud-1" {
		t.Errorf("agent: %+v %v", a, err)
	}
	for _, jid := range []string{"ghost@mlsysops.local", "no-at-sign", "a@b/resource", url.PathEscape("sp ace@x")} {
		problem(t, e.do(t, "GET", "/v1/agents/"+jid, viewerToken, "", nil), 404)
		problem(t, e.do(t, "POST", "/v1/agents/"+jid+"/ping", viewerToken, "", nil), 404)
	}
	// Without an XMPP account, round trips are unavailable, not errors.
	problem(t, e.do(t, "POST", "/v1/agents/cloud-1@mlsysops.local/ping", viewerToken, "", nil), 503)
	problem(t, e.do(t, "GET", "/manage/ping", viewerToken, "", nil), 503)
	problem(t, e.do(t, "PUT", "/manage/mode/1", operatorToken, "", nil), 503)
	problem(t, e.do(t, "PUT", "/v1/agents/mode", operatorToken, "application/json", []byte(`{"mode": 1}`)), 503)
	// Bad requests are refused before anything is sent.
	cases := map[string]struct {
		path, ct, body string
		status         int
		fields         []string
	}{
		"no mode":           {"/v1/agents/mode", "application/json", `{}`, 422, []string{"mode"}},
		"mode 2":            {"/v1/agents/mode", "application/json", `{"mode": 2}`, 422, []string{"mode"}},
		"mode as text":      {"/v1/agents/mode", "application/json", `{"mode": "ML"}`, 422, []string{"mode"}},
		"unknown field":     {"/v1/agents/mode", "application/json", `{"mode": 1, "nodes": ["x"]}`, 422, []string{"nodes"}},
		"not JSON":          {"/v1/agents/mode", "application/json", `{"mode": 1`, 400, nil},
		"YAML":              {"/v1/agents/mode", "application/yaml", `mode: 1`, 415, nil},
		"agents in path":    {"/v1/agents/cloud-1@mlsysops.local/mode", "application/json", `{"mode": 1, "agents": ["x@y"]}`, 422, []string{"agents"}},
		"unregistered path": {"/v1/agents/ghost@mlsysops.local/mode", "application/json", `{"mode": 1}`, 404, nil},
	}
	for name, tc := range cases {
		p := problem(t, e.do(t, "PUT", tc.path, operatorToken, tc.ct, []byte(tc.body)), tc.status)
		if tc.fields != nil {
			if diff := cmp.Diff(tc.fields, fields(p.Problems)); diff != "" {
				t.Errorf("%s: %s", name, diff)
			}
		}
	}
	for _, mode := range []string{"2", "-1", "one", "1.0"} {
		problem(t, e.do(t, "PUT", "/manage/mode/"+mode, operatorToken, "", nil), 400)
	}
}

func TestPoliciesInDirectories(t *testing.T) {
	dirs := map[string]string{"continuum": t.TempDir(), "cluster": t.TempDir(), "node": t.TempDir()}
	e := newEnv(t, handlers.Config{Policies: policystore.NewDirStore(map[string][]string{"continuum": {dirs["continuum"]}, "cluster": {dirs["cluster"]}, "node": {dirs["node"]}})})
	ctx := ctxT(t)
	src := []byte("def initialize():\n    return {\"scope\": \"application\"}\n\n" +
		"def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):\n    return False, context\n\n" +
		"def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):\n    return {}, context\n")
	p, created, err := e.op.PutPolicy(ctx, "cluster", "policy-relocate.star", src)
	if err != nil || !created || p.Size != len(src) || p.Location != dirs["cluster"] {
		t.Fatalf("put: %+v %v %v", p, created, err)
	}
	if b, err := os.ReadFile(filepath.Join(dirs["cluster"], "policy-relocate.star")); err != nil || !bytes.Equal(b, src) {
		t.Errorf("policy file: %q %v", b, err)
	}
	if _, created, err := e.op.PutPolicy(ctx, "cluster", "policy-relocate.star", src); err != nil || created {
		t.Errorf("replace: created %v, %v", created, err)
	}
	body, _ := json.Marshal(map[string]string{"source": string(src)})
	if r := e.do(t, "PUT", "/v1/policies/node/policy-json.star", operatorToken, "application/json", body); r.StatusCode != 201 {
		t.Errorf("JSON upload: %d %s", r.StatusCode, r.Body)
	}
	list, err := e.view.Policies(ctx, "")
	if err != nil || len(list) != 2 || list[0].Layer != "cluster" || list[1].Name != "policy-json.star" || list[0].Source != "" {
		t.Errorf("list: %+v %v", list, err)
	}
	got, err := e.view.Policy(ctx, "cluster", "policy-relocate.star")
	if err != nil || got.Source != string(src) {
		t.Errorf("get: %+v %v", got, err)
	}

	cases := map[string]struct {
		path, ct, body string
		status         int
		fields         []string
		detail         string
	}{
		"syntax error":         {"/v1/policies/node/policy-bad.star", "text/plain", "def initialize(:\n", 422, []string{"source"}, ""},
		"missing functions":    {"/v1/policies/node/policy-bad.star", "text/plain", "x = 1\n", 422, []string{"source", "source", "source"}, ""},
		"wrong parameters":     {"/v1/policies/node/policy-bad.star", "text/plain", "def initialize(a):\n  pass\ndef analyze():\n  pass\ndef plan(a,b,c,d,e,f):\n  pass\n", 422, []string{"source", "source"}, ""},
		"python file name":     {"/v1/policies/node/policy-x.py", "text/plain", string(src), 422, []string{"name"}, ""},
		"JSON without source":  {"/v1/policies/node/policy-x.star", "application/json", `{"src": "x"}`, 422, []string{"src"}, ""},
		"unknown layer":        {"/v1/policies/fog/policy-x.star", "text/plain", string(src), 404, nil, ""},
		"octet-stream":         {"/v1/policies/node/policy-x.star", "application/octet-stream", string(src), 415, nil, ""},
		"empty":                {"/v1/policies/node/policy-x.star", "text/plain", "", 400, nil, ""},
		"too large":            {"/v1/policies/node/policy-x.star", "text/plain", strings.Repeat("#", 400<<10), 413, nil, ""},
		"largest policy + 1 B": {"/v1/policies/node/policy-x.star", "text/plain", strings.Repeat("#", policystore.MaxSourceSize+1), 422, []string{"source"}, ""},
	}
	for name, tc := range cases {
		p := problem(t, e.do(t, "PUT", tc.path, operatorToken, tc.ct, []byte(tc.body)), tc.status)
		if tc.fields != nil {
			if diff := cmp.Diff(tc.fields, fields(p.Problems)); diff != "" {
				t.Errorf("%s: %s (%+v)", name, diff, p.Problems)
			}
		}
	}
	p422 := problem(t, e.do(t, "PUT", "/v1/policies/node/policy-bad.star", operatorToken, "text/plain", []byte("def initialize():\n  return {\n")), 422)
	if !strings.Contains(p422.Problems[0].Message, "line 3") {
		t.Errorf("syntax error without its line: %+v", p422.Problems)
	}
	problem(t, e.do(t, "GET", "/v1/policies?layer=fog", viewerToken, "", nil), 400)
	problem(t, e.do(t, "GET", "/v1/policies/node/policy-ghost.star", viewerToken, "", nil), 404)
	problem(t, e.do(t, "GET", "/v1/policies/node/not-a-policy", viewerToken, "", nil), 404)
	if err := e.op.DeletePolicy(ctx, "cluster", "policy-relocate.star"); err != nil {
		t.Fatal(err)
	}
	if err := e.op.DeletePolicy(ctx, "cluster", "policy-relocate.star"); !client.IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dirs["cluster"], "policy-relocate.star")); !os.IsNotExist(err) {
		t.Errorf("policy file still there: %v", err)
	}
}

func TestWithoutOptionalBackends(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	for _, r := range []struct{ method, path, ct, body string }{
		{"GET", "/v1/infrastructure", "", ""},
		{"GET", "/v1/infrastructure/clusters", "", ""},
		{"GET", "/v1/infrastructure/clusters/cloud-1", "", ""},
		{"GET", "/v1/infrastructure/nodes", "", ""},
		{"GET", "/v1/infrastructure/nodes/edge-1", "", ""},
		{"POST", "/v1/infrastructure/nodes", "application/yaml", "MLSysOpsNode: {}"},
		{"PUT", "/v1/infrastructure/nodes/edge-1", "application/yaml", "MLSysOpsNode: {}"},
		{"DELETE", "/v1/infrastructure/nodes/edge-1", "", ""},
		{"GET", "/v1/policies", "", ""},
		{"GET", "/infra/list/", "", ""},
		{"POST", "/infra/register", "application/yaml", "MLSysOpsNode: {}"},
	} {
		p := problem(t, e.do(t, r.method, r.path, operatorToken, r.ct, []byte(r.body)), 503)
		if !strings.Contains(p.Detail, "start it with") {
			t.Errorf("%s %s: %s", r.method, r.path, p.Detail)
		}
	}
}

func TestRedisDownIsUnavailable(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	ctx := ctxT(t)
	if _, err := e.op.Applications().Submit(ctx, appJSON("before"), client.JSON); err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, "GET", "/readyz", "", "", nil)
	h := decode[api.Health](t, r, 503)
	if h.Status != "unavailable" || h.Checks["redis"] == "ok" {
		t.Errorf("readyz: %+v", h)
	}
	if r := e.do(t, "GET", "/healthz", "", "", nil); r.StatusCode != 200 {
		t.Errorf("healthz with Redis down: %d", r.StatusCode)
	}
	for _, rq := range []struct{ method, path string }{
		{"GET", "/v1/applications"}, {"GET", "/v1/applications/before"}, {"POST", "/v1/applications"},
		{"DELETE", "/v1/applications/before"}, {"GET", "/apps/list_all/"}, {"GET", "/v1/agents"},
	} {
		var body []byte
		if rq.method == "POST" {
			body = appJSON("during")
		}
		p := problem(t, e.do(t, rq.method, rq.path, operatorToken, "application/json", body), 503)
		if !strings.Contains(p.Detail, "Redis") {
			t.Errorf("%s %s: %s", rq.method, rq.path, p.Detail)
		}
	}
	if err := e.redis.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for e.do(t, "GET", "/readyz", "", "", nil).StatusCode != 200 {
		if time.Now().After(deadline) {
			t.Fatal("readyz never recovered")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := e.view.Applications().Get(ctx, "before"); err != nil {
		t.Errorf("after Redis came back: %v", err)
	}
}

func TestRequestIDsAndMetrics(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	r := e.do(t, "GET", "/v1/applications/ghost", viewerToken, "", nil, "X-Request-Id", "trace-42")
	if p := problem(t, r, 404); p.RequestID != "trace-42" {
		t.Errorf("request id %q, want the client's", p.RequestID)
	}
	r = e.do(t, "GET", "/v1/applications/ghost", viewerToken, "", nil, "X-Request-Id", "bad id with spaces")
	if id := r.Header.Get("X-Request-Id"); id == "" || id == "bad id with spaces" {
		t.Errorf("malformed request id echoed: %q", id)
	}
	e.do(t, "POST", "/v1/applications", operatorToken, "application/json", appJSON("metered"))
	e.do(t, "GET", "/nowhere", viewerToken, "", nil)
	m := string(e.do(t, "GET", "/metrics", "", "", nil).Body)
	for _, want := range []string{
		`mlsysops_northbound_requests_total{code="202",method="POST",route="/v1/applications"} 1`,
		`mlsysops_northbound_requests_total{code="404",method="GET",route="/v1/applications/{id}"} 2`,
		`mlsysops_northbound_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`mlsysops_northbound_request_duration_seconds_count{method="POST",route="/v1/applications"} 1`,
		`mlsysops_northbound_requests_in_flight 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestConcurrentDeploysOneWins: of many simultaneous deploys of one name,
// exactly one is accepted and the others are conflicts, never errors.
func TestConcurrentDeploysOneWins(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	const n = 16
	codes := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			resp, err := e.op.Do(context.Background(), "POST", "/v1/applications", appJSON("race"), client.JSON, nil)
			if err != nil {
				codes <- 0
				return
			}
			codes <- resp.StatusCode
		}()
	}
	count := map[int]int{}
	for i := 0; i < n; i++ {
		count[<-codes]++
	}
	if count[202] != 1 || count[409] != n-1 {
		t.Errorf("status counts %v, want one 202 and %d 409", count, n-1)
	}
}

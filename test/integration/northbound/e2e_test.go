package northbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/cmd/mls/commands"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

// syncBuffer is a buffer a running command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mls runs the CLI in-process with the environment as it is.
func mls(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut syncBuffer
	code := commands.Execute(context.Background(), commands.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args)
	return code, out.String(), errOut.String()
}

func mustMLS(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := mls(t, args...)
	if code != 0 {
		t.Fatalf("mls %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// background runs a long mls command (watch) and returns its output and
// exit code channel.
func background(t *testing.T, args ...string) (*syncBuffer, <-chan int) {
	t.Helper()
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- commands.Execute(context.Background(), commands.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out}, args)
	}()
	return out, done
}

// waitOutput waits until a running command printed want.
func waitOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCLIEndToEnd drives the API through mls on the testbed: deploy,
// list, watch, details, performance, remove. The continuum and cluster
// agents, which move an application to Running, are stood in for here by
// writing what they write: the MLSysOpsApp and its status in Karmada, the
// node's telemetry and, once removed, forgetting the status in Redis.
func TestCLIEndToEnd(t *testing.T) {
	policyDirs := map[string]string{"continuum": t.TempDir(), "cluster": t.TempDir(), "node": t.TempDir()}
	ke := newKarmadaEnv(t, handlers.Config{Policies: policystore.NewDirStore(map[string][]string{"continuum": {policyDirs["continuum"]}, "cluster": {policyDirs["cluster"]}, "node": {policyDirs["node"]}})})
	ctx := ctxT(t)
	t.Setenv("MLS_API_URL", ke.srv.URL)
	t.Setenv("MLS_TOKEN", operatorToken)
	example := filepath.Join(repoRoot(t), "examples", "apps", "gpu-inference.yaml")

	out := mustMLS(t, "apps", "deploy-app", "--path", example)
	if !strings.Contains(out, "Application llm-inference queued, phase Queued, generation 1.") || !strings.Contains(out, "mls watch llm-inference") {
		t.Errorf("deploy-app:\n%s", out)
	}
	code, _, errOut := mls(t, "apps", "deploy-app", "--path", example)
	if code != 1 || !strings.Contains(errOut, "already exists") || !strings.Contains(errOut, "HTTP 409") {
		t.Errorf("second deploy-app: exit %d\n%s", code, errOut)
	}
	if out := mustMLS(t, "apps", "list-all"); !strings.Contains(out, "llm-inference  Queued  deploy") {
		t.Errorf("list-all:\n%s", out)
	}
	var status map[string]string
	if err := json.Unmarshal([]byte(mustMLS(t, "apps", "get-app-status", "llm-inference", "-o", "json")), &status); err != nil || status["phase"] != "Queued" {
		t.Errorf("get-app-status -o json: %v %v", status, err)
	}

	// The agents' part, stood in for: the resource appears, deploys,
	// then runs.
	watch, done := background(t, "watch", "llm-inference", "--interval", "50ms", "--timeout", "2m")
	waitOutput(t, watch, "Queued")
	app := ke.placeApp(t, "examples/apps/gpu-inference.yaml", mlsysopsv1.MLSysOpsAppStatus{
		Phase: mlsysopsv1.AppDeploying,
		Components: []mlsysopsv1.ComponentStatus{
			{Name: "llm-server", Cluster: "cloud-1", Nodes: []string{"cloud-gpu-h100-1"}, Replicas: 1},
			{Name: "gateway", Cluster: "cloud-1", Nodes: []string{"cloud-1"}, Replicas: 1},
		},
	})
	waitOutput(t, watch, "Deploying")
	if err := ke.apps.Client().Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
		t.Fatal(err)
	}
	app.Status.Phase = mlsysopsv1.AppRunning
	app.Status.Components[0].ReadyReplicas, app.Status.Components[1].ReadyReplicas = 1, 1
	if err := ke.apps.Client().Status().Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Fatalf("watch exit %d:\n%s", code, watch.String())
	}
	lines := strings.Split(strings.TrimSpace(watch.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "Queued") || !strings.Contains(lines[1], "Deploying") ||
		!strings.Contains(lines[1], "ready 0/2") || !strings.Contains(lines[2], "Running") || !strings.Contains(lines[2], "ready 2/2") ||
		!strings.Contains(lines[2], "(was Deploying)") {
		t.Errorf("watch output:\n%s", watch.String())
	}

	out = mustMLS(t, "apps", "get-app-details", "llm-inference")
	for _, want := range []string{"Phase:         Running (from the resource)", "llm-server  cloud-1  cloud-gpu-h100-1  1/1", "1 x NVIDIA-H100-80GB-HBM3"} {
		if !strings.Contains(out, want) {
			t.Errorf("get-app-details lacks %q:\n%s", want, out)
		}
	}
	if err := ke.store.Telemetry().Put(ctx, state.Sample{Node: "cloud-gpu-h100-1", Time: time.Now(),
		Metrics: map[string]float64{"llm_request_latency_p95_ms": 310}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	out = mustMLS(t, "apps", "get-app-performance", "llm-inference")
	if !strings.Contains(out, "llm_request_latency_p95_ms  310") || !strings.Contains(out, "yes") || !strings.Contains(out, "Global satisfaction:  1 (threshold 0.8, greater_or_equal): yes") {
		t.Errorf("get-app-performance:\n%s", out)
	}

	// A viewer may look but not remove.
	t.Setenv("MLS_TOKEN", viewerToken)
	if out := mustMLS(t, "apps", "get-app-status", "llm-inference"); !strings.Contains(out, "Running") {
		t.Errorf("viewer status:\n%s", out)
	}
	code, _, errOut = mls(t, "apps", "remove-app", "llm-inference")
	if code != 1 || !strings.Contains(errOut, "needs the operator role") || !strings.Contains(errOut, "Use a token with the operator role.") {
		t.Errorf("viewer remove-app: exit %d\n%s", code, errOut)
	}
	t.Setenv("MLS_TOKEN", operatorToken)

	if out := mustMLS(t, "apps", "remove-app", "llm-inference"); !strings.Contains(out, "removal queued, phase Removing") {
		t.Errorf("remove-app:\n%s", out)
	}
	watch, done = background(t, "apps", "watch", "llm-inference", "--interval", "50ms", "--timeout", "2m")
	waitOutput(t, watch, "Removing")
	// The agents' part: the resource goes, and the status is forgotten.
	if err := ke.apps.Client().Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	if err := ke.store.Applications().Forget(ctx, "llm-inference"); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 || !strings.Contains(watch.String(), "Removed") {
		t.Errorf("watch of the removal: exit %d\n%s", code, watch.String())
	}
	code, _, errOut = mls(t, "apps", "get-app-status", "llm-inference")
	if code != 1 || !strings.Contains(errOut, `no application named "llm-inference"`) {
		t.Errorf("status after removal: exit %d\n%s", code, errOut)
	}

	// Upstream's variables work too.
	u, _ := url.Parse(ke.srv.URL)
	t.Setenv("MLS_API_URL", "")
	t.Setenv("MLS_API_IP", u.Hostname())
	t.Setenv("MLS_API_PORT", u.Port())
	out = mustMLS(t, "infra", "list-infra")
	for _, want := range []string{"CLUSTER", "cloud-1", "edge-1", "NVIDIA-H100-80GB-HBM3"} {
		if !strings.Contains(out, want) {
			t.Errorf("list-infra lacks %q:\n%s", want, out)
		}
	}
	if out := mustMLS(t, "infra", "list-infra", "--type", "Node", "-o", "yaml"); !strings.Contains(out, "name: far-edge-rpi-1") {
		t.Errorf("list-infra --type Node -o yaml:\n%s", out)
	}

	policy := filepath.Join(t.TempDir(), "policy-e2e.star")
	if err := os.WriteFile(policy, []byte("def initialize():\n    return {}\n"+
		"def analyze(context, a, s, m, t, ml):\n    return False, context\n"+
		"def plan(context, a, s, m, t, ml):\n    return {}, context\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustMLS(t, "agent", "set-policy", "--agent", "node", "--file", policy); !strings.Contains(out, "Policy policy-e2e.star added for the node agents") {
		t.Errorf("set-policy:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(policyDirs["node"], "policy-e2e.star")); err != nil {
		t.Errorf("policy not in the node agents' directory: %v", err)
	}
	if out := mustMLS(t, "agent", "list-policies"); !strings.Contains(out, "node   policy-e2e.star") {
		t.Errorf("list-policies:\n%s", out)
	}
	mustMLS(t, "agent", "delete-policy", "policy-e2e.star", "--agent", "node")
	bad := filepath.Join(t.TempDir(), "policy-bad.star")
	_ = os.WriteFile(bad, []byte("x = (\n"), 0o644)
	code, _, errOut = mls(t, "agent", "set-policy", "--agent", "node", "--file", bad)
	if code != 1 || !strings.Contains(errOut, "source: Invalid value: not valid Starlark") {
		t.Errorf("set-policy of a broken policy: exit %d\n%s", code, errOut)
	}
}

// TestCLIReportsProblems: a rejected description is listed problem by
// problem, and an unreachable API says what to do.
func TestCLIReportsProblems(t *testing.T) {
	e := newEnv(t, handlers.Config{})
	t.Setenv("MLS_API_URL", e.srv.URL)
	t.Setenv("MLS_TOKEN", operatorToken)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("MLSysOpsApp:\n  name: x\n  components:\n  - metadata: {name: a}\n    restart_policy: Sometimes\n    containers: [{image: ''}]\n"), 0o644)
	code, _, errOut := mls(t, "apps", "deploy-app", "--path", bad)
	for _, want := range []string{"HTTP 422", "MLSysOpsApp.components[0].containers[0].image:", "MLSysOpsApp.components[0].restart_policy: Unsupported value"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("deploy-app of a bad description lacks %q: exit %d\n%s", want, code, errOut)
		}
	}
	code, _, errOut = mls(t, "apps", "deploy-app")
	if code != 1 || !strings.Contains(errOut, "--path FILE or --uri URL") {
		t.Errorf("deploy-app without a file: exit %d\n%s", code, errOut)
	}
	t.Setenv("MLS_TOKEN", "")
	code, _, errOut = mls(t, "apps", "list-all")
	if code != 1 || !strings.Contains(errOut, "Set MLS_TOKEN") {
		t.Errorf("no token: exit %d\n%s", code, errOut)
	}
	t.Setenv("MLS_API_URL", "http://127.0.0.1:1")
	code, _, errOut = mls(t, "apps", "list-all")
	if code != 1 || !strings.Contains(errOut, "cannot reach the MLSysOps API at http://127.0.0.1:1") || !strings.Contains(errOut, "make up") {
		t.Errorf("unreachable API: exit %d\n%s", code, errOut)
	}
	code, _, errOut = mls(t, "apps", "list-all", "-o", "xml")
	if code != 1 || !strings.Contains(errOut, "--output must be table, json or yaml") {
		t.Errorf("bad -o: exit %d\n%s", code, errOut)
	}
	if out := mustMLS(t, "completion", "bash"); !strings.Contains(out, "__start_mls") {
		t.Error("no bash completion")
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

package northbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/cmd/mls/commands"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
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

// TestCLIEndToEnd drives the real system through mls: the continuum and
// cluster agents run as processes on the shared testbed
// (testbed.StartTestAgents), the API in-process on the testbed's Redis and
// Karmada. An application is deployed, followed to Running, found on the
// H100 node with its endpoints, measured, and removed until it is gone
// from the API, Redis, Karmada and its member cluster. An application
// applied straight to Karmada is listed and removed the same way. Pods on
// the testbed's simulated nodes run no containers, so the one stand-in is
// the application's own metric, written as its exporter would.
func TestCLIEndToEnd(t *testing.T) {
	tb := testbed.Shared(t)
	// No node agents run here: with no grace period the cluster agents
	// never take the nodes out of placement for their absence. A pod the
	// testbed's real nodes refuse (the gateway's foreign image) is placed
	// elsewhere after --pending-settle.
	ta := testbed.StartTestAgents(t, tb, testbed.TestAgentsOptions{Args: []string{"--child-grace-period", "0", "--pending-settle", "10s"}})
	ctx := ctxT(t)
	rdb, err := state.NewClient(state.Config{Addrs: []string{tb.RedisAddr}, Password: tb.RedisPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	store := state.New(rdb, state.Options{Logger: testLogger(t)})
	kcfg := tb.RESTConfig(t, testbed.ContextKarmada)
	k, err := infra.New(kcfg, infra.Options{})
	if err != nil {
		t.Fatal(err)
	}
	policyDirs := map[string]string{"continuum": t.TempDir(), "cluster": t.TempDir(), "node": t.TempDir()}
	e := newEnv(t, handlers.Config{Store: store, Infra: k,
		Policies: policystore.NewDirStore(map[string][]string{"continuum": {policyDirs["continuum"]}, "cluster": {policyDirs["cluster"]}, "node": {policyDirs["node"]}})})
	t.Setenv("MLS_API_URL", e.srv.URL)
	t.Setenv("MLS_TOKEN", operatorToken)
	name := uniq("llm-inference")
	example := filepath.Join(t.TempDir(), "gpu-inference.yaml")
	if err := os.WriteFile(example, bytes.Replace(repoFile(t, "examples/apps/gpu-inference.yaml"), []byte("name: llm-inference"), []byte("name: "+name), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	karmada := k.Client()
	cloud := kubernetes.NewForConfigOrDie(tb.RESTConfig(t, "cloud-1"))
	t.Cleanup(func() {
		_ = karmada.Delete(context.Background(), &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Namespace: mlsysopsv1.Namespace, Name: name}})
	})

	out := mustMLS(t, "apps", "deploy-app", "--path", example)
	if !strings.Contains(out, "Application "+name+" queued, phase Queued, generation 1.") || !strings.Contains(out, "mls watch "+name) {
		t.Errorf("deploy-app:\n%s", out)
	}
	code, _, errOut := mls(t, "apps", "deploy-app", "--path", example)
	if code != 1 || !strings.Contains(errOut, "already exists") || !strings.Contains(errOut, "HTTP 409") {
		t.Errorf("second deploy-app: exit %d\n%s", code, errOut)
	}
	if out := mustMLS(t, "apps", "list-all"); !strings.Contains(out, name+"  ") {
		t.Errorf("list-all:\n%s", out)
	}

	// The agents place it: the watch ends when it runs.
	watch, done := background(t, "watch", name, "--interval", "200ms", "--timeout", "3m")
	if code := <-done; code != 0 {
		t.Fatalf("watch exit %d:\n%s", code, watch.String())
	}
	lines := strings.Split(strings.TrimSpace(watch.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "Running") || !strings.Contains(last, "ready 2/2") {
		t.Errorf("watch output:\n%s", watch.String())
	}
	// The cluster agent sent the continuum agent the statuses it wrote
	// (application_status_report through ejabberd), and the continuum
	// agent took them.
	if n := statusReportsAccepted(t, ta); n < 1 {
		t.Errorf("the continuum agent accepted %d application status reports, want at least one", n)
	}
	// The agents' /metrics carry their controllers' work queues
	// (controller-runtime's registry beside the agent's own).
	for _, q := range []struct{ layer, name, controller string }{
		{testbed.LayerContinuum, "mls-continuum", "continuum-placement"},
		{testbed.LayerCluster, "cloud-1", "cluster-fluidity"},
	} {
		series := `workqueue_adds_total{controller="` + q.controller + `",name="` + q.controller + `"}`
		if v := testbed.MetricValue(t, ta.Get(q.layer, q.name).URL()+"/metrics", series); v < 1 {
			t.Errorf("%s agent %s: %s = %v, want at least 1", q.layer, q.name, series, v)
		}
	}

	out = mustMLS(t, "apps", "get-app-details", name)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`Phase:\s+Running \(from the resource\)`),
		regexp.MustCompile(`llm-server\s+cloud-1\s+cloud-gpu-h100-1\s+1/1\s+1 x NVIDIA-H100-80GB-HBM3`),
		regexp.MustCompile(`gateway\s+cloud-1\s+mls-` + name + `/gateway\s+http 8000/TCP\s+\S+:8000\s+\S+:\d+\s+yes`),
		regexp.MustCompile(`llm-server\s+cloud-1\s+mls-` + name + `/llm-server\s+http 8080/TCP\s+\S+:8080\s+-\s+yes`),
	} {
		if !want.MatchString(out) {
			t.Errorf("get-app-details does not match %s:\n%s", want, out)
		}
	}
	var app api.Application
	if err := json.Unmarshal([]byte(mustMLS(t, "apps", "get-app-details", name, "-o", "json")), &app); err != nil {
		t.Fatal(err)
	}
	if len(app.Endpoints) != 2 || app.Endpoints[0].Type != "NodePort" || app.Endpoints[0].ExternalURL == "" || app.Endpoints[1].Type != "ClusterIP" ||
		app.Endpoints[1].URL != "http://llm-server.mls-"+name+".svc:8080" || len(app.Warnings) != 0 {
		t.Errorf("endpoints: %+v, warnings %q", app.Endpoints, app.Warnings)
	}

	if err := store.Telemetry().Put(ctx, state.Sample{Node: "cloud-gpu-h100-1", Time: time.Now(),
		Metrics: map[string]float64{"llm_request_latency_p95_ms": 310}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	out = mustMLS(t, "apps", "get-app-performance", name)
	if !strings.Contains(out, "llm_request_latency_p95_ms  310") || !strings.Contains(out, "on cloud-gpu-h100-1") ||
		!strings.Contains(out, "Global satisfaction:  1 (threshold 0.8, greater_or_equal): yes") {
		t.Errorf("get-app-performance:\n%s", out)
	}

	// A viewer may look but not remove.
	t.Setenv("MLS_TOKEN", viewerToken)
	if out := mustMLS(t, "apps", "get-app-status", name); !strings.Contains(out, "Running") {
		t.Errorf("viewer status:\n%s", out)
	}
	code, _, errOut = mls(t, "apps", "remove-app", name)
	if code != 1 || !strings.Contains(errOut, "needs the operator role") || !strings.Contains(errOut, "Use a token with the operator role.") {
		t.Errorf("viewer remove-app: exit %d\n%s", code, errOut)
	}
	t.Setenv("MLS_TOKEN", operatorToken)

	// The watch starts before the removal and follows it past Running
	// (--until a phase it does not reach): a removal can be over before a
	// watch started after it polls once, and a watch whose first look
	// finds nothing cannot tell a removed application from a mistyped id.
	watch, done = background(t, "apps", "watch", name, "--until", "Failed", "--interval", "200ms", "--timeout", "3m")
	testbed.Poll(t, "the watch sees the application Running", 100*time.Millisecond, time.Minute, func(context.Context) error {
		if !strings.Contains(watch.String(), "Running") {
			return fmt.Errorf("watch so far:\n%s", watch.String())
		}
		return nil
	})
	if out := mustMLS(t, "apps", "remove-app", name); !strings.Contains(out, "removal queued, phase Removing") {
		t.Errorf("remove-app:\n%s", out)
	}
	if code := <-done; code != 0 || !strings.Contains(watch.String(), "Removed") {
		t.Errorf("watch of the removal: exit %d\n%s", code, watch.String())
	}
	code, _, errOut = mls(t, "apps", "get-app-status", name)
	if code != 1 || !strings.Contains(errOut, `no application named "`+name+`"`) {
		t.Errorf("status after removal: exit %d\n%s", code, errOut)
	}
	gone(t, store, karmada, cloud, name)

	// Applied straight to Karmada: listed with the phase of its status,
	// and removed through the API.
	direct := uniq("edge-camera")
	obj, errs := description.Parse("", bytes.Replace(repoFile(t, "examples/apps/edge-camera-arm64.yaml"), []byte("name: edge-camera"), []byte("name: "+direct), 1))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	res := obj.(*mlsysopsv1.MLSysOpsApp)
	res.Namespace = mlsysopsv1.Namespace
	if err := karmada.Create(ctx, res); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = karmada.Delete(context.Background(), res) })
	listed := regexp.MustCompile(direct + `\s+(Scheduling|Deploying|Running)\s+deploy\s+0`)
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		_, out, _ := mls(t, "apps", "list-all")
		return listed.MatchString(out), nil
	})
	if err != nil {
		t.Fatalf("an application applied to Karmada is not listed: %v\n%s", err, mustMLS(t, "apps", "list-all"))
	}
	if out := mustMLS(t, "apps", "remove-app", direct); !strings.Contains(out, "removal queued, phase Removing") {
		t.Errorf("remove-app of an application applied to Karmada:\n%s", out)
	}
	gone(t, store, karmada, kubernetes.NewForConfigOrDie(tb.RESTConfig(t, "edge-1")), direct)

	// Upstream's variables work too.
	u, _ := url.Parse(e.srv.URL)
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

// gone waits until an application is gone everywhere: the API, Redis,
// Karmada and its namespace in the member cluster.
func gone(t *testing.T, store *state.Store, karmada client.Client, member kubernetes.Interface, name string) {
	t.Helper()
	var where string
	err := wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := store.Applications().Status(ctx, name); !errors.Is(err, state.ErrNotFound) {
			where = fmt.Sprintf("Redis: %v", err)
			return false, nil
		}
		err := karmada.Get(ctx, client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: name}, &mlsysopsv1.MLSysOpsApp{})
		if !apierrors.IsNotFound(err) {
			where = fmt.Sprintf("Karmada: %v", err)
			return false, nil
		}
		_, err = member.CoreV1().Namespaces().Get(ctx, members.Namespace(name), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			where = fmt.Sprintf("member namespace: %v", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("%s is not gone: still in %s", name, where)
	}
	if code, _, errOut := mls(t, "apps", "get-app-status", name); code != 1 || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("%s after removal: exit %d\n%s", name, code, errOut)
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

// statusReportsAccepted reads how many application status reports the
// continuum agent accepted, from its /status.
func statusReportsAccepted(t *testing.T, ta *testbed.TestAgents) int64 {
	t.Helper()
	resp, err := http.Get(ta.Get(testbed.LayerContinuum, "mls-continuum").URL() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Reports struct {
			Accepted int64 `json:"accepted"`
		} `json:"status_reports"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Reports.Accepted
}

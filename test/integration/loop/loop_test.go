// Package loop_test runs the autonomic loop for real on the shared
// testbed: the demo application (examples/apps/demo-loop.yaml) runs on
// cloud-1's two general-purpose real nodes, its node agent scrapes the
// server's own latency from its pod, the value reaches the API through
// the cluster agent and Redis, and when the test starves the server's
// node of CPU (a CFS quota on that node's best-effort pod cgroup tree,
// where the demo's pods run and the agents' pods, which request CPU, do
// not when they are installed as DaemonSets) the cluster
// agent's shipped relocation policy moves the server to the other real
// node, where its latency recovers.
package loop_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlsysops-go/mlsysops/agents/cluster"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/mape"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

const (
	clusterName = "cloud-1"
	component   = "server"
	metric      = "demo_server_latency_seconds"
	policyFile  = "policy-relocateComponents.star"
	// The starved node's pods get cpuQuota of every cpuPeriod: 1% of one
	// CPU, a sixth of what the server's work for ten messages a second
	// takes (about 6 ms each). Its answers take several periods (about
	// 0.5 s, twice the target) yet keep coming, so its latency gauge and
	// metrics endpoint keep answering: a quota so small that no message
	// completes within the gauge's window would leave it without a value
	// (NaN, not reported) and the policy without a violation to see. A
	// short period spreads the CPU evenly: with one of a second, answers
	// that arrive while quota is left are quick and the mean stays low.
	cpuPeriod = 100000 // µs
	cpuQuota  = 1000   // µs
)

// sample is one reading of the server's metric through the API.
type sample struct {
	at    time.Time
	node  string
	value float64
	// satisfied is the API's verdict on the value, global its global
	// satisfaction in the same answer.
	satisfied *bool
	global    *api.Satisfaction
}

// TestRelocationOnMissedTarget is the loop, step by step, each with its
// evidence: the real metric in the API; the starved node's own cgroup
// counting throttled periods and the metric missing its target there; the
// plan accepted with the policy's reason (a Kubernetes event); the server
// running on the other node; the metric within its target again, read
// from the new pod; the API's details of the application with the plan's
// event. It logs the time from the starvation to the recovered
// metric and its parts.
func TestRelocationOnMissedTarget(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	env := testbed.Shared(t)
	real := map[string]bool{}
	for _, n := range env.RealNodes {
		if n.Context == clusterName {
			real[n.Name] = true
		}
	}
	for _, n := range []string{"cloud-1", "cloud-cpu-1"} {
		if !real[n] {
			t.Fatalf("%s is not a real node of the testbed (%v)", n, env.RealNodes)
		}
	}
	agents := testbed.StartTestAgents(t, env, testbed.TestAgentsOptions{Nodes: true, NodeNames: []string{"cloud-1", "cloud-cpu-1"}})
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "policies", "cluster", policyFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agents.Get(testbed.LayerCluster, clusterName).PolicyDir, policyFile), src, 0o644); err != nil {
		t.Fatal(err)
	}

	scheme, err := continuum.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	karmada, err := client.New(env.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	member := kubernetes.NewForConfigOrDie(env.RESTConfig(t, clusterName))
	nb, err := nbclient.New(nbclient.Config{URL: env.NorthboundURL, Token: env.NorthboundViewerToken, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	app := demoApp(t)
	ctx := context.Background()
	if err := karmada.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = karmada.Delete(context.Background(), app) })
	ns := members.Namespace(app.Name)

	// 1. The server runs on a real node and its own metric, as its node
	// agent scraped it from the pod, is in the API, within its target.
	var first *corev1.Pod
	poll(t, "the server running on a real node", 3*time.Minute, func(ctx context.Context) error {
		p, err := serverPod(ctx, member, ns)
		first = p
		return err
	})
	from := first.Spec.NodeName
	if !real[from] {
		t.Fatalf("server on %s, want a real node of %s", from, clusterName)
	}
	var series []sample
	trace := func() string {
		var b strings.Builder
		for _, s := range series {
			fmt.Fprintf(&b, "\n  %s  %-12s %.4f", s.at.Format("15:04:05"), s.node, s.value)
		}
		return b.String()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s as the API showed it:%s", metric, trace())
		}
	})
	read := func(ctx context.Context) (sample, error) {
		perf, err := nb.Applications().Performance(ctx, app.Name)
		if err != nil {
			return sample{}, err
		}
		for _, m := range perf.Metrics {
			if m.Component != component || m.Metric != metric {
				continue
			}
			if m.Value == nil {
				return sample{}, fmt.Errorf("no value: %s", m.Reason)
			}
			s := sample{at: time.Now(), node: m.Node, value: *m.Value, satisfied: m.Satisfied, global: perf.GlobalSatisfaction}
			if n := len(series); n == 0 || series[n-1].value != s.value || series[n-1].node != s.node {
				series = append(series, s)
			}
			return s, nil
		}
		return sample{}, fmt.Errorf("no %s of %s in %+v", metric, component, perf)
	}
	target := math.NaN()
	for _, c := range app.Spec.Components {
		for _, q := range c.QoSMetrics {
			if c.Metadata.Name == component && q.ApplicationMetricID == metric && q.Target != nil {
				target = *q.Target
			}
		}
	}
	if math.IsNaN(target) {
		t.Fatalf("the example has no target for %s of %s", metric, component)
	}
	poll(t, "the server's latency from "+from+" in the API, within its target", 2*time.Minute, func(ctx context.Context) error {
		s, err := read(ctx)
		if err != nil {
			return err
		}
		if s.node != from || s.value > target {
			return fmt.Errorf("%s %.4f on %s, want at most %g on %s", metric, s.value, s.node, target, from)
		}
		return nil
	})
	perf, err := nb.Applications().Performance(ctx, app.Name)
	if err != nil {
		t.Fatal(err)
	}
	if g := perf.GlobalSatisfaction; g == nil || g.Value == nil || *g.Value != 1 || g.Satisfied == nil || !*g.Satisfied {
		t.Errorf("global satisfaction before the starvation: %+v", g)
	}

	// 2. Starve the node: its best-effort pods share 1% of one CPU.
	if first.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Fatalf("server pod %s is %s: the starvation of best-effort pods would not reach it", first.Name, first.Status.QOSClass)
	}
	cg := podCgroup(t, env, from)
	before := throttled(t, cg)
	starve(t, cg)
	starved := time.Now()

	// 3. The metric misses its target there.
	var violated time.Time
	poll(t, "the server's latency on "+from+" beyond its target", 2*time.Minute, func(ctx context.Context) error {
		s, err := read(ctx)
		if err != nil {
			return err
		}
		if s.node != from || s.value <= target*1.1 {
			return fmt.Errorf("%s %.4f on %s", metric, s.value, s.node)
		}
		violated = time.Now()
		// The API says so: the target missed, and with the only
		// weighted metric missed, no global satisfaction.
		if s.satisfied == nil || *s.satisfied {
			t.Errorf("%s %.4f beyond %g, yet satisfied %v", metric, s.value, target, s.satisfied)
		}
		if g := s.global; g == nil || g.Value == nil || *g.Value != 0 || g.Satisfied == nil || *g.Satisfied {
			t.Errorf("global satisfaction with the target missed: %+v", g)
		}
		return nil
	})
	if after := throttled(t, cg); after <= before {
		t.Errorf("%s: nr_throttled %d, was %d: the quota starved nothing", cg, after, before)
	}

	// 4. The relocation policy plans the move and says why.
	var accepted time.Time
	var why string
	poll(t, "the relocation plan accepted", 2*time.Minute, func(ctx context.Context) error {
		ev, err := event(ctx, member, app.Name, cluster.EventPlanAccepted, "relocateComponents")
		if err != nil {
			return err
		}
		accepted, why = time.Now(), ev.Message
		return nil
	})
	for _, want := range []string{component, "move", metric, "misses lower_or_equal", "on " + from} {
		if !strings.Contains(why, want) {
			t.Errorf("PlanAccepted event %q does not say %q", why, want)
		}
	}

	// 5. The server runs on the other real node; the old pod is gone.
	var moved *corev1.Pod
	var ready time.Time
	poll(t, "the server moved off "+from, 3*time.Minute, func(ctx context.Context) error {
		p, err := serverPod(ctx, member, ns)
		if err != nil {
			return err
		}
		if p.Spec.NodeName == from {
			return fmt.Errorf("still on %s", from)
		}
		moved, ready = p, time.Now()
		return nil
	})
	to := moved.Spec.NodeName
	if !real[to] || moved.Name == first.Name {
		t.Fatalf("server now %s on %s, want a new pod on the other real node", moved.Name, to)
	}

	// 6. Its latency, read from the new pod on the new node, is within the
	// target again, and the plan is complete.
	var recovered time.Time
	poll(t, "the server's latency on "+to+" within its target", 2*time.Minute, func(ctx context.Context) error {
		s, err := read(ctx)
		if err != nil {
			return err
		}
		if s.node != to || s.value > target {
			return fmt.Errorf("%s %.4f on %s", metric, s.value, s.node)
		}
		recovered = time.Now()
		return nil
	})
	poll(t, "the plan completed", time.Minute, func(ctx context.Context) error {
		_, err := event(ctx, member, app.Name, cluster.EventPlanCompleted, "relocateComponents")
		return err
	})
	// The cluster agent's plan log has the plan, completed, and its
	// metrics count it.
	planID, _, _ := strings.Cut(strings.TrimPrefix(why, "plan "), " ")
	clusterAgent := agents.Get(testbed.LayerCluster, clusterName)
	poll(t, "plan "+planID+" completed in the cluster agent's plan log", time.Minute, func(ctx context.Context) error {
		var st struct {
			Plans []mape.PlanRecord `json:"plans"`
		}
		if err := testbed.GetJSON(ctx, clusterAgent.URL()+"/status", &st); err != nil {
			return err
		}
		for _, p := range st.Plans {
			if p.ID == planID {
				if p.Policy != "relocateComponents" || p.App != app.Name || p.State != mape.StateCompleted {
					return fmt.Errorf("plan %s: policy %s, app %s, state %s (%s)", p.ID, p.Policy, p.App, p.State, p.Reason)
				}
				return nil
			}
		}
		return fmt.Errorf("no plan %s among %d in the plan log", planID, len(st.Plans))
	})
	if n := testbed.MetricValue(t, clusterAgent.URL()+"/metrics", `mlsysops_mape_mechanism_results_total{mechanism="fluidity",status="Success"}`); n < 1 {
		t.Errorf("the cluster agent counts %g successful fluidity results, want at least the move", n)
	}
	// The API tells why: the application's details list the plan's
	// events with the policy's reason, and where the server runs now.
	poll(t, "the plan's events in the API", time.Minute, func(ctx context.Context) error {
		a, err := nb.Applications().Get(ctx, app.Name)
		if err != nil {
			return err
		}
		runs := false
		for _, c := range a.Components {
			runs = runs || (c.Name == component && slices.Equal(c.Nodes, []string{to}))
		}
		if !runs {
			return fmt.Errorf("components %+v, want %s on %s", a.Components, component, to)
		}
		for _, e := range a.Events {
			if e.Reason == cluster.EventPlanAccepted && e.Message == why {
				return nil
			}
		}
		return fmt.Errorf("no event %q among %+v", why, a.Events)
	})
	if q := readInt(t, filepath.Join(cg, "cpu.cfs_quota_us")); q != cpuQuota {
		t.Errorf("%s: quota %d, want %d still: something reset the starvation", cg, q, cpuQuota)
	}

	t.Logf("%s (target <= %g) as the API showed it:%s", metric, target, trace())
	t.Logf("moved %s from %s to %s because: %s", component, from, to, why)
	t.Logf("starved %s -> violation in the API %.1fs -> plan accepted %.1fs -> new pod ready on %s %.1fs -> metric recovered %.1fs; total %.1fs",
		from, violated.Sub(starved).Seconds(), accepted.Sub(violated).Seconds(), to, ready.Sub(accepted).Seconds(),
		recovered.Sub(ready).Seconds(), recovered.Sub(starved).Seconds())
}

// demoApp reads the example application and gives it a fresh name.
func demoApp(t *testing.T) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "apps", "demo-loop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, errs := description.ParseApp(data, description.FormatYAML)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	a.Name = "loop-" + rand.String(5)
	a.Spec.Name = a.Name
	a.Namespace = mlsysopsv1.Namespace
	return a
}

// serverPod is the one running, ready, not terminating server pod.
func serverPod(ctx context.Context, cs kubernetes.Interface, ns string) (*corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: mlsysopsv1.LabelComponent + "=" + component})
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || readySince(p).IsZero() {
			return nil, fmt.Errorf("pod %s on %s: %s, deleting %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil)
		}
		out = append(out, p)
	}
	if len(out) != 1 {
		return nil, fmt.Errorf("%d server pods", len(out))
	}
	return out[0], nil
}

// readySince is when the pod became ready, zero when it is not.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// event finds the fluidity event with reason on the application (its
// MLSysOpsApp in the member cluster, in the mlsysops namespace) whose
// message names the policy.
func event(ctx context.Context, cs kubernetes.Interface, app, reason, policy string) (*corev1.Event, error) {
	evs, err := cs.CoreV1().Events(mlsysopsv1.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", app).String(),
	})
	if err != nil {
		return nil, err
	}
	var seen []string
	for i := range evs.Items {
		ev := &evs.Items[i]
		seen = append(seen, ev.Reason+": "+ev.Message)
		if ev.Reason == reason && ev.InvolvedObject.Kind == "MLSysOpsApp" && strings.Contains(ev.Message, policy) {
			return ev, nil
		}
	}
	return nil, fmt.Errorf("no %s event of %s among %q", reason, policy, seen)
}

// podCgroup is the node's best-effort pod cgroup tree in the cpu
// hierarchy: the kubelet's cgroupRoot (the testbed's tree, then the node),
// kubepods and besteffort.
func podCgroup(t *testing.T, env *testbed.Env, node string) string {
	t.Helper()
	mount, err := cpuMount()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mount, env.Network.CgroupRoot, node, "kubepods", "besteffort")
	if _, err := os.Stat(filepath.Join(dir, "cpu.cfs_quota_us")); err != nil {
		t.Fatalf("the pod cgroup of %s: %v", node, err)
	}
	return dir
}

// cpuMount is the mount point of the cgroup v1 hierarchy with the cpu
// controller.
func cpuMount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		left, right, ok := strings.Cut(line, " - ")
		lf, rf := strings.Fields(left), strings.Fields(right)
		if !ok || len(lf) < 5 || len(rf) < 3 || rf[0] != "cgroup" {
			continue
		}
		for _, o := range strings.Split(rf[2], ",") {
			if o == "cpu" {
				return lf[4], nil
			}
		}
	}
	return "", errors.New("no cgroup v1 hierarchy with the cpu controller")
}

// starve sets the CFS quota of the cgroup, and lifts it when the test
// ends.
func starve(t *testing.T, cg string) {
	t.Helper()
	write := func(file string, v int) error {
		return os.WriteFile(filepath.Join(cg, file), []byte(strconv.Itoa(v)), 0o644)
	}
	t.Cleanup(func() {
		if err := write("cpu.cfs_quota_us", -1); err != nil {
			t.Errorf("lift the quota of %s: %v", cg, err)
		}
	})
	if err := write("cpu.cfs_period_us", cpuPeriod); err != nil {
		t.Fatal(err)
	}
	if err := write("cpu.cfs_quota_us", cpuQuota); err != nil {
		t.Fatal(err)
	}
}

// throttled is the cgroup's count of periods its tasks were throttled in.
func throttled(t *testing.T, cg string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg, "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s/cpu.stat has no nr_throttled:\n%s", cg, b)
	return 0
}

func readInt(t *testing.T, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// poll calls cond every second until it returns nil, failing the test
// with cond's last error after within.
func poll(t *testing.T, what string, within time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	testbed.Poll(t, what, time.Second, within, cond)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Package scale_test runs MLSysOps on the scale profile of the testbed:
// generated continua of many KWOK nodes with a realistic mix of GPU
// models, architectures and layers, the real continuum and cluster agent
// processes. The smoke test (two clusters of 50 nodes) checks placement
// on generated descriptions; the benchmark submits 500 applications at
// once to ten clusters of 1,000 nodes.
package scale_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/resources"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// scaleLabel marks the applications of these tests.
const scaleLabel = "mlsysops.eu/scale-test"

// env is a scale testbed with the agents running and placeable.
type env struct {
	*testbed.ScaleEnv
	agents  *testbed.TestAgents
	karmada client.WithWatch
	set     *description.Set
	members map[string]kubernetes.Interface
}

func start(t testing.TB, size testbed.ScaleSize) *env {
	t.Helper()
	se := testbed.ScaleTestbed(t, size)
	// No node agents on the KWOK nodes (as the scale profile's own
	// agents): accounts for the continuum and cluster agents alone.
	ta := testbed.StartTestAgents(t, se.Env, testbed.TestAgentsOptions{Descriptions: se.Descriptions, Args: []string{"--child-grace-period", "0"},
		AccountsArgs: []string{"--layers", testbed.LayerContinuum + "," + testbed.LayerCluster}})
	if err := testbed.WaitPlaceable(context.Background(), se.RESTConfig(t, testbed.ContextKarmada), se.Clusters, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	ta.WaitCapacityReports(se.Clusters)
	scheme, err := continuum.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.NewWithWatch(se.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	set, err := description.LoadDir(se.Descriptions)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{ScaleEnv: se, agents: ta, karmada: kc, set: set, members: map[string]kubernetes.Interface{}}
	for _, c := range se.Clusters {
		cs, err := kubernetes.NewForConfig(se.RESTConfig(t, c))
		if err != nil {
			t.Fatal(err)
		}
		e.members[c] = cs
	}
	e.cleanup(t)
	t.Cleanup(func() { e.cleanup(t) })
	return e
}

// cleanup deletes the tests' applications and waits until their
// namespaces are gone from every member.
func (e *env) cleanup(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		var apps mlsysopsv1.MLSysOpsAppList
		if err := e.karmada.List(ctx, &apps, client.InNamespace(mlsysopsv1.Namespace), client.MatchingLabels{scaleLabel: "true"}); err != nil {
			time.Sleep(time.Second)
			continue
		}
		for i := range apps.Items {
			if apps.Items[i].DeletionTimestamp == nil {
				_ = e.karmada.Delete(ctx, &apps.Items[i])
			}
		}
		left := len(apps.Items)
		for _, cs := range e.members {
			nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: mlsysopsv1.LabelManagedBy + "=" + mlsysopsv1.ManagedByValue})
			if err != nil {
				left++
				continue
			}
			left += len(nss.Items)
		}
		if left == 0 {
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("the tests' applications were not all removed: %v", ctx.Err())
}

// noPacketLeaves checks that nothing of the scale testbed can send a
// packet off the machine: every address its clusters hand out (nodes,
// pods, Services, endpoints, in every member, the host and Karmada) is in
// the testbed's range, which the host blackholes, so that a connection to
// any of them fails on the host without a packet sent; and no process of
// the testbed or of the test's agents holds a socket to an address
// outside that range and loopback.
func (e *env) noPacketLeaves(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	_, rng, err := net.ParseCIDR(e.Network.Range)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{} // address -> where it was found
	add := func(ip, where string) {
		if ip != "" {
			addrs[ip] = where
		}
	}
	for _, c := range append([]string{testbed.ContextHost, testbed.ContextKarmada}, e.Clusters...) {
		cs, err := kubernetes.NewForConfig(e.RESTConfig(t, c))
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
					add(a.Address, c+" node "+n.Name)
				}
			}
		}
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			add(p.Status.HostIP, c+" pod "+p.Namespace+"/"+p.Name+" host")
			for _, ip := range p.Status.PodIPs {
				add(ip.IP, c+" pod "+p.Namespace+"/"+p.Name)
			}
		}
		svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, sv := range svcs.Items {
			for _, ip := range sv.Spec.ClusterIPs {
				if ip != corev1.ClusterIPNone {
					add(ip, c+" service "+sv.Namespace+"/"+sv.Name)
				}
			}
			for _, ip := range sv.Spec.ExternalIPs {
				add(ip, c+" service "+sv.Namespace+"/"+sv.Name+" external")
			}
		}
		eps, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, es := range eps.Items {
			for _, ep := range es.Endpoints {
				for _, ip := range ep.Addresses {
					add(ip, c+" endpoints "+es.Namespace+"/"+es.Name)
				}
			}
		}
	}
	if len(addrs) == 0 {
		t.Fatal("the clusters hand out no address at all")
	}
	for ip, where := range addrs {
		parsed := net.ParseIP(ip)
		if parsed == nil || !rng.Contains(parsed) {
			t.Errorf("%s (%s) is outside the testbed's blackholed range %s", ip, where, rng)
			continue
		}
		if ip == e.Network.HostIP {
			continue // the host's own address on the bridge: local
		}
		// Port 9 (discard): nothing listens there; the blackhole answers
		// at once, before any packet is sent.
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "9"), 5*time.Second)
		if err == nil {
			c.Close()
		}
		if err == nil || !(errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)) {
			t.Errorf("dial %s (%s): %v, want the host's blackhole to refuse it", ip, where, err)
		}
	}
	files := append(testbed.PIDFiles(e.StateDir), testbed.PIDFiles(e.agents.Config.StateDir)...)
	if len(files) < 2*len(e.Clusters) {
		t.Fatalf("%d pid files for %d clusters", len(files), len(e.Clusters))
	}
	socks, err := testbed.PeerSockets(files, rng)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range socks {
		t.Errorf("a socket to an address outside the testbed: %s", s)
	}
	t.Logf("%d addresses handed out, all in %s and blackholed; %d processes' sockets on loopback or in it", len(addrs), rng, len(files))
}

// kind is a kind of application of the mix.
type kind struct {
	name string
	comp func() mlsysopsv1.Component
}

func cpuComp(name, cpu, mem string) mlsysopsv1.Component {
	c, m := resource.MustParse(cpu), resource.MustParse(mem)
	return mlsysopsv1.Component{
		Metadata: mlsysopsv1.ComponentMetadata{Name: name},
		Containers: []mlsysopsv1.Container{{Image: "registry.example/" + name + ":1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
			CPU: &mlsysopsv1.CPURequirements{Requests: &c}, Memory: &mlsysopsv1.MemoryRequirements{Requests: &m},
		}}},
	}
}

func gpuComp(name, model string, n int32) mlsysopsv1.Component {
	c := cpuComp(name, "2", "8Gi")
	c.Containers[0].PlatformRequirements.GPU = &mlsysopsv1.GPURequirements{Model: model, Requests: n, Limits: n}
	return c
}

func armComp(name string, layer mlsysopsv1.ContinuumLayer) mlsysopsv1.Component {
	c := cpuComp(name, "500m", "512Mi")
	c.Containers[0].PlatformRequirements.CPU.Architecture = []string{"arm64"}
	c.NodePlacement = &mlsysopsv1.NodePlacement{ContinuumLayer: []mlsysopsv1.ContinuumLayer{layer}}
	return c
}

// mix is what a continuum runs: web services, GPU inference of several
// models, training on A100s and H100s, sensing at the edge.
var mix = []kind{
	{"web", func() mlsysopsv1.Component { return cpuComp("web", "1", "2Gi") }},
	{"infer-l4", func() mlsysopsv1.Component { return gpuComp("infer", "NVIDIA-L4", 1) }},
	{"infer-t4", func() mlsysopsv1.Component { return gpuComp("infer", "Tesla-T4", 1) }},
	{"train-a100", func() mlsysopsv1.Component { return gpuComp("train", "NVIDIA-A100-SXM4-80GB", 2) }},
	{"train-h100", func() mlsysopsv1.Component { return gpuComp("train", "NVIDIA-H100-80GB-HBM3", 4) }},
	{"edge-sense", func() mlsysopsv1.Component { return armComp("sense", mlsysopsv1.LayerEdge) }},
	{"web", func() mlsysopsv1.Component { return cpuComp("api", "2", "4Gi") }},
}

func (e *env) app(name string, k kind) *mlsysopsv1.MLSysOpsApp {
	return &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace, Labels: map[string]string{scaleLabel: "true", "kind": k.name}},
		Spec:       mlsysopsv1.MLSysOpsAppSpec{Name: name, Components: []mlsysopsv1.Component{k.comp()}},
	}
}

// burst creates the applications, 16 at a time, and returns each one's
// time from creation to Running, the time until all were, and the
// clusters each one's status named on the way (a component moved to
// another cluster names two).
func (e *env) burst(t testing.TB, apps []*mlsysopsv1.MLSysOpsApp, timeout time.Duration) (map[string]time.Duration, time.Duration, map[string]map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := e.karmada.Watch(ctx, &mlsysopsv1.MLSysOpsAppList{}, client.InNamespace(mlsysopsv1.Namespace), client.MatchingLabels{scaleLabel: "true"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Stop() }()
	byName := make(map[string]*mlsysopsv1.MLSysOpsApp, len(apps))
	names := make([]string, len(apps))
	for i, a := range apps {
		byName[a.Name], names[i] = a, a.Name
	}
	burst := testbed.StartBurst(names, 16, func(name string) error { return e.karmada.Create(ctx, byName[name]) },
		func(name string, err error) { t.Errorf("create %s: %v", name, err) })
	defer burst.Wait()
	lat := map[string]time.Duration{}
	last := map[string]*mlsysopsv1.MLSysOpsApp{}
	seen := map[string]map[string]bool{}
	events := w.ResultChan()
	for len(lat) < len(apps) {
		select {
		case ev, open := <-events:
			if !open {
				// The API server ended the watch (they last 30 to 60
				// minutes, less when it sheds load): what became Running
				// meanwhile is read from the list, its time from the
				// Ready condition (seconds), and the watch begins again.
				w.Stop()
				w = e.rewatch(t, ctx, burst, lat, seen)
				events = w.ResultChan()
				continue
			}
			a, ok := ev.Object.(*mlsysopsv1.MLSysOpsApp)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			last[a.Name] = a
			for _, c := range a.Status.Components {
				if c.Cluster == "" {
					continue
				}
				if seen[a.Name] == nil {
					seen[a.Name] = map[string]bool{}
				}
				seen[a.Name][c.Cluster] = true
			}
			if a.Status.Phase != mlsysopsv1.AppRunning {
				continue
			}
			since, ok := burst.Since(a.Name)
			if _, done := lat[a.Name]; ok && !done {
				lat[a.Name] = since
			}
		case <-ctx.Done():
			burst.Wait()
			phases := map[string]int{}
			var example string
			for _, a := range last {
				if a.Status.Phase != mlsysopsv1.AppRunning {
					phases[string(a.Status.Phase)]++
					example = a.Name + ": " + a.Status.Message
				}
			}
			t.Fatalf("%d of %d applications Running after %v; others %v (e.g. %s)", len(lat), len(apps), timeout, phases, example)
		}
	}
	return lat, time.Since(burst.Start), seen
}

// rewatch lists the burst's applications, records the clusters they are
// on (seen) and those Running that lat lacks (from their Ready
// condition's transition, to the second), and watches them again from
// the list.
func (e *env) rewatch(t testing.TB, ctx context.Context, burst *testbed.Burst, lat map[string]time.Duration, seen map[string]map[string]bool) watch.Interface {
	t.Helper()
	var list mlsysopsv1.MLSysOpsAppList
	if err := e.karmada.List(ctx, &list, client.InNamespace(mlsysopsv1.Namespace), client.MatchingLabels{scaleLabel: "true"}); err != nil {
		t.Fatalf("list applications after the watch ended: %v", err)
	}
	for i := range list.Items {
		a := &list.Items[i]
		for _, c := range a.Status.Components {
			if c.Cluster != "" {
				if seen[a.Name] == nil {
					seen[a.Name] = map[string]bool{}
				}
				seen[a.Name][c.Cluster] = true
			}
		}
		at, ok := burst.At(a.Name)
		ready := meta.FindStatusCondition(a.Status.Conditions, mlsysopsv1.ConditionReady)
		if _, done := lat[a.Name]; done || !ok || a.Status.Phase != mlsysopsv1.AppRunning || ready == nil {
			continue
		}
		lat[a.Name] = ready.LastTransitionTime.Sub(at)
	}
	w, err := e.karmada.Watch(ctx, &mlsysopsv1.MLSysOpsAppList{}, client.InNamespace(mlsysopsv1.Namespace), client.MatchingLabels{scaleLabel: "true"},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatalf("watch applications again: %v", err)
	}
	return w
}

// nothingPiledUp checks that no member cluster was given more than it
// holds: no pod of the tests' applications is left unscheduled, and on
// every node the requests of the pods bound to it (every resource: CPU,
// memory, GPUs) are within its allocatable. It returns, per cluster, its
// pods and the share of its allocatable CPUs and GPUs they request.
func (e *env) nothingPiledUp(t testing.TB) map[string]string {
	t.Helper()
	ctx := context.Background()
	use := map[string]string{}
	for _, c := range e.Clusters {
		cs := e.members[c]
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		alloc := map[string]corev1.ResourceList{}
		total := corev1.ResourceList{}
		for _, n := range nodes.Items {
			alloc[n.Name] = n.Status.Allocatable
			for r, q := range n.Status.Allocatable {
				sum := total[r]
				sum.Add(q)
				total[r] = sum
			}
		}
		// Every pod: the scale testbed's members run only the tests'
		// applications.
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		requested := map[string]corev1.ResourceList{}
		all := corev1.ResourceList{}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				t.Errorf("%s: pod %s/%s is not scheduled (%s)", c, p.Namespace, p.Name, p.Status.Phase)
				continue
			}
			if requested[p.Spec.NodeName] == nil {
				requested[p.Spec.NodeName] = corev1.ResourceList{}
			}
			for _, ctr := range p.Spec.Containers {
				for r, q := range ctr.Resources.Requests {
					for _, l := range []corev1.ResourceList{requested[p.Spec.NodeName], all} {
						sum := l[r]
						sum.Add(q)
						l[r] = sum
					}
				}
			}
		}
		for node, req := range requested {
			for r, q := range req {
				if a, ok := alloc[node][r]; !ok || q.Cmp(a) > 0 {
					t.Errorf("%s: the pods on node %s request %s %s, it has %s", c, node, q.String(), r, a.String())
				}
			}
		}
		share := func(r corev1.ResourceName) string {
			a, q := total[r], all[r]
			if a.IsZero() {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*q.AsApproximateFloat64()/a.AsApproximateFloat64())
		}
		use[c] = fmt.Sprintf("%d pods, CPU %s, GPU %s", len(pods.Items), share(corev1.ResourceCPU), share(mlsysopsv1.ResourceGPU))
	}
	return use
}

// placedOn returns, for a Running application, its cluster and the node of
// its pod, and checks the node suits the component: the GPU model, the
// architecture and the layer asked for.
func (e *env) placedOn(t testing.TB, name string) (cluster string, node *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := e.karmada.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, app); err != nil {
		t.Fatal(err)
	}
	if len(app.Status.Components) != 1 {
		t.Fatalf("%s: component status %+v", name, app.Status.Components)
	}
	cluster = app.Status.Components[0].Cluster
	cs := e.members[cluster]
	pods, err := cs.CoreV1().Pods(members.Namespace(name)).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("%s: pods in %s: %d, %v", name, cluster, len(pods.Items), err)
	}
	if node, err = cs.CoreV1().Nodes().Get(ctx, pods.Items[0].Spec.NodeName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	comp := &app.Spec.Components[0]
	for _, r := range resources.NodeSelectorRequirements(&app.Spec, comp) {
		if r.Operator == "In" && !contains(r.Values, node.Labels[r.Key]) {
			t.Errorf("%s runs on %s/%s with %s=%q, want one of %v", name, cluster, node.Name, r.Key, node.Labels[r.Key], r.Values)
		}
	}
	return cluster, node
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The short version: two generated clusters of 50 nodes. Each cluster
// agent's capacity report lists all its nodes; an application of every
// kind the clusters can hold runs on a node that suits it; one they
// cannot hold (far-edge, in a cloud and an edge cluster) says why for
// each cluster.
func TestScaleProfileSmoke(t *testing.T) {
	e := start(t, testbed.ScaleSize{Clusters: 2, Nodes: 50})
	var apps []*mlsysopsv1.MLSysOpsApp
	for i, k := range mix {
		if k.name == "train-h100" || k.name == "infer-t4" || k.name == "edge-sense" || k.name == "web" || k.name == "infer-l4" {
			apps = append(apps, e.app(fmt.Sprintf("smoke-%d-%s", i, k.name), k))
		}
	}
	lat, _, seen := e.burst(t, apps, 10*time.Minute)
	if len(lat) != len(apps) {
		t.Fatalf("%d of %d Running", len(lat), len(apps))
	}
	for _, a := range apps {
		cluster, node := e.placedOn(t, a.Name)
		t.Logf("%s on %s/%s (%s, %s, %s)", a.Name, cluster, node.Name, node.Labels[mlsysopsv1.LabelGPUProduct], node.Labels[mlsysopsv1.LabelArch], node.Labels[mlsysopsv1.LabelLayer])
		if len(seen[a.Name]) != 1 {
			t.Errorf("%s was placed on %v: moved from a cluster that could not hold it", a.Name, seen[a.Name])
		}
	}
	t.Logf("use of the clusters: %v", e.nothingPiledUp(t))
	e.noPacketLeaves(t)
	far := e.app("smoke-far-edge", kind{"far", func() mlsysopsv1.Component { return armComp("sense", mlsysopsv1.LayerFarEdge) }})
	if err := e.karmada.Create(context.Background(), far); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		got := &mlsysopsv1.MLSysOpsApp{}
		if err := e.karmada.Get(context.Background(), client.ObjectKeyFromObject(far), got); err == nil && got.Status.Phase == mlsysopsv1.AppUnschedulable {
			for _, c := range e.Clusters {
				if !strings.Contains(got.Status.Message, c+": component sense: no node fits") {
					t.Errorf("the reason does not say why %s cannot hold it: %s", c, got.Status.Message)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a far-edge application on clusters without far-edge nodes is not Unschedulable after 5 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// burstSize is the scale testbed of the burst: $MLSYSOPS_BURST_SIZE
// (CLUSTERSxNODES) or ten clusters of 1,000 nodes.
func burstSize(b *testing.B) testbed.ScaleSize {
	v := os.Getenv("MLSYSOPS_BURST_SIZE")
	if v == "" {
		return testbed.ScaleSize{Clusters: 10, Nodes: 1000}
	}
	c, n, ok := strings.Cut(v, "x")
	ci, err1 := strconv.Atoi(c)
	ni, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		b.Fatalf("MLSYSOPS_BURST_SIZE=%q: want CLUSTERSxNODES", v)
	}
	return testbed.ScaleSize{Clusters: ci, Nodes: ni}
}

// BenchmarkBurst500 submits 500 applications of the mix at once to a
// scale testbed of ten clusters of 1,000 generated nodes and reports the
// time until all are Running, applications per second, the p50 and p99 of
// creation to Running, and how many went to each cluster. Every one must
// run, each on a node that suits it: an application placed on a cluster
// that cannot hold it would stay Deploying and fail the benchmark.
func BenchmarkBurst500(b *testing.B) {
	if b.N > 1 {
		b.Skip("one burst (-benchtime 1x)")
	}
	e := start(b, burstSize(b))
	const n = 500
	apps := make([]*mlsysopsv1.MLSysOpsApp, n)
	for i := range apps {
		k := mix[i%len(mix)]
		apps[i] = e.app(fmt.Sprintf("burst-%03d-%s", i, k.name), k)
	}
	lat, total, seen := e.burst(b, apps, 60*time.Minute)
	var all []time.Duration
	for _, d := range lat {
		all = append(all, d)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	perCluster := map[string]int{}
	moved := 0
	for _, a := range apps {
		c, _ := e.placedOn(b, a.Name)
		perCluster[c]++
		if len(seen[a.Name]) != 1 {
			moved++
			b.Errorf("%s was placed on %v: moved from a cluster that could not hold it", a.Name, seen[a.Name])
		}
	}
	use := e.nothingPiledUp(b)
	e.noPacketLeaves(b)
	b.ReportMetric(total.Seconds(), "total-s")
	b.ReportMetric(float64(n)/total.Seconds(), "apps/s")
	b.ReportMetric(all[len(all)/2].Seconds(), "p50-s")
	b.ReportMetric(all[len(all)*99/100].Seconds(), "p99-s")
	var clusters []string
	for c := range perCluster {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	var dist []string
	for _, c := range clusters {
		dist = append(dist, fmt.Sprintf("%s=%d", c, perCluster[c]))
		fmt.Printf("  %s: %d applications; %s\n", c, perCluster[c], use[c])
	}
	b.ReportMetric(float64(moved), "moved-apps")
	fmt.Printf("burst of %d on %dx%d: all Running in %.1f s (%.2f apps/s), p50 %.1f s, p99 %.1f s; per cluster %s\n",
		n, len(e.Clusters), len(e.set.Nodes)/len(e.Clusters), total.Seconds(), float64(n)/total.Seconds(),
		all[len(all)/2].Seconds(), all[len(all)*99/100].Seconds(), strings.Join(dist, " "))
}

// Package sidebyside_test runs the same applications through MLSysOps
// (MLSysOpsApp objects in Karmada, and submissions to the northbound API)
// and as plain Karmada objects (a Deployment per component and a
// PropagationPolicy naming the same clusters), on one testbed in one run,
// and compares the time from submission to every pod Running, as seen
// through the Karmada API on both sides.
package sidebyside_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// Path is how applications are submitted.
type Path string

// The paths compared.
const (
	// PathRaw writes a Deployment per component and a PropagationPolicy
	// to Karmada, as a user of Karmada alone would.
	PathRaw Path = "raw-karmada"
	// PathCR writes an MLSysOpsApp to Karmada.
	PathCR Path = "mlsysops-cr"
	// PathAPI posts the description to the northbound API.
	PathAPI Path = "mlsysops-api"
	// PathCRBaseline writes an MLSysOpsApp to Karmada, handled by agents
	// of a baseline build (BenchmarkSideBySide).
	PathCRBaseline Path = "mlsysops-cr-baseline"
)

// Shape is the kind of application of a run.
type Shape struct {
	Name string
	// Components per application.
	Components int
	// Clusters every application runs on (all of them, as Karmada's
	// Duplicated scheduling does).
	Clusters []string
}

// rawNamespace holds the Karmada side's Deployments (Karmada propagates
// it to every member).
const rawNamespace = "sbs-raw"

// benchLabel marks every object of these runs.
const benchLabel = "mlsysops.eu/sidebyside"

// harness is a testbed with the MLSysOps agents running.
type harness struct {
	env     *testbed.Env
	karmada client.WithWatch
	members map[string]kubernetes.Interface
	api     *nbclient.Client
	// trace records when each application of a run reached each step.
	trace *testbed.AppTracer
	// prof, when set, profiles the busy processes during each run.
	prof *profiler
	// agentMetrics are the agents' /metrics by agent, for their
	// controllers' queues (queues).
	agentMetrics map[string]string
}

func newHarness(tb testing.TB, env *testbed.Env) *harness {
	tb.Helper()
	ctrllog.SetLogger(logr.Discard())
	scheme, err := continuum.Scheme()
	if err != nil {
		tb.Fatal(err)
	}
	kc, err := client.NewWithWatch(env.RESTConfig(tb, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	h := &harness{env: env, karmada: kc, members: map[string]kubernetes.Interface{}, agentMetrics: map[string]string{}}
	for _, c := range env.Clusters {
		cs, err := kubernetes.NewForConfig(env.RESTConfig(tb, c))
		if err != nil {
			tb.Fatal(err)
		}
		h.members[c] = cs
	}
	if h.api, err = nbclient.New(nbclient.Config{URL: env.NorthboundURL, Token: env.NorthboundToken}); err != nil {
		tb.Fatal(err)
	}
	// The tracer's watches live as long as the test binary: the
	// benchmark's sub-benchmarks share the harness.
	if h.trace, err = testbed.StartAppTracer(context.Background(), env, env.Clusters); err != nil {
		tb.Fatal(err)
	}
	h.placeable(tb)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rawNamespace}}
	if err := kc.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	return h
}

// watchAgentQueues makes queues read the controller queues of the
// continuum and cluster agents of ta.
func (h *harness) watchAgentQueues(ta *testbed.TestAgents) {
	for _, a := range ta.All {
		if u := a.URL(); u != "" && a.Layer != testbed.LayerNode {
			h.agentMetrics[a.Layer+" "+a.Name] = strings.TrimSuffix(u, "/") + "/metrics"
		}
	}
}

// placeable waits until Karmada sees the MLSysOps API in every member:
// the agents (re)started install it, and until then applications fit
// nowhere.
func (h *harness) placeable(tb testing.TB) {
	tb.Helper()
	if err := testbed.WaitPlaceable(context.Background(), h.env.RESTConfig(tb, testbed.ContextKarmada), h.env.Clusters, 5*time.Minute); err != nil {
		tb.Fatal(err)
	}
}

// appSpec is application i of a run: each component one replica of a
// small CPU container, on exactly the shape's clusters.
func appSpec(name string, s Shape) *mlsysopsv1.MLSysOpsAppSpec {
	spec := &mlsysopsv1.MLSysOpsAppSpec{Name: name, ClusterPlacement: &mlsysopsv1.ClusterPlacement{
		ClusterID: s.Clusters, Instances: int32(len(s.Clusters)),
	}}
	for c := range s.Components {
		cpu, mem := resource.MustParse("10m"), resource.MustParse("16Mi")
		spec.Components = append(spec.Components, mlsysopsv1.Component{
			Metadata: mlsysopsv1.ComponentMetadata{Name: fmt.Sprintf("c%d", c)},
			Containers: []mlsysopsv1.Container{{Image: fmt.Sprintf("registry.example/svc-%d:1", c), PlatformRequirements: &mlsysopsv1.PlatformRequirements{
				CPU: &mlsysopsv1.CPURequirements{Requests: &cpu}, Memory: &mlsysopsv1.MemoryRequirements{Requests: &mem},
			}}},
		})
	}
	return spec
}

// rawObjects are what a Karmada user writes for the application: a
// Deployment per component, with the pod MLSysOps renders for it but for
// the affinity to the nodes MLSysOps chose (kube-scheduler chooses), and
// a PropagationPolicy to the shape's clusters.
func rawObjects(tb testing.TB, name string, s Shape) ([]*appsv1.Deployment, *policyv1alpha1.PropagationPolicy) {
	spec := appSpec(name, s)
	app := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace}, Spec: *spec}
	pp := &policyv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rawNamespace, Labels: map[string]string{benchLabel: "true"}},
		Spec: policyv1alpha1.PropagationSpec{
			Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: s.Clusters}},
		},
	}
	var deps []*appsv1.Deployment
	for i := range spec.Components {
		objs, err := fluidity.Render(app, &spec.Components[i], []string{"any"}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		pod := objs.Deployment.Spec.Template.Spec
		pod.Affinity = nil
		labels := map[string]string{benchLabel: "true", "app": name, "component": spec.Components[i].Metadata.Name}
		one := int32(1)
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + spec.Components[i].Metadata.Name, Namespace: rawNamespace, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
			},
		}
		deps = append(deps, dep)
		pp.Spec.ResourceSelectors = append(pp.Spec.ResourceSelectors, policyv1alpha1.ResourceSelector{
			APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, Namespace: rawNamespace,
		})
	}
	return deps, pp
}

// Result is one run: n applications of a shape submitted at once by one
// path.
type Result struct {
	Path  Path
	Shape string
	N     int
	// Total is from the first submission to the last application Running.
	Total time.Duration
	// Latencies from each application's submission to its Running.
	Latencies []time.Duration
	// Steps are, per application, when it reached each step on its way
	// to Running (testbed.TraceSteps), from its submission.
	Steps []testbed.StepTimes
}

// Rate is applications per second.
func (r Result) Rate() float64 { return float64(r.N) / r.Total.Seconds() }

// Percentile of the latencies (0.5, 0.99).
func (r Result) Percentile(p float64) time.Duration {
	l := append([]time.Duration(nil), r.Latencies...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[int(float64(len(l)-1)*p)]
}

// run submits n applications of shape s by path p, 16 at a time as
// concurrent clients would, and waits until every one is Running.
func (h *harness) run(tb testing.TB, p Path, s Shape, n int, prefix string, timeout time.Duration) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	running := h.watchRunning(ctx, tb, p, s)
	h.trace.Follow(func(app string) bool { return strings.HasPrefix(app, prefix+"-") })

	defer h.prof.start(tb, prefix)()
	burst := testbed.StartBurst(names, 16, func(name string) error { return h.submit(ctx, tb, p, s, name) },
		func(name string, err error) { tb.Errorf("submit %s by %s: %v", name, p, err) })
	defer burst.Wait()
	res := Result{Path: p, Shape: s.Name, N: n}
	done := map[string]bool{}
	for len(done) < n {
		select {
		case name := <-running:
			since, ok := burst.Since(name)
			if !ok || done[name] {
				continue
			}
			done[name] = true
			res.Latencies = append(res.Latencies, since)
		case <-ctx.Done():
			burst.Wait()
			tb.Fatalf("%s, %s: %d of %d applications Running after %v", p, s.Name, len(done), n, timeout)
		}
	}
	res.Total = time.Since(burst.Start)
	// The last watch events of the run (the template's status in
	// Karmada) may trail the watch that saw Running.
	time.Sleep(time.Second)
	for _, name := range names {
		if at, ok := burst.At(name); ok {
			res.Steps = append(res.Steps, h.trace.Times(name, at))
		}
	}
	return res
}

// submit writes one application by path p.
func (h *harness) submit(ctx context.Context, tb testing.TB, p Path, s Shape, name string) error {
	switch p {
	case PathRaw:
		deps, pp := rawObjects(tb, name, s)
		// The policy first, as a user applying one file would: the
		// Deployments are bound as they arrive.
		if err := h.karmada.Create(ctx, pp); err != nil {
			return err
		}
		for _, d := range deps {
			if err := h.karmada.Create(ctx, d); err != nil {
				return err
			}
		}
		return nil
	case PathCR, PathCRBaseline:
		app := &mlsysopsv1.MLSysOpsApp{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace, Labels: map[string]string{benchLabel: "true"}},
			Spec:       *appSpec(name, s),
		}
		return h.karmada.Create(ctx, app)
	case PathAPI:
		body, err := json.Marshal(map[string]any{"MLSysOpsApp": appSpec(name, s)})
		if err != nil {
			return err
		}
		_, err = h.api.Applications().Submit(ctx, body, nbclient.JSON)
		return err
	}
	return fmt.Errorf("unknown path %s", p)
}

// watchRunning sends the name of each application of path p as it is seen
// Running through the Karmada API: the MLSysOpsApp's phase, or every
// Deployment of the application ready on every cluster (Karmada sums
// the members' status into the Deployment it propagates). A watch the
// apiserver ends (it closes those of clients it finds too slow, as a
// loaded machine makes this one) is opened again, which lists every
// object again: none is missed. It runs until ctx ends.
func (h *harness) watchRunning(ctx context.Context, tb testing.TB, p Path, s Shape) <-chan string {
	tb.Helper()
	out := make(chan string, 1024)
	list, opts := client.ObjectList(&mlsysopsv1.MLSysOpsAppList{}), []client.ListOption{client.InNamespace(mlsysopsv1.Namespace)}
	if p == PathRaw {
		list, opts = &appsv1.DeploymentList{}, []client.ListOption{client.InNamespace(rawNamespace), client.MatchingLabels{benchLabel: "true"}}
	}
	open := func() watch.Interface {
		for {
			w, err := h.karmada.Watch(ctx, list, opts...)
			if err == nil || ctx.Err() != nil {
				return w
			}
			tb.Logf("watch of %s: %v; again in a second", p, err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
	w := open()
	if w == nil {
		tb.Fatalf("watch of %s: %v", p, ctx.Err())
	}
	ready := map[string]map[string]bool{}
	sent := map[string]bool{}
	send := func(name string) {
		if !sent[name] {
			sent[name] = true
			select {
			case out <- name:
			case <-ctx.Done():
			}
		}
	}
	go func() {
		for {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Deleted {
					continue
				}
				switch o := ev.Object.(type) {
				case *mlsysopsv1.MLSysOpsApp:
					if o.Status.Phase == mlsysopsv1.AppRunning {
						send(o.Name)
					}
				case *appsv1.Deployment:
					app := o.Labels["app"]
					if ready[app] == nil {
						ready[app] = map[string]bool{}
					}
					ready[app][o.Labels["component"]] = o.Spec.Replicas != nil && o.Status.ReadyReplicas >= *o.Spec.Replicas*int32(len(s.Clusters))
					n := 0
					for _, r := range ready[app] {
						if r {
							n++
						}
					}
					if n == s.Components {
						send(app)
					}
				}
			}
			w.Stop()
			if ctx.Err() != nil {
				return
			}
			if w = open(); w == nil {
				return
			}
		}
	}()
	return out
}

// cleanup deletes every application of the runs, on both sides, and waits
// until the members hold none of their pods: the next run starts on an
// idle testbed.
func (h *harness) cleanup(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		var apps mlsysopsv1.MLSysOpsAppList
		var deps appsv1.DeploymentList
		var pps policyv1alpha1.PropagationPolicyList
		err1 := h.karmada.List(ctx, &apps, client.InNamespace(mlsysopsv1.Namespace))
		err2 := h.karmada.List(ctx, &deps, client.InNamespace(rawNamespace), client.MatchingLabels{benchLabel: "true"})
		err3 := h.karmada.List(ctx, &pps, client.InNamespace(rawNamespace), client.MatchingLabels{benchLabel: "true"})
		if err1 != nil || err2 != nil || err3 != nil {
			time.Sleep(time.Second)
			continue
		}
		left := len(apps.Items) + len(deps.Items) + len(pps.Items)
		for i := range apps.Items {
			if apps.Items[i].DeletionTimestamp == nil {
				_ = h.karmada.Delete(ctx, &apps.Items[i])
			}
		}
		for i := range deps.Items {
			_ = h.karmada.Delete(ctx, &deps.Items[i])
		}
		for i := range pps.Items {
			_ = h.karmada.Delete(ctx, &pps.Items[i])
		}
		if left == 0 && h.membersIdle(ctx) {
			return
		}
		time.Sleep(time.Second)
	}
	tb.Fatalf("the runs' applications were not all removed: %v", ctx.Err())
}

// membersIdle reports whether no member holds a pod or namespace of the
// runs.
func (h *harness) membersIdle(ctx context.Context) bool {
	for _, cs := range h.members {
		pods, err := cs.CoreV1().Pods(rawNamespace).List(ctx, metav1.ListOptions{LabelSelector: benchLabel})
		if err != nil || len(pods.Items) > 0 {
			return false
		}
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: mlsysopsv1.LabelManagedBy + "=" + mlsysopsv1.ManagedByValue})
		if err != nil || len(nss.Items) > 0 {
			return false
		}
	}
	return true
}

// checkPlaced checks that application name's pods run on exactly the
// shape's clusters, each component once per cluster, with the
// component's image: the two sides run the same pods.
func (h *harness) checkPlaced(tb testing.TB, p Path, s Shape, name string) {
	tb.Helper()
	ctx := context.Background()
	for cluster, cs := range h.members {
		ns, sel := rawNamespace, "app="+name
		if p != PathRaw {
			ns, sel = members.Namespace(name), mlsysopsv1.LabelApp+"="+name
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			tb.Fatal(err)
		}
		want := 0
		for _, c := range s.Clusters {
			if c == cluster {
				want = s.Components
			}
		}
		var images []string
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodRunning {
				images = append(images, pod.Spec.Containers[0].Image)
			}
		}
		sort.Strings(images)
		if len(images) != want {
			tb.Errorf("%s %s: %d pods Running in %s (%v), want %d", p, name, len(images), cluster, images, want)
			continue
		}
		for c := range want {
			if img := fmt.Sprintf("registry.example/svc-%d:1", c); images[c] != img {
				tb.Errorf("%s %s: pod %d in %s runs %s, want %s", p, name, c, cluster, images[c], img)
			}
		}
	}
}

// shortPath names a path in application names.
func shortPath(p Path) string {
	return map[Path]string{PathRaw: "raw", PathCR: "cr", PathAPI: "api", PathCRBaseline: "crbase"}[p]
}

// shapes of applications for a testbed's clusters.
func shapes(clusters []string) []Shape {
	return []Shape{
		{Name: "1-component-1-cluster", Components: 1, Clusters: clusters[:1]},
		{Name: "3-components-1-cluster", Components: 3, Clusters: clusters[:1]},
		{Name: "1-component-2-clusters", Components: 1, Clusters: clusters[:2]},
	}
}

// The short version: ten applications of each shape raw and as
// MLSysOpsApp objects, and of the first shape through the northbound API
// too, on the shared testbed, all Running, each on exactly its clusters
// with the same pods on both sides, and nothing left behind. The API
// hands the same objects on whatever their shape (its own tests cover
// it); the benchmark sends every shape by every path.
func TestSideBySideSmoke(t *testing.T) {
	env := testbed.Shared(t)
	ta := testbed.StartTestAgents(t, env, testbed.TestAgentsOptions{Nodes: true})
	h := newHarness(t, env)
	h.watchAgentQueues(ta)
	ta.WaitCapacityReports(env.Clusters)
	h.cleanup(t)
	t.Cleanup(func() { h.cleanup(t) })
	for i, s := range shapes(env.Clusters) {
		for _, p := range []Path{PathRaw, PathCR, PathAPI} {
			if p == PathAPI && i > 0 {
				continue
			}
			t.Run(s.Name+"/"+string(p), func(t *testing.T) {
				prefix := fmt.Sprintf("sbs%d-%s", i, shortPath(p))
				q0 := h.queues()
				res := h.run(t, p, s, 10, prefix, 10*time.Minute)
				if len(res.Latencies) != 10 {
					t.Fatalf("%d applications Running, want 10", len(res.Latencies))
				}
				t.Logf("%s %s: 10 applications Running in %.1f s (p50 %.1f s, p99 %.1f s, load %s); queues: %s; steps (p50, p99 from submission):\n%s", s.Name, p,
					res.Total.Seconds(), res.Percentile(0.5).Seconds(), res.Percentile(0.99).Seconds(), loadAverage(), h.queues().since(q0),
					testbed.FormatSteps(testbed.SummariseSteps(res.Steps)))
				for i := range 10 {
					h.checkPlaced(t, p, s, fmt.Sprintf("%s-%04d", prefix, i))
				}
				h.cleanup(t)
			})
		}
	}
}

package placement_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/cluster"
	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mape"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/policy"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// runEngine runs a MAPE engine with the mechanisms given for the test, as
// an agent would: pending results reach it through the mechanism set.
func runEngine(t *testing.T, mechs map[string]mechanism.Factory, policies ...policy.Template) *mape.Engine {
	t.Helper()
	r := mechanism.NewRegistry()
	var names []string
	for name, f := range mechs {
		if err := r.Register(name, f); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	set, err := r.Build(names, mechanism.Env{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := mape.New(mape.Config{Logger: testLogger(), Mechanisms: set, TickInterval: 200 * time.Millisecond, PendingTimeout: 4 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = set.Close()
	})
	for _, p := range policies {
		e.SetPolicy(ctx, p)
	}
	return e
}

// fluidityOn is the fluidity mechanism of a member cluster, as the
// cluster agent builds it.
func fluidityOn(t *testing.T, env *testbed.Env, name string) mechanism.Factory {
	scheme, _ := cluster.Scheme()
	kc, err := client.New(env.RESTConfig(t, name), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return func(menv mechanism.Env) (mechanism.Mechanism, error) {
		return cluster.NewFluidity(kc, name, menv.Logger, cluster.FluidityOptions{Complete: menv.Complete, Timeout: 3 * time.Minute}), nil
	}
}

// clusterPlacementOn is the continuum's clusterPlacement mechanism, as the
// continuum agent builds it.
func clusterPlacementOn(t *testing.T, a *agents) mechanism.Factory {
	capacity, err := continuum.NewProxyCapacity(a.env.RESTConfig(t, testbed.ContextKarmada))
	if err != nil {
		t.Fatal(err)
	}
	return func(menv mechanism.Env) (mechanism.Mechanism, error) {
		return continuum.NewClusterPlacement(a.karmada, capacity, menv.Logger, continuum.ClusterPlacementOptions{Complete: menv.Complete, Timeout: 3 * time.Minute}), nil
	}
}

// execute submits a plan to the engine and waits for its outcome.
func execute(t *testing.T, e *mape.Engine, plan map[string]any) mape.PlanRecord {
	t.Helper()
	id, err := e.Submit("test", "", false, plan)
	if err != nil {
		t.Fatal(err)
	}
	var rec mape.PlanRecord
	err = wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, 4*time.Minute, true, func(context.Context) (bool, error) {
		rec, _ = e.Plan(id)
		return rec.State.Final(), nil
	})
	if err != nil {
		t.Fatalf("plan %s never finished: %+v", id, rec)
	}
	return rec
}

// planError is what the plan's one mechanism reported.
func planError(rec mape.PlanRecord) string {
	for _, o := range rec.Mechanisms {
		return o.Error
	}
	return ""
}

func mustComplete(t *testing.T, rec mape.PlanRecord) {
	t.Helper()
	if rec.State != mape.StateCompleted {
		t.Fatalf("plan %s: %s (%s): %s", rec.ID, rec.State, rec.Reason, planError(rec))
	}
}

func mustFailWith(t *testing.T, rec mape.PlanRecord, reason string) {
	t.Helper()
	if rec.State != mape.StateFailed || !strings.Contains(planError(rec), reason) {
		t.Fatalf("plan %s: %s: %q; want Failed with %q", rec.ID, rec.State, planError(rec), reason)
	}
}

func fluidityPlan(app, comp string, actions ...map[string]any) map[string]any {
	list := make([]any, len(actions))
	for i, a := range actions {
		list[i] = a
	}
	return map[string]any{cluster.FluidityName: map[string]any{"name": app, "deployment_plan": map[string]any{comp: list, "initial_plan": false}}}
}

// nodesOf returns the nodes the component's pods are on, running or not,
// terminating ones included.
func nodesOf(t *testing.T, cs kubernetes.Interface, app, comp string) []string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(members.Namespace(app)).List(context.Background(), metav1.ListOptions{LabelSelector: mlsysopsv1.LabelComponent + "=" + comp})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Spec.NodeName)
	}
	slices.Sort(out)
	return out
}

// waitPodsOn waits until the component's pods are running on exactly
// these nodes (one each) and no other pod of it is left.
func waitPodsOn(t *testing.T, cs kubernetes.Interface, app, comp string, nodes ...string) {
	t.Helper()
	slices.Sort(nodes)
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		var running []string
		for _, p := range runningPods(t, cs, app, comp) {
			running = append(running, p.Spec.NodeName)
		}
		slices.Sort(running)
		return slices.Equal(running, nodes) && slices.Equal(nodesOf(t, cs, app, comp), nodes), nil
	})
	if err != nil {
		t.Fatalf("%s pods never on exactly %v: running on %v, all on %v", comp, nodes, names(runningPods(t, cs, app, comp)), nodesOf(t, cs, app, comp))
	}
}

func deployment(t *testing.T, cs kubernetes.Interface, app, comp string) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(members.Namespace(app)).Get(context.Background(), comp, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// failNode makes a KWOK node stop answering, so that it goes NotReady.
func failNode(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"` + testbed.KWOKLabel + `":null}}}`)
	if _, err := cs.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A fluidity move executed through the mechanism moves the component from
// its node to another; a restart of the agents keeps it there; a move to
// a failed node or to a node the component does not fit is refused with
// the reason; when the node it was moved to fails, the controller drops
// the plan's choice and places the component as usual.
func TestFluidityMovePlan(t *testing.T) {
	a := startAgents(t)
	cloud := a.member(t, "cloud-1")
	tag := rand.String(6)
	n1, n2, n3 := "mv-a-"+tag, "mv-b-"+tag, "mv-c-"+tag
	tempNodes(t, cloud, tag, n1, n2, n3)
	app := taggedApp("mv-"+tag, tag)
	if err := a.karmada.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), app) })
	a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, 2*time.Minute)
	pods := runningPods(t, cloud, app.Name, "worker")
	if len(pods) != 1 {
		t.Fatalf("%d running worker pods, want 1", len(pods))
	}
	from := pods[0].Spec.NodeName
	others := slices.DeleteFunc([]string{n1, n2, n3}, func(n string) bool { return n == from })
	to, broken := others[0], others[1]
	failNode(t, cloud, broken)
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cloud.CoreV1().Nodes().Get(ctx, broken, metav1.GetOptions{})
		return err == nil && !isReady(n), nil
	})
	if err != nil {
		t.Fatalf("node %s never went NotReady", broken)
	}

	e := runEngine(t, map[string]mechanism.Factory{cluster.FluidityName: fluidityOn(t, a.env, "cloud-1")})
	move := func(src, dst string) map[string]any {
		return fluidityPlan(app.Name, "worker", map[string]any{"action": "move", "src_host": src, "target_host": dst})
	}
	t.Run("refused: target not Ready", func(t *testing.T) {
		mustFailWith(t, execute(t, e, move(from, broken)), "node "+broken+" is not eligible: no node fits: 1 node(s) are not Ready")
	})
	t.Run("refused: target not eligible", func(t *testing.T) {
		// A node of the cluster without the label the component asks for.
		mustFailWith(t, execute(t, e, move(from, "cloud-gpu-h100-1")), "node cloud-gpu-h100-1 is not eligible: no node fits: 1 node(s) lack label "+mlsysopsv1.LabelUserPrefix+"test")
	})
	if got := nodesOf(t, cloud, app.Name, "worker"); !slices.Equal(got, []string{from}) {
		t.Fatalf("refused plans moved the component: pods on %v", got)
	}

	mustComplete(t, execute(t, e, move(from, to)))
	if got := nodesOf(t, cloud, app.Name, "worker"); len(runningPods(t, cloud, app.Name, "worker")) != 1 || !slices.Contains(got, to) {
		t.Fatalf("plan completed but the pods are on %v", got)
	}
	waitPodsOn(t, cloud, app.Name, "worker", to)
	a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, time.Minute)

	// Restart: the new agents keep the component where the plan put it.
	before := runningPods(t, cloud, app.Name, "worker")
	dep := deployment(t, cloud, app.Name, "worker")
	a.Stop()
	b := startAgents(t)
	b.passed(t, app.Name, "cloud-1")
	b.waitPhase(t, app.Name, mlsysopsv1.AppRunning, time.Minute)
	after := runningPods(t, cloud, app.Name, "worker")
	if len(after) != 1 || after[0].UID != before[0].UID || after[0].Spec.NodeName != to {
		t.Errorf("restart changed the pods: before %v, after %v", names(before), names(after))
	}
	if dep2 := deployment(t, cloud, app.Name, "worker"); dep2.Generation != dep.Generation || dep2.Annotations[mlsysopsv1.AnnotationOverride] != dep.Annotations[mlsysopsv1.AnnotationOverride] {
		t.Errorf("restart rewrote the Deployment: generation %d → %d, override %s → %s", dep.Generation, dep2.Generation,
			dep.Annotations[mlsysopsv1.AnnotationOverride], dep2.Annotations[mlsysopsv1.AnnotationOverride])
	}

	// The node the plan chose fails: the plan's choice goes, the
	// component goes back to the one node left.
	failNode(t, cloud, to)
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		for _, p := range runningPods(t, cloud, app.Name, "worker") {
			if p.Spec.NodeName == from {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("worker never left the failed node %s for %s", to, from)
	}
	dep = deployment(t, cloud, app.Name, "worker")
	if _, ok := dep.Annotations[mlsysopsv1.AnnotationOverride]; ok {
		t.Errorf("the override outlived its node: %s", dep.Annotations[mlsysopsv1.AnnotationOverride])
	}
	if d := dep.Annotations[mlsysopsv1.AnnotationOverrideDropped]; !strings.Contains(d, "dropped: node "+to+" is not eligible: no node fits: 1 node(s) are not Ready") {
		t.Errorf("dropped annotation = %q", d)
	}
}

// change_spec changes what runs, remove takes the component off its node
// (it stops), deploy brings it back on another; when the user then
// changes the component, the plan's spec goes and the node stays.
func TestFluidityChangeSpecRemoveDeploy(t *testing.T) {
	a := startAgents(t)
	cloud := a.member(t, "cloud-1")
	tag := rand.String(6)
	n1, n2 := "cs-a-"+tag, "cs-b-"+tag
	tempNodes(t, cloud, tag, n1, n2)
	app := taggedApp("cs-"+tag, tag)
	// A second component, so that stopping one is not stopping all.
	helper := *app.Spec.Components[0].DeepCopy()
	helper.Metadata.Name = "helper"
	app.Spec.Components = append(app.Spec.Components, helper)
	if err := a.karmada.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), app) })
	a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, 2*time.Minute)
	node := runningPods(t, cloud, app.Name, "worker")[0].Spec.NodeName
	other := n1
	if node == n1 {
		other = n2
	}
	e := runEngine(t, map[string]mechanism.Factory{cluster.FluidityName: fluidityOn(t, a.env, "cloud-1")})

	image := func(pods []corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Spec.Containers[0].Image)
		}
		return out
	}
	mustComplete(t, execute(t, e, fluidityPlan(app.Name, "worker", map[string]any{"action": "change_spec", "host": node, "new_spec": map[string]any{
		"containers": []any{map[string]any{"image": "registry.example/worker:2", "platform_requirements": map[string]any{"cpu": map[string]any{"requests": "250m"}}}},
	}})))
	waitPodsOn(t, cloud, app.Name, "worker", node)
	if got := image(runningPods(t, cloud, app.Name, "worker")); !slices.Equal(got, []string{"registry.example/worker:2"}) {
		t.Errorf("images after change_spec: %v", got)
	}

	removed := execute(t, e, fluidityPlan(app.Name, "worker", map[string]any{"action": "remove", "host": node}))
	mustComplete(t, removed)
	waitPodsOn(t, cloud, app.Name, "worker")
	if d := deployment(t, cloud, app.Name, "worker"); d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		t.Errorf("removed component's Deployment asks for %v replicas", d.Spec.Replicas)
	}
	// A deliberately stopped component does not hold the application in
	// Deploying; its status says who stopped it.
	a.waitStatus(t, app.Name, "Running with the worker stopped by plan "+removed.ID, time.Minute, func(got *mlsysopsv1.MLSysOpsApp) bool {
		st := componentStatus(got, "worker")
		return got.Status.Phase == mlsysopsv1.AppRunning && st != nil && st.Replicas == 0 &&
			strings.HasPrefix(st.Message, "stopped") && strings.HasSuffix(st.Message, " by plan "+removed.ID)
	})
	// With every component stopped nothing runs: Degraded.
	helperNode := runningPods(t, cloud, app.Name, "helper")[0].Spec.NodeName
	mustComplete(t, execute(t, e, fluidityPlan(app.Name, "helper", map[string]any{"action": "remove", "host": helperNode})))
	a.waitStatus(t, app.Name, "Degraded with every component stopped", time.Minute, func(got *mlsysopsv1.MLSysOpsApp) bool {
		return got.Status.Phase == mlsysopsv1.AppDegraded && strings.HasPrefix(got.Status.Message, "every component stopped by a plan")
	})
	t.Run("refused: move of a removed component", func(t *testing.T) {
		mustFailWith(t, execute(t, e, fluidityPlan(app.Name, "worker", map[string]any{"action": "move", "src_host": node, "target_host": other})),
			"worker: move from "+node+": the component runs on no node (it was removed; deploy it first)")
	})

	mustComplete(t, execute(t, e, fluidityPlan(app.Name, "worker", map[string]any{"action": "deploy", "host": other})))
	waitPodsOn(t, cloud, app.Name, "worker", other)
	if got := image(runningPods(t, cloud, app.Name, "worker")); !slices.Equal(got, []string{"registry.example/worker:2"}) {
		t.Errorf("images after deploy: %v, want the changed spec's", got)
	}

	// The user updates the component: their spec wins, the plan's node
	// stays.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &mlsysopsv1.MLSysOpsApp{}
		if err := a.karmada.Get(context.Background(), client.ObjectKeyFromObject(app), cur); err != nil {
			return err
		}
		cur.Spec.Components[0].Containers[0].Image = "registry.example/worker:3"
		return a.karmada.Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		pods := runningPods(t, cloud, app.Name, "worker")
		return len(pods) == 1 && pods[0].Spec.NodeName == other && pods[0].Spec.Containers[0].Image == "registry.example/worker:3" &&
			len(nodesOf(t, cloud, app.Name, "worker")) == 1, nil
	})
	if err != nil {
		t.Fatalf("the user's update did not win: pods %v with %v", names(runningPods(t, cloud, app.Name, "worker")), image(runningPods(t, cloud, app.Name, "worker")))
	}
	d := deployment(t, cloud, app.Name, "worker")
	if got := d.Annotations[mlsysopsv1.AnnotationOverrideDropped]; !strings.Contains(got, "change_spec dropped: the application changed the component") {
		t.Errorf("dropped annotation = %q", got)
	}
	ov, err := fluidity.ReadOverride(d.Annotations)
	if err != nil || ov == nil || ov.Spec != nil || !slices.Equal(ov.Nodes, []string{other}) {
		t.Errorf("override after the user's update = %+v, %v; want only the node %s", ov, err, other)
	}
}

// A clusterPlacement plan moves an application from its cluster to the
// other one, and the move outlives a restart; plans that conflict with the
// user's cluster_id, name a cluster the application does not fit or move
// an application whose permitted_actions do not allow it are refused with
// the reason.
func TestClusterPlacementPlan(t *testing.T) {
	a := startAgents(t)
	app := taggedApp("cp-"+rand.String(5), "")
	app.Spec.ClusterPlacement = nil
	app.Spec.Components[0].NodePlacement = nil
	pinnedByUser := taggedApp("cpu-"+rand.String(5), "")
	pinnedByUser.Spec.Components[0].NodePlacement = nil
	gpu := taggedApp("cpg-"+rand.String(5), "")
	gpu.Spec.ClusterPlacement = nil
	gpu.Spec.Components[0].NodePlacement = nil
	gpu.Spec.Components[0].Containers[0].PlatformRequirements.GPU = &mlsysopsv1.GPURequirements{Model: "NVIDIA-A100-SXM4-80GB", Requests: 1, Limits: 1}
	locked := taggedApp("cpl-"+rand.String(5), "")
	locked.Spec.ClusterPlacement = nil
	locked.Spec.Components[0].NodePlacement = nil
	locked.Spec.PermittedActions = []string{mlsysopsv1.AppActionChangeContainerImage}
	for _, x := range []*mlsysopsv1.MLSysOpsApp{app, pinnedByUser, gpu, locked} {
		if err := a.karmada.Create(context.Background(), x); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), x) })
	}
	got := a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, 2*time.Minute)
	first := got.Status.Components[0].Cluster
	second := "cloud-1"
	if first == "cloud-1" {
		second = "edge-1"
	}
	e := runEngine(t, map[string]mechanism.Factory{continuum.ClusterPlacementName: clusterPlacementOn(t, a)})
	place := func(name, cl string) map[string]any {
		return map[string]any{continuum.ClusterPlacementName: map[string]any{"action": map[string]any{"component": cl}, "app": []any{map[string]any{"name": name}}}}
	}

	t.Run("refused: the user's cluster_id", func(t *testing.T) {
		mustFailWith(t, execute(t, e, place(pinnedByUser.Name, "edge-1")), "the application's cluster_placement.cluster_id [cloud-1] does not list [edge-1]; the user's choice wins")
	})
	t.Run("refused: not eligible", func(t *testing.T) {
		mustFailWith(t, execute(t, e, place(gpu.Name, "edge-1")), "cluster edge-1 is not eligible: ")
	})
	t.Run("refused: permitted_actions", func(t *testing.T) {
		st := a.waitPhase(t, locked.Name, mlsysopsv1.AppRunning, time.Minute)
		other := "cloud-1"
		if st.Status.Components[0].Cluster == "cloud-1" {
			other = "edge-1"
		}
		mustFailWith(t, execute(t, e, place(locked.Name, other)), "action component_relocation (clusterPlacement move) is not permitted on application "+locked.Name)
	})
	t.Run("already there", func(t *testing.T) {
		mustComplete(t, execute(t, e, place(app.Name, first)))
	})

	mustComplete(t, execute(t, e, place(app.Name, second)))
	got = a.waitPhase(t, app.Name, mlsysopsv1.AppRunning, time.Minute)
	if len(got.Status.Components) != 1 || got.Status.Components[0].Cluster != second {
		t.Errorf("status components %+v, want one on %s", got.Status.Components, second)
	}
	if n := len(runningPods(t, a.member(t, second), app.Name, "worker")); n != 1 {
		t.Errorf("%d running worker pods in %s, want 1", n, second)
	}
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := a.member(t, first).CoreV1().Namespaces().Get(ctx, members.Namespace(app.Name), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("namespace of the app still in %s", first)
	}

	// Restart: the application stays where the plan put it.
	a.Stop()
	b := startAgents(t)
	b.passed(t, app.Name, second)
	got = b.waitPhase(t, app.Name, mlsysopsv1.AppRunning, time.Minute)
	if len(got.Status.Components) != 1 || got.Status.Components[0].Cluster != second {
		t.Errorf("after a restart: status components %+v, want one on %s", got.Status.Components, second)
	}
}

// probe records the commands of the test policy's plans.
type probe struct {
	mu   sync.Mutex
	seen map[string]map[string]any // by application
}

func (p *probe) Apply(_ context.Context, cmd map[string]any) (mechanism.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name, ok := cmd["name"].(string); ok {
		delete(cmd, mechanism.PlanIDKey)
		p.seen[name] = cmd
	}
	return mechanism.Result{}, nil
}
func (p *probe) State(context.Context) (map[string]any, error) { return map[string]any{}, nil }
func (p *probe) Options() map[string]any                       { return map[string]any{} }

func (p *probe) get(app string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[app]
}

// echoPolicy is an application-scope policy that plans, once per
// application, what it was told of it.
const echoPolicy = `
def initialize():
    return {"scope": "application", "mechanisms": ["probe"], "configuration": {"analyze_interval": "1s"}}

def analyze(context, apps, system, mechanisms, telemetry, ml):
    return True, context

def plan(context, apps, system, mechanisms, telemetry, ml):
    app = apps[0]
    spec = app.get("spec") or app
    return {"probe": {"name": app["name"], "cluster": app.get("cluster"),
                      "components": [c["metadata"]["name"] for c in spec["components"]]}}, context
`

// The continuum and cluster controllers hand their applications to the
// MAPE engines, so application-scope policies run on both layers, and
// take them away when they are deleted.
func TestApplicationPoliciesGetTheApplications(t *testing.T) {
	tmpl, err := policy.Compile(context.Background(), "echo", "policy-echo.star", []byte(echoPolicy), policy.Runtime{})
	if err != nil {
		t.Fatal(err)
	}
	onCluster, onContinuum := &probe{seen: map[string]map[string]any{}}, &probe{seen: map[string]map[string]any{}}
	clusterEngine := runEngine(t, map[string]mechanism.Factory{"probe": func(mechanism.Env) (mechanism.Mechanism, error) { return onCluster, nil }}, tmpl)
	continuumEngine := runEngine(t, map[string]mechanism.Factory{"probe": func(mechanism.Env) (mechanism.Mechanism, error) { return onContinuum, nil }}, tmpl)
	a := startAgentsWith(t, func(cc *continuum.Controllers, clusters map[string]*cluster.Controllers) {
		cc.Apps.FeedEngine(continuumEngine)
		clusters["cloud-1"].Apps.FeedEngine(clusterEngine)
	})
	app := taggedApp("pol-"+rand.String(5), "")
	app.Spec.Components[0].NodePlacement = nil
	if err := a.karmada.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), app) })

	want := map[*probe]map[string]any{
		onCluster:   {"name": app.Name, "cluster": "cloud-1", "components": []any{"worker"}},
		onContinuum: {"name": app.Name, "cluster": nil, "components": []any{"worker"}},
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return fmt.Sprint(onCluster.get(app.Name)) == fmt.Sprint(want[onCluster]) && fmt.Sprint(onContinuum.get(app.Name)) == fmt.Sprint(want[onContinuum]), nil
	})
	if err != nil {
		t.Fatalf("policies were told cluster %v, continuum %v; want %v and %v", onCluster.get(app.Name), onContinuum.get(app.Name), want[onCluster], want[onContinuum])
	}

	if err := a.karmada.Delete(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return !slices.Contains(clusterEngine.Applications(), app.Name) && !slices.Contains(continuumEngine.Applications(), app.Name), nil
	})
	if err != nil {
		t.Errorf("engines still manage the deleted application: cluster %v, continuum %v", clusterEngine.Applications(), continuumEngine.Applications())
	}
}

// componentStatus is the status of the named component, nil when there is
// none.
func componentStatus(app *mlsysopsv1.MLSysOpsApp, name string) *mlsysopsv1.ComponentStatus {
	for i := range app.Status.Components {
		if app.Status.Components[i].Name == name {
			return &app.Status.Components[i]
		}
	}
	return nil
}

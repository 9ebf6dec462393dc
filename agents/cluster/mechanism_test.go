package cluster

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// node is a Ready amd64 node with 4 CPUs, or NotReady.
func node(name string, ready bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			mlsysopsv1.LabelHostname: name, mlsysopsv1.LabelArch: "amd64", mlsysopsv1.LabelKubeOS: "linux",
		}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
}

func demoApp() *mlsysopsv1.MLSysOpsApp {
	cpu := resource.MustParse("500m")
	return &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: mlsysopsv1.Namespace},
		Spec: mlsysopsv1.MLSysOpsAppSpec{Name: "demo", Components: []mlsysopsv1.Component{{
			Metadata: mlsysopsv1.ComponentMetadata{Name: "worker"},
			Containers: []mlsysopsv1.Container{{Image: "registry.example/worker:1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
				CPU: &mlsysopsv1.CPURequirements{Requests: &cpu},
			}}},
		}}},
	}
}

// placedDeployment is the worker's Deployment as the controller renders
// it on nodes, rolled out.
func placedDeployment(t *testing.T, app *mlsysopsv1.MLSysOpsApp, nodes ...string) *appsv1.Deployment {
	t.Helper()
	objs, err := fluidity.Render(app, &app.Spec.Components[0], nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := objs.Deployment
	d.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	return d
}

func newFake(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return newFakeWith(t, interceptor.Funcs{}, objs...)
}

// newFakeWith is newFake with calls going through funcs first.
func newFakeWith(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

// completions collects what a mechanism reports.
type completions struct {
	mu  sync.Mutex
	got []mechanism.Completion
}

func (c *completions) add(x mechanism.Completion) {
	c.mu.Lock()
	c.got = append(c.got, x)
	c.mu.Unlock()
}
func (c *completions) wait(t *testing.T) mechanism.Completion {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		if len(c.got) > 0 {
			x := c.got[0]
			c.mu.Unlock()
			return x
		}
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no completion")
	return mechanism.Completion{}
}

func move(src, target string) map[string]any {
	return map[string]any{"name": "demo", mechanism.PlanIDKey: "p1", "deployment_plan": map[string]any{
		"worker": []any{map[string]any{"action": "move", "src_host": src, "target_host": target}},
	}}
}

func TestFluidityRefusesWithReasons(t *testing.T) {
	app := demoApp()
	cases := map[string]struct {
		cmd  map[string]any
		gone map[string]string
		want string
	}{
		"target not Ready": {
			cmd:  move("n1", "down"),
			want: "fluidity cannot execute the plan for demo: worker: cannot run on [down]: node down is not eligible: no node fits: 1 node(s) are not Ready",
		},
		"target without the GPU": {
			cmd: map[string]any{"name": "demo", "deployment_plan": map[string]any{"worker": []any{
				map[string]any{"action": "change_spec", "new_spec": map[string]any{"containers": []any{map[string]any{"image": "x:1", "platform_requirements": map[string]any{
					"gpu": map[string]any{"model": "h100", "requests": 1, "limits": 1},
				}}}}},
			}}},
			want: "worker: the changed component fits no node: no node fits: 2 node(s) lack label",
		},
		"target's agent gone": {
			cmd:  move("n1", "n2"),
			gone: map[string]string{"n2": "node agent gone for 2m0s"},
			want: "worker: cannot run on [n2]: node n2: node agent gone for 2m0s",
		},
		"unknown target": {
			cmd:  move("n1", "elsewhere"),
			want: "worker: cannot run on [elsewhere]: node elsewhere is not a node of this cluster",
		},
		"not where the plan says": {
			cmd:  move("n2", "n1"),
			want: "worker: move from n2: the component runs on [n1]",
		},
		"initial deploy elsewhere": {
			cmd:  map[string]any{"name": "demo", "deployment_plan": map[string]any{"worker": []any{map[string]any{"action": "deploy", "host": "n2"}}, "initial_plan": true}},
			want: "worker: initial deploy to n2: the placement controller placed the component on [n1] already; an initial plan does not move it (plan a move)",
		},
		"unknown component": {
			cmd:  map[string]any{"name": "demo", "deployment_plan": map[string]any{"nope": []any{map[string]any{"action": "remove", "host": "n1"}}}},
			want: "nope: not a component of demo",
		},
		"unknown application": {
			cmd:  map[string]any{"name": "other", "deployment_plan": map[string]any{"worker": []any{map[string]any{"action": "remove", "host": "n1"}}}},
			want: "fluidity: application other is not placed in cluster c1",
		},
		"renamed by change_spec": {
			cmd: map[string]any{"name": "demo", "deployment_plan": map[string]any{"worker": []any{
				map[string]any{"action": "change_spec", "host": "n1", "new_spec": map[string]any{"metadata": map[string]any{"name": "x"}}},
			}}},
			want: "worker: new_spec must keep the component's name worker (metadata.name)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dep := placedDeployment(t, app, "n1")
			kc := newFake(t, app.DeepCopy(), dep, node("n1", true), node("n2", true), node("down", false))
			f := NewFluidity(kc, "c1", quiet(), FluidityOptions{Unavailable: func() map[string]string { return tc.gone }})
			defer f.Close()
			_, err := f.Apply(context.Background(), tc.cmd)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %s", err, tc.want)
			}
			got := &appsv1.Deployment{}
			if err := kc.Get(context.Background(), client.ObjectKeyFromObject(dep), got); err != nil {
				t.Fatal(err)
			}
			if _, ok := got.Annotations[mlsysopsv1.AnnotationOverride]; ok {
				t.Error("a refused plan was recorded")
			}
		})
	}
}

// A move is recorded as an override, stays Pending while the controller
// has not carried it out, and succeeds once the component runs on the
// target only.
func TestFluidityMoveCompletesWhenCarriedOut(t *testing.T) {
	app := demoApp()
	dep := placedDeployment(t, app, "n1")
	// Deployment lists count the follower's checks.
	var reads atomic.Int64
	kc := newFakeWith(t, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*appsv1.DeploymentList); ok {
			reads.Add(1)
		}
		return c.List(ctx, list, opts...)
	}}, app.DeepCopy(), dep, node("n1", true), node("n2", true))
	var done completions
	events := record.NewFakeRecorder(10)
	f := NewFluidity(kc, "c1", quiet(), FluidityOptions{Complete: done.add, Poll: 10 * time.Millisecond, Events: events})
	defer f.Close()
	ctx := context.Background()
	cmd := move("n1", "n2")
	cmd[mechanism.PolicyKey], cmd["reason"] = "relocateComponents", "latency 0.2 > 0.05"
	res, err := f.Apply(ctx, cmd)
	if err != nil || res.Status != mechanism.StatusPending {
		t.Fatalf("Apply = %+v, %v; want Pending", res, err)
	}
	cur := &appsv1.Deployment{}
	if err := kc.Get(ctx, client.ObjectKeyFromObject(dep), cur); err != nil {
		t.Fatal(err)
	}
	ov, err := fluidity.ReadOverride(cur.Annotations)
	if err != nil || ov == nil {
		t.Fatalf("override = %v, %v", ov, err)
	}
	want := &fluidity.Override{Plan: "p1", Base: fluidity.SpecHash(&app.Spec.Components[0]), Nodes: []string{"n2"}}
	if diff := cmp.Diff(want, ov); diff != "" {
		t.Errorf("override (-want +got):\n%s", diff)
	}
	// The follower checks once per pass, and reports before the next:
	// three more reads prove a whole check ran after the override was
	// written.
	checked := reads.Load() + 3
	deadline := time.Now().Add(30 * time.Second)
	for reads.Load() < checked {
		if time.Now().After(deadline) {
			t.Fatalf("the follower listed Deployments %d times in 30s, want %d", reads.Load(), checked)
		}
		time.Sleep(10 * time.Millisecond)
	}
	done.mu.Lock()
	early := len(done.got)
	done.mu.Unlock()
	if early != 0 {
		t.Fatalf("completed before the controller moved the component: %+v", done.got)
	}

	// The controller renders the component on n2 and the pod runs there.
	objs, err := fluidity.Render(app, &app.Spec.Components[0], []string{"n2"}, ov)
	if err != nil {
		t.Fatal(err)
	}
	cur.Annotations = objs.Deployment.Annotations
	cur.Spec = objs.Deployment.Spec
	cur.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if err := kc.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-x", Namespace: cur.Namespace, Labels: map[string]string{mlsysopsv1.LabelComponent: "worker"}},
		Spec: corev1.PodSpec{NodeName: "n2"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if err := kc.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	c := done.wait(t)
	if c.PlanID != "p1" || c.Status != mechanism.StatusSuccess {
		t.Errorf("completion = %+v, want p1 Success", c)
	}
	accepted := "Normal PlanAccepted plan p1 of policy relocateComponents: worker move n1 -> n2 (latency 0.2 > 0.05)"
	wantEvents := []string{accepted, accepted, "Normal PlanCompleted plan p1 of policy relocateComponents carried out: worker on [n2]"}
	var got []string
	for len(got) < len(wantEvents) {
		select {
		case e := <-events.Events:
			got = append(got, e)
		case <-time.After(5 * time.Second):
			t.Fatalf("events %q, want %q", got, wantEvents)
		}
	}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A plan whose override the controller dropped fails with the
// controller's reason.
func TestFluidityFailsWhenTheOverrideIsDropped(t *testing.T) {
	app := demoApp()
	dep := placedDeployment(t, app, "n1")
	kc := newFake(t, app.DeepCopy(), dep, node("n1", true), node("n2", true))
	var done completions
	f := NewFluidity(kc, "c1", quiet(), FluidityOptions{Complete: done.add, Poll: 10 * time.Millisecond})
	defer f.Close()
	ctx := context.Background()
	if _, err := f.Apply(ctx, move("n1", "n2")); err != nil {
		t.Fatal(err)
	}
	cur := &appsv1.Deployment{}
	if err := kc.Get(ctx, client.ObjectKeyFromObject(dep), cur); err != nil {
		t.Fatal(err)
	}
	delete(cur.Annotations, mlsysopsv1.AnnotationOverride)
	cur.Annotations[mlsysopsv1.AnnotationOverrideDropped] = "p1: nodes [n2] dropped: node n2 is not eligible"
	if err := kc.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	c := done.wait(t)
	if c.Status != mechanism.StatusFailed || c.Err == nil || !strings.Contains(c.Err.Error(), "dropped the plan's changes: nodes [n2] dropped: node n2 is not eligible") {
		t.Errorf("completion = %+v (%v)", c, c.Err)
	}
}

// A plan that asks for what is already so succeeds at once and writes
// nothing; a plan that does not finish in time fails with what it waits
// for.
func TestFluidityNothingToDoAndTimeout(t *testing.T) {
	app := demoApp()
	dep := placedDeployment(t, app, "n1")
	kc := newFake(t, app.DeepCopy(), dep, node("n1", true), node("n2", true))
	var done completions
	f := NewFluidity(kc, "c1", quiet(), FluidityOptions{Complete: done.add, Poll: 10 * time.Millisecond, Timeout: 100 * time.Millisecond})
	defer f.Close()
	ctx := context.Background()
	for _, initial := range []bool{true, false} {
		res, err := f.Apply(ctx, map[string]any{"name": "demo", "deployment_plan": map[string]any{
			"worker": []any{map[string]any{"action": "deploy", "host": "n1"}}, "initial_plan": initial,
		}})
		if err != nil || res.Status != mechanism.StatusSuccess {
			t.Errorf("deploy where it runs (initial %v) = %+v, %v; want Success", initial, res, err)
		}
	}
	res, err := f.Apply(ctx, map[string]any{"name": "demo", mechanism.PlanIDKey: "p2", "deployment_plan": map[string]any{
		"worker": []any{map[string]any{"action": "remove", "host": "n1"}},
	}})
	if err != nil || res.Status != mechanism.StatusPending {
		t.Fatalf("remove = %+v, %v", res, err)
	}
	c := done.wait(t)
	if c.Status != mechanism.StatusFailed || !strings.Contains(c.Err.Error(), "not carried out after 100ms: worker: the Deployment does not ask for 0 replicas yet") {
		t.Errorf("completion = %+v (%v)", c, c.Err)
	}
}

func TestFluidityState(t *testing.T) {
	app := demoApp()
	dep := placedDeployment(t, app, "n1")
	kc := newFake(t, app.DeepCopy(), dep, node("n1", true), node("n2", false), node("n3", true), node("n4", true),
		&mlsysopsv1.MLSysOpsNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: mlsysopsv1.Namespace}, Spec: mlsysopsv1.MLSysOpsNodeSpec{ClusterID: "c1", ContinuumLayer: "edge"}})
	gone := func() map[string]string { return map[string]string{"n4": "agent gone"} }
	for name, f := range map[string]*Fluidity{
		// The agent of n4 is gone: not a candidate.
		"live": NewFluidity(kc, "c1", quiet(), FluidityOptions{Unavailable: gone, Reader: func() client.Reader { return nil }}),
		// The controllers' caches, when they run, are read instead of
		// the API (here an empty one).
		"cached": NewFluidity(newFake(t), "c1", quiet(), FluidityOptions{Unavailable: gone, Reader: func() client.Reader { return kc }}),
	} {
		t.Run(name, func(t *testing.T) {
			defer f.Close()
			st, err := f.State(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkFluidityState(t, st)
		})
	}
}

func checkFluidityState(t *testing.T, st map[string]any) {
	t.Helper()
	want := map[string]any{
		"cluster": "c1",
		"applications": map[string]any{"demo": map[string]any{"components": map[string]any{
			"worker": map[string]any{"node_placed": "n1", "nodes": []any{"n1"}, "replicas": int64(1), "ready_replicas": int64(1),
				"candidates": []any{"n1", "n3"}},
		}}},
		"nodes": map[string]any{
			"n1": map[string]any{"spec": map[string]any{"cluster_id": "c1", "continuum_layer": "edge", "environment": map[string]any{}}, "ready": true, "components": []any{"worker"}},
			"n2": map[string]any{"spec": map[string]any{}, "ready": false, "components": []any{}},
			"n3": map[string]any{"spec": map[string]any{}, "ready": true, "components": []any{}},
			"n4": map[string]any{"spec": map[string]any{}, "ready": true, "components": []any{}},
		},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func indexOf(ns ...*corev1.Node) *placement.Index {
	idx := placement.NewIndex()
	for _, n := range ns {
		idx.UpsertNode(n)
	}
	return idx
}

// The controller keeps a pinned component on its nodes while they fit,
// and drops the pin, placing the component as usual, when one fails.
func TestChooseHonoursPins(t *testing.T) {
	app := demoApp()
	comp := &app.Spec.Components[0]
	r := NewAppReconciler(nil, "c1", quiet())
	cur := placedDeployment(t, app, "n1")
	healthy := indexOf(node("n1", true), node("n2", true), node("n3", true))

	got, why, unpinned := r.choose(app, comp, cur, healthy, nil, &fluidity.Override{Plan: "p", Nodes: []string{"n3"}}, nil)
	if !cmp.Equal(got, []string{"n3"}) || why != "" || unpinned != "" {
		t.Errorf("pinned to n3: %v %q %q", got, why, unpinned)
	}
	got, _, _ = r.choose(app, comp, cur, healthy, nil, &fluidity.Override{Plan: "p", Nodes: []string{"n1"}, Stopped: true}, nil)
	if !cmp.Equal(got, []string{"n1"}) {
		t.Errorf("stopped: %v, want its last nodes", got)
	}
	failed := indexOf(node("n1", true), node("n2", true), node("n3", false))
	got, _, unpinned = r.choose(app, comp, cur, failed, nil, &fluidity.Override{Plan: "p", Nodes: []string{"n3"}}, nil)
	if !cmp.Equal(got, []string{"n1"}) || unpinned != "node n3 is not eligible: no node fits: 1 node(s) are not Ready" {
		t.Errorf("pinned to a failed node: %v, unpinned %q; want kept on n1", got, unpinned)
	}
}

// Why pinned nodes cannot take a component: each node that fails named
// with its reason, and only when each would take a replica, that together
// they cannot hold them all.
func TestPinProblem(t *testing.T) {
	app := demoApp()
	comp := &app.Spec.Components[0]
	idx := indexOf(node("n1", true), node("n2", true), node("n3", false))
	for name, tc := range map[string]struct {
		pinned   []string
		replicas int32
		gone     map[string]string
		want     string
	}{
		"fit":                       {pinned: []string{"n1", "n2"}, replicas: 2, want: ""},
		"the agent of a node gone":  {pinned: []string{"n1", "n2"}, replicas: 1, gone: map[string]string{"n2": "its agent is lost"}, want: "node n2: its agent is lost"},
		"not a node of the cluster": {pinned: []string{"n9"}, replicas: 1, want: "node n9 is not a node of this cluster"},
		"a node not Ready":          {pinned: []string{"n1", "n3"}, replicas: 2, want: "node n3 is not eligible: no node fits: 1 node(s) are not Ready"},
		// 500m a replica, 4 CPUs a node: 8 fit on one.
		"too many replicas": {pinned: []string{"n1"}, replicas: 9, want: "nodes [n1] cannot hold 9 replicas: "},
	} {
		t.Run(name, func(t *testing.T) {
			got := pinProblem(app, comp, tc.pinned, tc.replicas, idx, nil, tc.gone)
			if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
				t.Errorf("pinProblem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCurrentOverrideDropsWhatTheApplicationInvalidated(t *testing.T) {
	app := demoApp()
	comp := &app.Spec.Components[0]
	old := "0000000000000000"
	spec := comp.DeepCopy()
	spec.Containers[0].Image = "registry.example/worker:2"
	cases := map[string]struct {
		ov          *fluidity.Override
		want        *fluidity.Override
		wantDropped string
	}{
		"unchanged application": {
			ov:   &fluidity.Override{Plan: "p", Base: fluidity.SpecHash(comp), Nodes: []string{"n2"}, Spec: spec},
			want: &fluidity.Override{Plan: "p", Base: fluidity.SpecHash(comp), Nodes: []string{"n2"}, Spec: spec},
		},
		"pins outlive a change": {
			ov:          &fluidity.Override{Plan: "p", Base: old, Nodes: []string{"n2"}, Spec: spec},
			want:        &fluidity.Override{Plan: "p", Base: fluidity.SpecHash(comp), Nodes: []string{"n2"}},
			wantDropped: "p: change_spec dropped: the application changed the component",
		},
		"a change brings a removed component back": {
			ov:          &fluidity.Override{Plan: "p", Base: old, Nodes: []string{"n1"}, Stopped: true},
			want:        nil,
			wantDropped: "p: remove dropped: the application changed the component",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dep := placedDeployment(t, app, "n1")
			dep.Annotations[mlsysopsv1.AnnotationOverride] = tc.ov.Encode()
			got, dropped := currentOverride(comp, dep, quiet())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("override (-want +got):\n%s", diff)
			}
			if dropped != tc.wantDropped {
				t.Errorf("dropped = %q, want %q", dropped, tc.wantDropped)
			}
		})
	}
}

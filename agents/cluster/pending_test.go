package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// pendingPod is a pod of the worker as the controller renders it on
// nodes, Pending: Unschedulable since the given time, or not tried yet
// when since is zero.
func pendingPod(t *testing.T, app *mlsysopsv1.MLSysOpsApp, since time.Time, nodes ...string) corev1.Pod {
	t.Helper()
	dep := placedDeployment(t, app, nodes...)
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-x", Labels: dep.Spec.Template.Labels}, Spec: dep.Spec.Template.Spec}
	if !since.IsZero() {
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 1 Insufficient cpu", LastTransitionTime: metav1.NewTime(since),
		}}
	}
	return p
}

func TestUnschedulableOn(t *testing.T) {
	app := demoApp()
	cur := placedDeployment(t, app, "n1")
	now := time.Now()
	settle := 30 * time.Second

	full, recheck := unschedulableOn([]corev1.Pod{pendingPod(t, app, now.Add(-time.Minute), "n1")}, cur, nil, nil, settle, now)
	if want := map[string]string{"n1": "could not take a replica (kube-scheduler: 0/3 nodes are available: 1 Insufficient cpu)"}; !cmp.Equal(full, want) || recheck != 0 {
		t.Errorf("settled: %v, %v; want %v", full, recheck, want)
	}
	full, recheck = unschedulableOn([]corev1.Pod{pendingPod(t, app, now.Add(-10*time.Second), "n1")}, cur, nil, nil, settle, now)
	if full != nil || recheck != 20*time.Second {
		t.Errorf("settling: %v, %v; want nothing yet, a look in 20s", full, recheck)
	}
	full, recheck = unschedulableOn([]corev1.Pod{pendingPod(t, app, time.Time{}, "n1")}, cur, nil, nil, settle, now)
	if full != nil || recheck != settle {
		t.Errorf("not tried yet: %v, %v; want nothing yet, a look in %v", full, recheck, settle)
	}
	// A pod of an earlier placement (on n2) says nothing about n1.
	full, recheck = unschedulableOn([]corev1.Pod{pendingPod(t, app, now.Add(-time.Minute), "n2")}, cur, nil, nil, settle, now)
	if full != nil || recheck != 0 {
		t.Errorf("earlier placement: %v, %v; want nothing", full, recheck)
	}
	starting := cur.DeepCopy()
	starting.Status.ReadyReplicas = 0
	if full, recheck := unschedulableOn(nil, starting, nil, nil, settle, now); full != nil || recheck != settle {
		t.Errorf("not ready, no pod seen: %v, %v; want a look in %v", full, recheck, settle)
	}
	scheduled := pendingPod(t, app, now.Add(-time.Minute), "n1")
	scheduled.Spec.NodeName = "n1"
	if full, _ := unschedulableOn([]corev1.Pod{scheduled}, cur, nil, nil, settle, now); full != nil {
		t.Errorf("scheduled pod: %v, want nothing", full)
	}
}

// A node the pod as admitted can never go to is found at once, without
// waiting for the scheduler's verdict to settle: an admission webhook
// kept the pod off nodes without a label (as the testbed's keeps
// foreign images off its real nodes), or the node has a taint the pod
// does not tolerate. A node the pod can go to is left to the scheduler.
func TestUnschedulableOnRefusedAtAdmission(t *testing.T) {
	app := demoApp()
	now := time.Now()
	settle := 30 * time.Second
	admitted := func(nodes ...string) corev1.Pod {
		p := pendingPod(t, app, time.Time{}, nodes...)
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		for i := range terms {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, corev1.NodeSelectorRequirement{Key: "type", Operator: corev1.NodeSelectorOpIn, Values: []string{"kwok"}})
		}
		return p
	}
	real, fake, tainted := node("n1", true), node("n2", true), node("n3", true)
	fake.Labels["type"] = "kwok"
	tainted.Labels["type"] = "kwok"
	tainted.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	nodes := map[string]*corev1.Node{"n1": real, "n2": fake, "n3": tainted}
	byName := func(name string) *corev1.Node { return nodes[name] }

	full, _ := unschedulableOn([]corev1.Pod{admitted("n1")}, placedDeployment(t, app, "n1"), byName, nil, settle, now)
	if want := "the pod as admitted cannot go there: its required node affinity or node selector does not match the node's labels"; full["n1"] != want || len(full) != 1 {
		t.Errorf("node without the admitted label: %v, want n1: %q at once", full, want)
	}
	full, recheck := unschedulableOn([]corev1.Pod{admitted("n2")}, placedDeployment(t, app, "n2"), byName, nil, settle, now)
	if full != nil || recheck != settle {
		t.Errorf("node the pod can go to: %v, %v; want it left to the scheduler, a look in %v", full, recheck, settle)
	}
	full, _ = unschedulableOn([]corev1.Pod{admitted("n3")}, placedDeployment(t, app, "n3"), byName, nil, settle, now)
	if want := "the pod as admitted cannot go there: it does not tolerate the node's taint nvidia.com/gpu=present:NoSchedule"; full["n3"] != want {
		t.Errorf("tainted node: %v, want n3: %q", full, want)
	}
	// With replicas on two nodes, only the one the pod cannot go to.
	full, _ = unschedulableOn([]corev1.Pod{admitted("n1", "n2")}, placedDeployment(t, app, "n1", "n2"), byName, nil, settle, now)
	if _, ok := full["n1"]; !ok || len(full) != 1 {
		t.Errorf("two nodes, one refusing: %v, want n1 only", full)
	}
	// Knowing the cluster's nodes, a refusal rules out at once every node
	// the admitted pod cannot go to whatever the host: the other real
	// node (n4) and the tainted one, not the one it can (n2).
	nodes["n4"] = node("n4", true)
	names := func() []string { return []string{"n1", "n2", "n3", "n4"} }
	full, _ = unschedulableOn([]corev1.Pod{admitted("n1")}, placedDeployment(t, app, "n1"), byName, names, settle, now)
	if want := "the pod as admitted cannot go there: its required node affinity or node selector does not match the node's labels"; full["n1"] != want || full["n4"] != want {
		t.Errorf("refused on n1: %v, want n1 and n4: %q", full, want)
	}
	if _, ok := full["n3"]; !ok || len(full) != 3 {
		t.Errorf("refused on n1: %v, want n1, n3 (its taint) and n4, not n2", full)
	}
	// A pod the chosen node takes rules out nothing else.
	if full, _ := unschedulableOn([]corev1.Pod{admitted("n2")}, placedDeployment(t, app, "n2"), byName, names, settle, now); full != nil {
		t.Errorf("placed on a node the pod can go to: %v, want nothing ruled out", full)
	}
}

// Nodes kube-scheduler found full for a component are left for another
// node; with none left, the reason says why.
func TestChooseAvoidsNodesTheSchedulerFoundFull(t *testing.T) {
	app := demoApp()
	comp := &app.Spec.Components[0]
	r := NewAppReconciler(nil, "c1", quiet())
	cur := placedDeployment(t, app, "n1")
	full := map[string]string{"n1": "could not take a replica (kube-scheduler: 1 Insufficient cpu)"}

	got, why, _ := r.choose(app, comp, cur, indexOf(node("n1", true), node("n2", true)), nil, nil, full)
	if !cmp.Equal(got, []string{"n2"}) || why != "" {
		t.Errorf("choose = %v, %q; want n2", got, why)
	}
	got, why, _ = r.choose(app, comp, cur, indexOf(node("n1", true)), nil, nil, full)
	if got != nil || !strings.Contains(why, "kube-scheduler: 1 Insufficient cpu") {
		t.Errorf("choose = %v, %q; want none, with the scheduler's reason", got, why)
	}
	// A plan's pin on such a node goes, saying why.
	got, _, unpinned := r.choose(app, comp, cur, indexOf(node("n1", true), node("n2", true)), nil, &fluidity.Override{Plan: "p", Nodes: []string{"n1"}}, full)
	if !cmp.Equal(got, []string{"n2"}) || unpinned != "node n1: "+full["n1"] {
		t.Errorf("pinned to a full node: %v, unpinned %q; want n2", got, unpinned)
	}
}

// Nodes found full for a component stay avoided for rememberFull: a
// component that n1 and n2 both refuse does not move between them for
// ever, it goes to n3.
func TestRefusalsRemembered(t *testing.T) {
	app := demoApp()
	comp := &app.Spec.Components[0]
	r := NewAppReconciler(nil, "c1", quiet())
	nodes := indexOf(node("n1", true), node("n2", true), node("n3", true))
	now := time.Now()
	place := func(on string, full map[string]string, at time.Time) []string {
		t.Helper()
		remembered := r.refused.note(app.Name, comp.Metadata.Name, full, at)
		got, why, _ := r.choose(app, comp, placedDeployment(t, app, on), nodes, nil, nil, remembered)
		if why != "" {
			t.Fatalf("choose from %s: %s", on, why)
		}
		return got
	}
	first := place("n1", map[string]string{"n1": "could not take a replica (kube-scheduler: node(s) didn't match)"}, now)
	if len(first) != 1 || first[0] == "n1" {
		t.Fatalf("after n1 refused: %v", first)
	}
	second := place(first[0], map[string]string{first[0]: "could not take a replica (kube-scheduler: node(s) didn't match)"}, now.Add(time.Minute))
	if len(second) != 1 || second[0] == "n1" || second[0] == first[0] {
		t.Errorf("after n1 and %s refused: %v, want the third node", first[0], second)
	}
	// Once the memory is old, the nodes count again; an application's
	// removal forgets it at once.
	if got := r.refused.note(app.Name, comp.Metadata.Name, nil, now.Add(rememberFull+2*time.Minute)); got != nil {
		t.Errorf("after %s: %v remembered", rememberFull, got)
	}
	r.refused.note(app.Name, comp.Metadata.Name, map[string]string{"n1": "full"}, now)
	r.refused.forget(app.Name)
	if got := r.refused.note(app.Name, comp.Metadata.Name, nil, now); got != nil {
		t.Errorf("after forget: %v remembered", got)
	}
}

// Replicas placed and not yet visible count against their nodes for other
// components, until their pods show.
func TestAssumedPlacements(t *testing.T) {
	app := demoApp()
	comp := &app.Spec.Components[0]
	r := NewAppReconciler(nil, "c1", quiet())
	withCPU := func(name, cpu string) *corev1.Node {
		n := node(name, true)
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
		return n
	}
	a, b := withCPU("a", "900m"), withCPU("b", "1")
	nodes := indexOf(a, b)

	// The worker (500m) goes on the node with most room left.
	got, _, _ := r.decide(app, comp, nil, nodes, nil, nil)
	if !cmp.Equal(got, []string{"b"}) {
		t.Fatalf("first placement on %v, want b", got)
	}
	// Another component of 600m, which b would suit best, no longer fits
	// there while the worker's pod is not visible: it goes to a.
	other := comp.DeepCopy()
	other.Metadata.Name = "other"
	cpu := resource.MustParse("600m")
	other.Containers[0].PlatformRequirements.CPU.Requests = &cpu
	got, _, _ = r.decide(app, other, nil, nodes, nil, nil)
	if !cmp.Equal(got, []string{"a"}) {
		t.Errorf("second placement on %v, want a (b holds the assumed worker)", got)
	}
	// A component does not count against itself.
	r.assumed.mu.Lock()
	view := r.assumed.usage(nodes, app.Name, "worker", time.Now())
	r.assumed.mu.Unlock()
	if q := view.List("b")[corev1.ResourceCPU]; !q.IsZero() {
		t.Errorf("worker's own view of b: %s assumed, want nothing", q.String())
	}

	// Once the worker's pod shows on b, it counts as a pod, not twice.
	nodes.UpsertPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mls-x", Name: "w", Labels: map[string]string{mlsysopsv1.LabelApp: app.Name, mlsysopsv1.LabelComponent: "worker"}},
		Spec:       corev1.PodSpec{NodeName: "b"},
	})
	r.assumed.mu.Lock()
	view = r.assumed.usage(nodes, app.Name, "third", time.Now())
	_, stillWorker := r.assumed.entries[app.Name+"/worker"]
	r.assumed.mu.Unlock()
	if q := view.List("b")[corev1.ResourceCPU]; !q.IsZero() || stillWorker {
		t.Errorf("after the pod shows: b has %s assumed (entry kept: %v), want nothing", q.String(), stillWorker)
	}
	// Too old, an assumption goes.
	r.assumed.mu.Lock()
	view = r.assumed.usage(nodes, app.Name, "third", time.Now().Add(2*assumeFor))
	left := len(r.assumed.entries)
	r.assumed.mu.Unlock()
	if q := view.List("a")[corev1.ResourceCPU]; !q.IsZero() || left != 0 {
		t.Errorf("after %v: a has %s assumed, %d entries left; want none", 2*assumeFor, q.String(), left)
	}
}

func TestAssumedSpreadsReplicas(t *testing.T) {
	var a assumed
	a.add("a", "c", []string{"x", "y"}, 3, placement.PodRequests(&demoApp().Spec.Components[0]), time.Now())
	if got := a.entries["a/c"].perNode; !cmp.Equal(got, map[string]int32{"x": 2, "y": 1}) {
		t.Errorf("3 replicas on x, y: %v", got)
	}
	a.forget("a")
	if len(a.entries) != 0 {
		t.Errorf("entries after the application went: %v", a.entries)
	}
}

package continuum

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// karmadaCluster is a member as Karmada describes it, serving the
// MLSysOpsApp API unless noAPI.
func karmadaCluster(name string, noAPI bool, taints ...corev1.Taint) clusterv1alpha1.Cluster {
	c := clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1alpha1.ClusterSpec{Taints: taints}}
	if !noAPI {
		c.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: mlsysopsv1.SchemeGroupVersion.String(),
			Resources: []clusterv1alpha1.APIResource{{Name: "mlsysopsapps", Kind: "MLSysOpsApp"}}}}
	}
	return c
}

// appBinding is the ResourceBinding Karmada made for an application
// under the per-application policy of earlier versions, naming clusters
// (PlacedClusters reads them from its placement).
func appBinding(app string, clusters ...string) *workv1alpha2.ResourceBinding {
	return &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: BindingName(app), Namespace: mlsysopsv1.Namespace, Generation: 1},
		Spec: workv1alpha2.ResourceBindingSpec{
			SchedulerName: SchedulerName,
			Resource:      workv1alpha2.ObjectReference{APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: "MLSysOpsApp", Namespace: mlsysopsv1.Namespace, Name: app},
			Placement:     &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: clusters}},
		},
	}
}

func TestScheduleBinding(t *testing.T) {
	notReady := corev1.Taint{Key: "cluster.karmada.io/not-ready", Effect: corev1.TaintEffectNoSchedule}
	clusters := []clusterv1alpha1.Cluster{
		karmadaCluster("cloud-1", false), karmadaCluster("edge-1", false), karmadaCluster("far-1", true),
		karmadaCluster("down-1", false, notReady),
	}
	cases := map[string]struct {
		rb     *workv1alpha2.ResourceBinding
		want   []string
		whyHas string
		mutate func(*workv1alpha2.ResourceBinding)
	}{
		"the clusters named": {rb: appBinding("a", "edge-1", "cloud-1"), want: []string{"cloud-1", "edge-1"}},
		"a cluster without the API is left out": {
			rb: appBinding("a", "cloud-1", "far-1"), want: []string{"cloud-1"},
		},
		"an unknown cluster is left out": {rb: appBinding("a", "cloud-1", "gone-1"), want: []string{"cloud-1"}},
		"an untolerated taint keeps a new binding off": {
			rb: appBinding("a", "down-1"), whyHas: "down-1: untolerated taint",
		},
		"a tolerated taint does not": {
			rb: appBinding("a", "down-1"), want: []string{"down-1"},
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Spec.Placement.ClusterTolerations = []corev1.Toleration{{Key: notReady.Key, Operator: corev1.TolerationOpExists}}
			},
		},
		"a binding there already stays (the taint manager decides)": {
			rb: appBinding("a", "down-1"), want: []string{"down-1"},
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Spec.Clusters = []workv1alpha2.TargetCluster{{Name: "down-1"}}
			},
		},
		"a cluster evicting the binding is left out": {
			rb: appBinding("a", "cloud-1", "edge-1"), want: []string{"edge-1"},
			mutate: func(rb *workv1alpha2.ResourceBinding) {
				rb.Spec.GracefulEvictionTasks = []workv1alpha2.GracefulEvictionTask{{FromCluster: "cloud-1"}}
			},
		},
		"no cluster named": {rb: appBinding("a"), whyHas: "names no cluster"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if c.mutate != nil {
				c.mutate(c.rb)
			}
			names, _ := PlacedClusters(c.rb)
			got, why := scheduleBinding(c.rb, names, clusters)
			if diff := cmp.Diff(c.want, targetNamesOrNil(got)); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
			if c.whyHas == "" && why != "" || !strings.Contains(why, c.whyHas) {
				t.Errorf("why = %q, want it to say %q", why, c.whyHas)
			}
		})
	}
}

func targetNamesOrNil(ts []workv1alpha2.TargetCluster) []string {
	if len(ts) == 0 {
		return nil
	}
	return targetNames(ts)
}

// TestBindingSchedulerBinds: a binding of the continuum's scheduler gets
// the clusters of its placement, the applied placement Karmada's taint
// manager reads, and the Scheduled condition with its generation
// observed; a second pass writes nothing; a binding of karmada-scheduler,
// and one the continuum has not placed yet, are left alone; one that fits
// nowhere says why; one of an earlier version's per-application policy
// is bound to the clusters that policy names.
func TestBindingSchedulerBinds(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	theirs := appBinding("theirs", "cloud-1")
	theirs.Spec.SchedulerName = "default-scheduler"
	cloud, edge := karmadaCluster("cloud-1", false), karmadaCluster("edge-1", false)
	kc := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(binding("a", "edge-1", "cloud-1"), binding("nowhere", "far-1"), binding("unplaced"), appBinding("old", "edge-1"), theirs, &cloud, &edge).
		WithStatusSubresource(&workv1alpha2.ResourceBinding{}).Build()
	s := NewBindingScheduler(kc, quiet())
	ctx := context.Background()
	get := func(name string) *workv1alpha2.ResourceBinding {
		t.Helper()
		rb := &workv1alpha2.ResourceBinding{}
		if err := kc.Get(ctx, client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: BindingName(name)}, rb); err != nil {
			t.Fatal(err)
		}
		return rb
	}
	pass := func(name string) {
		t.Helper()
		if _, err := s.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: BindingName(name)}}); err != nil {
			t.Fatal(err)
		}
	}

	pass("a")
	rb := get("a")
	if diff := cmp.Diff([]string{"cloud-1", "edge-1"}, targetNames(rb.Spec.Clusters)); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	want, _ := json.Marshal(*rb.Spec.Placement)
	if rb.Annotations[appliedPlacement] != string(want) {
		t.Errorf("applied placement %q, want %q", rb.Annotations[appliedPlacement], want)
	}
	if !meta.IsStatusConditionTrue(rb.Status.Conditions, workv1alpha2.Scheduled) || rb.Status.SchedulerObservedGeneration != rb.Generation || rb.Status.LastScheduledTime == nil {
		t.Errorf("status %+v: want Scheduled, generation %d observed", rb.Status, rb.Generation)
	}
	version := rb.ResourceVersion
	pass("a")
	if again := get("a"); again.ResourceVersion != version {
		t.Error("a second pass over a scheduled binding wrote it again")
	}

	pass("theirs")
	if got := get("theirs"); len(got.Spec.Clusters) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("karmada-scheduler's binding was touched: %+v", got)
	}

	pass("unplaced")
	if got := get("unplaced"); len(got.Spec.Clusters) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("a binding not placed yet was bound: %+v", got)
	}

	pass("old")
	if got := get("old"); !cmp.Equal(targetNames(got.Spec.Clusters), []string{"edge-1"}) || got.Annotations[mlsysopsv1.AnnotationPlacement] != "edge-1" {
		t.Errorf("binding of an earlier version's policy: clusters %v, placement %q; want [edge-1] both",
			targetNames(got.Spec.Clusters), got.Annotations[mlsysopsv1.AnnotationPlacement])
	}

	pass("nowhere")
	got := get("nowhere")
	cond := meta.FindStatusCondition(got.Status.Conditions, workv1alpha2.Scheduled)
	if len(got.Spec.Clusters) != 0 || cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != workv1alpha2.BindingReasonNoClusterFit ||
		!strings.Contains(cond.Message, "far-1: no such cluster") {
		t.Errorf("binding that fits nowhere: clusters %v, condition %+v", got.Spec.Clusters, cond)
	}
}

// TestScheduledStatusPatch: the Scheduled condition is written beside
// what another writer set, never over it: a patch made from a copy that
// did not know of it fails instead. The patches are applied as the API
// server applies them (its JSON patch library) to the binding as stored:
// a new one has no status at all (the API server drops it at creation).
func TestScheduledStatusPatch(t *testing.T) {
	applied := metav1.Condition{Type: workv1alpha2.FullyApplied, Status: metav1.ConditionTrue, Reason: "FullyAppliedSuccess", LastTransitionTime: metav1.Now()}
	notYet := metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionFalse, Reason: workv1alpha2.BindingReasonNoClusterFit, LastTransitionTime: metav1.Now()}
	status := func(conds ...metav1.Condition) *workv1alpha2.ResourceBindingStatus {
		return &workv1alpha2.ResourceBindingStatus{Conditions: conds}
	}
	for _, c := range []struct {
		name           string
		server, before *workv1alpha2.ResourceBindingStatus // nil server: no status
		want           []string                            // condition type=status after
		fails          bool
	}{
		{"new binding", nil, status(), []string{"Scheduled=True"}, false},
		{"a status made meanwhile", status(applied), status(), []string{"FullyApplied=True"}, true},
		{"beside another writer's", status(applied), status(applied), []string{"FullyApplied=True", "Scheduled=True"}, false},
		{"in place", status(notYet, applied), status(notYet), []string{"Scheduled=True", "FullyApplied=True"}, false},
		{"no conditions yet", &workv1alpha2.ResourceBindingStatus{SchedulerObservedGeneration: 1}, &workv1alpha2.ResourceBindingStatus{SchedulerObservedGeneration: 1},
			[]string{"Scheduled=True"}, false},
		{"a copy without the other writer's", status(applied), &workv1alpha2.ResourceBindingStatus{SchedulerObservedGeneration: 1}, []string{"FullyApplied=True"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			stored := binding("a", "cloud-1")
			stored.Generation = 2
			doc := map[string]any{}
			raw, _ := json.Marshal(stored)
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			delete(doc, "status")
			if c.server != nil {
				doc["status"] = c.server
			}
			raw, _ = json.Marshal(doc)

			rb := stored.DeepCopy()
			rb.Status = *c.before.DeepCopy()
			meta.SetStatusCondition(&rb.Status.Conditions, metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: workv1alpha2.BindingReasonSuccess})
			now := metav1.Now()
			rb.Status.SchedulerObservedGeneration, rb.Status.LastScheduledTime = rb.Generation, &now
			patch, err := scheduledStatusPatch(c.before, rb, true)
			if err != nil {
				t.Fatal(err)
			}
			data, err := patch.Data(rb)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := jsonpatch.DecodePatch(data)
			if err != nil {
				t.Fatal(err)
			}
			out, err := ops.Apply(raw)
			if c.fails != (err != nil) {
				t.Fatalf("patch %s: %v, want it to fail: %v", data, err, c.fails)
			}
			if err != nil {
				return
			}
			got := &workv1alpha2.ResourceBinding{}
			if err := json.Unmarshal(out, got); err != nil {
				t.Fatal(err)
			}
			var have []string
			for _, cnd := range got.Status.Conditions {
				have = append(have, cnd.Type+"="+string(cnd.Status))
			}
			if diff := cmp.Diff(c.want, have); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got.Status.SchedulerObservedGeneration != 2 || got.Status.LastScheduledTime == nil {
				t.Errorf("scheduling fields not written: %+v", got.Status)
			}
		})
	}
}

// TestPlacementBindLeavesConditionToScheduler: the placement controller's
// bind writes the clusters and the placement but not the Scheduled
// condition, which the binding scheduler's pass (brought by that write)
// sets: one writer of the status, not two at once.
func TestPlacementBindLeavesConditionToScheduler(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cloud, edge := karmadaCluster("cloud-1", false), karmadaCluster("edge-1", false)
	kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(binding("a"), &cloud, &edge).
		WithStatusSubresource(&workv1alpha2.ResourceBinding{}).Build()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: BindingName("a")}
	rb := &workv1alpha2.ResourceBinding{}
	if err := kc.Get(ctx, key, rb); err != nil {
		t.Fatal(err)
	}
	wrote, _, err := bind(ctx, kc, quiet(), rb, []string{"edge-1", "cloud-1"}, []clusterv1alpha1.Cluster{cloud, edge})
	if err != nil || wrote == "" {
		t.Fatalf("bind = %q, %v; want a write", wrote, err)
	}
	got := &workv1alpha2.ResourceBinding{}
	if err := kc.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cloud-1", "edge-1"}, targetNames(got.Spec.Clusters)); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if got.Annotations[mlsysopsv1.AnnotationPlacement] != "cloud-1,edge-1" {
		t.Errorf("placement %q, want cloud-1,edge-1", got.Annotations[mlsysopsv1.AnnotationPlacement])
	}
	if len(got.Status.Conditions) != 0 || got.Status.SchedulerObservedGeneration != 0 {
		t.Errorf("the placement's bind wrote the status: %+v", got.Status)
	}
	if _, err := NewBindingScheduler(kc, quiet()).Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := kc.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, workv1alpha2.Scheduled) || got.Status.SchedulerObservedGeneration != got.Generation {
		t.Errorf("after the scheduler's pass: status %+v, want Scheduled with generation %d observed", got.Status, got.Generation)
	}
}

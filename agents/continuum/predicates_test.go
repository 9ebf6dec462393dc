package continuum

import (
	"testing"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// TestBindingEventsThatBringAPass: of a binding's updates, only those of
// the placement and of the members' reflected status bring its
// application a pass.
func TestBindingEventsThatBringAPass(t *testing.T) {
	base := func() *workv1alpha2.ResourceBinding {
		rb := &workv1alpha2.ResourceBinding{}
		rb.Name, rb.Namespace, rb.ResourceVersion = "a-mlsysopsapp", "mlsysops", "1"
		rb.Spec.Resource.Kind, rb.Spec.Resource.Name = "MLSysOpsApp", "a"
		rb.Status.AggregatedStatus = []workv1alpha2.AggregatedStatusItem{{
			ClusterName: "cloud", Status: &runtime.RawExtension{Raw: []byte(`{"phase":"Deploying"}`)}, Applied: true,
		}}
		return rb
	}
	cases := []struct {
		name   string
		change func(rb *workv1alpha2.ResourceBinding)
		want   bool
	}{
		{"nothing but the resourceVersion", func(rb *workv1alpha2.ResourceBinding) { rb.ResourceVersion = "2" }, false},
		{"clusters chosen", func(rb *workv1alpha2.ResourceBinding) {
			rb.Spec.Clusters = []workv1alpha2.TargetCluster{{Name: "cloud"}}
		}, false},
		{"the placement", func(rb *workv1alpha2.ResourceBinding) {
			rb.Annotations = map[string]string{mlsysopsv1.AnnotationPlacement: "cloud"}
		}, true},
		{"another annotation", func(rb *workv1alpha2.ResourceBinding) {
			rb.Annotations = map[string]string{appliedPlacement: "{}"}
		}, false},
		{"a condition", func(rb *workv1alpha2.ResourceBinding) {
			rb.Status.SchedulerObservedGeneration = 3
		}, false},
		{"a member's status", func(rb *workv1alpha2.ResourceBinding) {
			rb.Status.AggregatedStatus[0].Status = &runtime.RawExtension{Raw: []byte(`{"phase":"Running"}`)}
		}, true},
		{"a member added", func(rb *workv1alpha2.ResourceBinding) {
			rb.Status.AggregatedStatus = append(rb.Status.AggregatedStatus, workv1alpha2.AggregatedStatusItem{ClusterName: "edge"})
		}, true},
		{"a member's status gone", func(rb *workv1alpha2.ResourceBinding) { rb.Status.AggregatedStatus = nil }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, now := base(), base()
			c.change(now)
			if got := bindingRead.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: now}); got != c.want {
				t.Errorf("update passed = %v, want %v", got, c.want)
			}
		})
	}
	if !bindingRead.Create(event.CreateEvent{Object: base()}) || !bindingRead.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("a binding's creation or deletion brings no pass")
	}
}

// TestSchedulerEventsThatBringAPass: of a binding's updates, only those
// that change what it is bound to, or whether, bring the continuum's
// scheduler a pass.
func TestSchedulerEventsThatBringAPass(t *testing.T) {
	base := func() *workv1alpha2.ResourceBinding {
		rb := binding("a", "cloud")
		rb.ResourceVersion = "1"
		rb.Status.Conditions = []metav1.Condition{{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Message: "ok"}}
		return rb
	}
	cases := []struct {
		name   string
		change func(rb *workv1alpha2.ResourceBinding)
		want   bool
	}{
		{"nothing but the resourceVersion", func(rb *workv1alpha2.ResourceBinding) { rb.ResourceVersion = "2" }, false},
		{"a member's status", func(rb *workv1alpha2.ResourceBinding) {
			rb.Status.AggregatedStatus = []workv1alpha2.AggregatedStatusItem{{ClusterName: "cloud", Applied: true}}
		}, false},
		{"Karmada's own condition", func(rb *workv1alpha2.ResourceBinding) {
			rb.Status.Conditions = append(rb.Status.Conditions, metav1.Condition{Type: workv1alpha2.FullyApplied, Status: metav1.ConditionTrue})
		}, false},
		{"the spec (generation)", func(rb *workv1alpha2.ResourceBinding) { rb.Generation++ }, true},
		{"the placement", func(rb *workv1alpha2.ResourceBinding) { rb.Annotations[mlsysopsv1.AnnotationPlacement] = "edge" }, true},
		{"the Scheduled condition gone", func(rb *workv1alpha2.ResourceBinding) { rb.Status.Conditions = nil }, true},
		{"the Scheduled condition changed", func(rb *workv1alpha2.ResourceBinding) {
			rb.Status.Conditions[0].Status, rb.Status.Conditions[0].Message = metav1.ConditionFalse, "no cluster fits"
		}, true},
		{"deleted", func(rb *workv1alpha2.ResourceBinding) { now := metav1.Now(); rb.DeletionTimestamp = &now }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, now := base(), base()
			c.change(now)
			if got := schedulingChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: now}); got != c.want {
				t.Errorf("update passed = %v, want %v", got, c.want)
			}
		})
	}
}

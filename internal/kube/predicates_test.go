package kube

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestBeyondStatus(t *testing.T) {
	base := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: 1, ResourceVersion: "5",
		Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}, Finalizers: []string{"f"}}}
	now := metav1.Now()
	for _, c := range []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   bool
	}{
		{"status only", func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 1 }, false},
		{"resourceVersion and managed fields", func(d *appsv1.Deployment) {
			d.ResourceVersion = "6"
			d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
		}, false},
		{"spec", func(d *appsv1.Deployment) { d.Generation = 2 }, true},
		{"label", func(d *appsv1.Deployment) { d.Labels["a"] = "2" }, true},
		{"annotation added", func(d *appsv1.Deployment) { d.Annotations["c"] = "3" }, true},
		{"finalizer removed", func(d *appsv1.Deployment) { d.Finalizers = nil }, true},
		{"deletion", func(d *appsv1.Deployment) { d.DeletionTimestamp = &now }, true},
		{"owner", func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{{UID: "u"}} }, true},
	} {
		n := base.DeepCopy()
		c.change(n)
		if got := BeyondStatus.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != c.want {
			t.Errorf("%s: passed = %v, want %v", c.name, got, c.want)
		}
	}
	if !BeyondStatus.Create(event.CreateEvent{Object: base}) || !BeyondStatus.Delete(event.DeleteEvent{Object: base}) {
		t.Error("creation and deletion must pass")
	}
}

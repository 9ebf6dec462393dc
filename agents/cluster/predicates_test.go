package cluster

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestDeploymentEventsThatBringAPass: of a Deployment's updates, those of
// its spec, metadata and ready replicas bring its application a pass; the
// deployment controller's other status writes and its revision annotation
// do not.
func TestDeploymentEventsThatBringAPass(t *testing.T) {
	base := func() *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "worker", Namespace: "mls-demo", Generation: 1, ResourceVersion: "1",
			Labels: map[string]string{"app": "demo"}, Annotations: map[string]string{"a": "1"}}}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1}
		return d
	}
	now := metav1.Now()
	cases := []struct {
		name   string
		change func(d *appsv1.Deployment)
		want   bool
	}{
		{"resourceVersion only", func(d *appsv1.Deployment) { d.ResourceVersion = "2" }, false},
		{"progress written", func(d *appsv1.Deployment) {
			d.Status.UnavailableReplicas = 1
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetCreated"}}
		}, false},
		{"observed generation", func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 2 }, false},
		{"a replica ready", func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 1 }, true},
		{"spec changed", func(d *appsv1.Deployment) { d.Generation = 2 }, true},
		{"label changed", func(d *appsv1.Deployment) { d.Labels["app"] = "other" }, true},
		{"annotation added", func(d *appsv1.Deployment) { d.Annotations["b"] = "2" }, true},
		{"being deleted", func(d *appsv1.Deployment) { d.DeletionTimestamp = &now }, true},
		{"revision written", func(d *appsv1.Deployment) { d.Annotations[revisionAnnotation] = "1" }, false},
		{"revision and a plan written", func(d *appsv1.Deployment) {
			d.Annotations[revisionAnnotation] = "2"
			d.Annotations["b"] = "2"
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, cur := base(), base()
			c.change(cur)
			if got := deploymentRelevant.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != c.want {
				t.Errorf("update passed = %v, want %v", got, c.want)
			}
		})
	}
	if !deploymentRelevant.Create(event.CreateEvent{Object: base()}) || !deploymentRelevant.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("a Deployment's creation or deletion brings no pass")
	}
}

package cluster

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
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

// TestFinalizerEchoBringsNoPass: the update that only adds the agent's
// finalizer to an application (the echo of a pass's own write) brings no
// pass; one that adds it beside any other change, adds another
// finalizer, removes it, or deletes the application does.
func TestFinalizerEchoBringsNoPass(t *testing.T) {
	base := func() *mlsysopsv1.MLSysOpsApp {
		a := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: mlsysopsv1.Namespace, Generation: 1, ResourceVersion: "1",
			Labels: map[string]string{"a": "1"}}}
		a.Spec.Components = []mlsysopsv1.Component{{Metadata: mlsysopsv1.ComponentMetadata{Name: "c"}}}
		return a
	}
	withFinalizer := func() *mlsysopsv1.MLSysOpsApp {
		a := base()
		a.Finalizers = []string{mlsysopsv1.Finalizer}
		return a
	}
	now := metav1.Now()
	cases := []struct {
		name     string
		old, cur func() *mlsysopsv1.MLSysOpsApp
		change   func(a *mlsysopsv1.MLSysOpsApp)
		want     bool
	}{
		{"finalizer added", base, withFinalizer, func(a *mlsysopsv1.MLSysOpsApp) {
			a.ResourceVersion = "2"
			a.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "mlsysops-agent", Operation: metav1.ManagedFieldsOperationUpdate}}
		}, false},
		{"finalizer added with a label", base, withFinalizer, func(a *mlsysopsv1.MLSysOpsApp) { a.Labels["b"] = "2" }, true},
		{"finalizer added with a spec change", base, withFinalizer, func(a *mlsysopsv1.MLSysOpsApp) {
			a.Generation = 2
			a.Spec.Components[0].Metadata.Name = "d"
		}, true},
		{"finalizer added with a status", base, withFinalizer, func(a *mlsysopsv1.MLSysOpsApp) { a.Status.Phase = mlsysopsv1.AppRunning }, true},
		{"another finalizer added", base, base, func(a *mlsysopsv1.MLSysOpsApp) { a.Finalizers = []string{"example.org/other"} }, true},
		{"finalizer removed", withFinalizer, base, func(*mlsysopsv1.MLSysOpsApp) {}, true},
		{"being deleted", withFinalizer, withFinalizer, func(a *mlsysopsv1.MLSysOpsApp) { a.DeletionTimestamp = &now }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur := c.cur()
			c.change(cur)
			if got := notFinalizerAdded.Update(event.UpdateEvent{ObjectOld: c.old(), ObjectNew: cur}); got != c.want {
				t.Errorf("update passed = %v, want %v", got, c.want)
			}
		})
	}
	if !notFinalizerAdded.Create(event.CreateEvent{Object: base()}) || !notFinalizerAdded.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("an application's creation or deletion brings no pass")
	}
}

package kube

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestOwnStatus(t *testing.T) {
	own := NewOwnStatus(func(d *appsv1.Deployment) any { return d.Status.DeepCopy() })
	dep := func(rv string, ready int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", ResourceVersion: rv, Generation: 1},
			Status: appsv1.DeploymentStatus{ReadyReplicas: ready}}
	}
	update := func(from, to *appsv1.Deployment) bool {
		return own.Predicate().Update(event.UpdateEvent{ObjectOld: from, ObjectNew: to})
	}
	v1, v2, v3 := dep("1", 0), dep("2", 1), dep("3", 2)

	// Nothing written yet: every cached status is current, and status
	// changes pass (someone else's writes, or ours before a restart).
	if !own.Current(v1) || !update(v1, v2) {
		t.Fatal("with nothing written, the cache must be current and status changes must pass")
	}

	own.Wrote(v2)
	if own.Current(v1) {
		t.Error("a cache from before the last write counts as current")
	}
	if update(v1, v2) {
		t.Error("the echo of the last write passed")
	}
	if !own.Current(v2) {
		t.Error("a cache showing the last write is not current")
	}

	// Two writes in a row: the echo of the first is not the last write.
	own.Wrote(v3)
	if !update(v1, v2) {
		t.Error("the echo of an earlier write did not pass")
	}
	if update(v2, v3) || own.Current(v2) || !own.Current(v3) {
		t.Error("the last write's echo passed, or the cache's currency is wrong")
	}

	// Changes beyond the status always pass.
	spec := v3.DeepCopy()
	spec.Generation = 2
	if !update(v3, spec) {
		t.Error("a spec change did not pass")
	}
	// Another writer's status passes, and a cache showing it is not
	// current (the write that follows is under a lock) but not behind.
	other := dep("4", 7)
	if !update(v3, other) || own.Current(other) || own.Behind(other) {
		t.Error("another writer's status did not pass, counts as the last write, or as behind it")
	}
	// A cache older than the last write is behind it (a locked write
	// could only be refused); the write itself, and versions that do not
	// order, are not.
	if !own.Behind(v1) || !own.Behind(v2) || own.Behind(v3) {
		t.Errorf("behind: v1 %v, v2 %v, v3 %v; want true, true, false", own.Behind(v1), own.Behind(v2), own.Behind(v3))
	}
	if own.Behind(dep("opaque", 0)) {
		t.Error("a resourceVersion that does not order counts as behind")
	}

	own.Forget(client.ObjectKeyFromObject(v3))
	if own.Len() != 0 || !own.Current(v1) || !update(v1, v2) || own.Behind(v1) {
		t.Error("a forgotten object still has a recorded write")
	}
}

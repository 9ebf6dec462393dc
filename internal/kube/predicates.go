package kube

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// BeyondStatus passes an object's creation, deletion and generic events,
// and those of its updates that change more than its status: its spec
// (generation), labels, annotations, finalizers, owners or deletion. A
// controller that is the only writer of an object's status skips with it
// the echo of each status write it makes (a pass that would find nothing
// to do, one more per write in a burst).
var BeyondStatus = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, b := e.ObjectOld, e.ObjectNew
		if a == nil || b == nil {
			return true
		}
		return a.GetGeneration() != b.GetGeneration() ||
			!a.GetDeletionTimestamp().Equal(b.GetDeletionTimestamp()) ||
			!maps.Equal(a.GetLabels(), b.GetLabels()) ||
			!maps.Equal(a.GetAnnotations(), b.GetAnnotations()) ||
			!slices.Equal(a.GetFinalizers(), b.GetFinalizers()) ||
			!slices.EqualFunc(a.GetOwnerReferences(), b.GetOwnerReferences(), func(x, y metav1.OwnerReference) bool { return x.UID == y.UID })
	},
}

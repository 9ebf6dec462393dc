package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// EveryApp maps any event to a reconcile request for every MLSysOpsApp in
// namespace: for changes that concern all applications (a node, an agent).
func EveryApp(c client.Client, namespace string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(EveryAppRequest(c, namespace))
}

// EveryAppRequest returns a map function to a request for every
// MLSysOpsApp in namespace.
func EveryAppRequest(c client.Client, namespace string) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list mlsysopsv1.MLSysOpsAppList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, a := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}})
		}
		return out
	}
}

// Resyncer wakes a controller for changes it cannot watch; feed C to
// source.Channel with EveryApp.
type Resyncer struct{ C chan event.GenericEvent }

// NewResyncer returns a Resyncer whose pending wake-ups coalesce into one.
func NewResyncer() Resyncer { return Resyncer{C: make(chan event.GenericEvent, 1)} }

// Resync asks for a reconcile of every application soon.
func (r Resyncer) Resync() {
	select {
	case r.C <- event.GenericEvent{Object: &mlsysopsv1.MLSysOpsApp{}}:
	default: // one pending resync covers this one
	}
}

// ConditionStatus turns a bool into a condition status.
func ConditionStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

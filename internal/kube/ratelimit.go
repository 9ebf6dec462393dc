package kube

import (
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ItemRateLimiter is the requeue rate limiter of the agents' controllers:
// controller-runtime's per-item exponential backoff (5 ms doubling to
// 1,000 s) without its overall bucket of 10 requeues a second (burst 100).
// The bucket let a burst of applications that each failed a pass once (a
// webhook timing out, a namespace still terminating) wait behind each
// other, at ten a second, for a retry that concerns each alone; the
// per-item backoff still keeps a failing item from spinning.
func ItemRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.DefaultTypedItemBasedRateLimiter[reconcile.Request]()
}

package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// TestPassWaitsForTheCacheToShowItsDeployment: a pass that reads a cache
// not showing yet the Deployment an earlier pass made stops there rather
// than deciding the component's nodes again and creating it a second time
// (which fails, AlreadyExists, and was retried every few ms while the
// cache lagged); once the cache shows it, passes go on as before.
func TestPassWaitsForTheCacheToShowItsDeployment(t *testing.T) {
	ctx := context.Background()
	var hide atomic.Bool
	var creates atomic.Int64
	kc := newFakeWith(t, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if deps, ok := list.(*appsv1.DeploymentList); ok && hide.Load() {
				deps.Items = nil
			}
			return nil
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*appsv1.Deployment); ok && hide.Load() {
				return apierrors.NewNotFound(appsv1.Resource("deployments"), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*appsv1.Deployment); ok {
				creates.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
	}, demoApp(), node("n1", true), node("n2", true))
	r := NewAppReconciler(kc, "c1", quiet())
	r.FirstStatusDelay = 0
	// The placement index, fed by informers as in the agent.
	f := informers.NewSharedInformerFactory(kubefake.NewClientset(node("n1", true), node("n2", true)), 0)
	if err := r.feed.feed(f.Core().V1().Nodes().Informer(), f.Core().V1().Pods().Informer(), nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	defer f.Shutdown()
	defer close(stop)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: "demo"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if creates.Load() != 1 {
		t.Fatalf("first pass: %d Deployment creates, want 1", creates.Load())
	}
	first := r.Passes()["demo"]
	if first == "" {
		t.Fatal("the first pass is not recorded as done")
	}

	// The cache lags: the Deployment made is not listed.
	hide.Store(true)
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("pass behind the cache: %v, want no error (nothing failed)", err)
	}
	if creates.Load() != 1 {
		t.Errorf("pass behind the cache tried %d more creates, want none", creates.Load()-1)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Second {
		t.Errorf("pass behind the cache: requeue after %v, want a short wait in case no event comes", res.RequeueAfter)
	}

	// The cache shows it: passes act again, and do not create it again.
	hide.Store(false)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if creates.Load() != 1 {
		t.Errorf("%d creates after the cache caught up, want 1 in all", creates.Load())
	}
	if r.made.Len() != 0 {
		t.Errorf("%d Deployments still awaited after the cache showed them", r.made.Len())
	}

	// An application removed: nothing of it is awaited any more (one made
	// again under its name does not wait for the old Deployments).
	r.made.Expect(madeKey("mls-demo", "worker"))
	r.gone(ctx, "demo")
	if r.made.Len() != 0 {
		t.Errorf("%d Deployments of a removed application still awaited", r.made.Len())
	}
}

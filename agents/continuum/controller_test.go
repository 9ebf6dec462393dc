package continuum

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// TestReconcileMovesAppOffClusterReportedDown is a unit test of the
// placement decision on a fake Karmada API: a cluster named by the
// Unavailable hook (as the liveness tracking names a cluster whose agent
// is gone past its grace period) loses its applications to the other
// eligible cluster, and keeps nothing when it is back. That a real member
// cluster going away is noticed and leads here is tested with the real
// processes by TestMemberClusterStopped (test/integration/failover).
func TestReconcileMovesAppOffClusterReportedDown(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cloud, edge := karmadaCluster("cloud", false), karmadaCluster("edge", false)
	kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app("a"), binding("a"), &cloud, &edge).
		WithStatusSubresource(&mlsysopsv1.MLSysOpsApp{}, &workv1alpha2.ResourceBinding{}).Build()
	down := map[string]string{}
	r := NewAppReconciler(kc, fixedCapacity{cluster("cloud", true, false), cluster("edge", true, false)}, quiet())
	r.Unavailable = func() map[string]string { return down }
	ctx := context.Background()
	key := types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: "a"}
	pass := func(t *testing.T) (clusters []string, phase mlsysopsv1.AppPhase) {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		rb := &workv1alpha2.ResourceBinding{}
		if err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: BindingName("a")}, rb); err != nil {
			t.Fatal(err)
		}
		placed, _ := PlacedClusters(rb)
		if diff := cmp.Diff(placed, targetNames(rb.Spec.Clusters)); diff != "" {
			t.Errorf("bound elsewhere than placed (-placed +bound):\n%s", diff)
		}
		got := &mlsysopsv1.MLSysOpsApp{}
		if err := kc.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if r.LastPass("a") == "" {
			t.Error("the pass is not recorded")
		}
		return placed, got.Status.Phase
	}

	first, phase := pass(t)
	if len(first) != 1 || phase != mlsysopsv1.AppDeploying {
		t.Fatalf("first placement on %v, %s; want one cluster, Deploying", first, phase)
	}
	other := map[string]string{"cloud": "edge", "edge": "cloud"}[first[0]]

	down[first[0]] = "cluster agent gone"
	moved, phase := pass(t)
	if diff := cmp.Diff([]string{other}, moved); diff != "" || phase != mlsysopsv1.AppDeploying {
		t.Errorf("with %s down: placed on %v, %s; want [%s], Deploying (-want +got):\n%s", first[0], moved, phase, other, diff)
	}

	delete(down, first[0])
	kept, _ := pass(t)
	if diff := cmp.Diff([]string{other}, kept); diff != "" {
		t.Errorf("with %s back: placed on %v; want it left on %s", first[0], kept, other)
	}
	var pps policyv1alpha1.PropagationPolicyList
	if err := kc.List(ctx, &pps, client.InNamespace(mlsysopsv1.Namespace)); err != nil || len(pps.Items) != 0 {
		t.Errorf("%d PropagationPolicies (%v), want none: AppPropagation is every application's", len(pps.Items), err)
	}
}

// TestPassWaitsForItsBinding: an application Karmada has not bound yet is
// not placed (there is nowhere to record it); its status says why only
// after bindWait.
func TestPassWaitsForItsBinding(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	young, old := app("new"), app("old")
	young.CreationTimestamp = metav1.Now()
	old.CreationTimestamp = metav1.NewTime(time.Now().Add(-bindWait))
	kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(young, old).WithStatusSubresource(&mlsysopsv1.MLSysOpsApp{}).Build()
	r := NewAppReconciler(kc, fixedCapacity{cluster("cloud", true, false)}, quiet())
	ctx := context.Background()
	for _, name := range []string{"new", "old"} {
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}})
		if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > bindWait {
			t.Errorf("%s: pass = %+v, %v; want a retry within %s", name, res, err, bindWait)
		}
		if r.LastPass(name) != "" || r.assumed.Len() != 0 {
			t.Errorf("%s: a pass without a binding counts as done, or placed it", name)
		}
	}
	for name, want := range map[string]mlsysopsv1.AppPhase{"new": "", "old": mlsysopsv1.AppScheduling} {
		got := &mlsysopsv1.MLSysOpsApp{}
		if err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != want || (want != "" && !strings.Contains(got.Status.Message, AppPropagationPolicy)) {
			t.Errorf("%s: status %s %q, want phase %q naming the policy", name, got.Status.Phase, got.Status.Message, want)
		}
	}
}

// TestPassDoesNotPlaceOnAStaleBinding: a pass whose cache does not show
// the placement the previous pass wrote stops, and one that read a
// binding changed since (its write conflicts) is tried again without
// its decision: neither places the application a second time.
func TestPassDoesNotPlaceOnAStaleBinding(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	var stale *workv1alpha2.ResourceBinding
	cloud, edge := karmadaCluster("cloud", false), karmadaCluster("edge", false)
	kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app("a"), binding("a"), &cloud, &edge).
		WithStatusSubresource(&mlsysopsv1.MLSysOpsApp{}, &workv1alpha2.ResourceBinding{}).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if rb, ok := obj.(*workv1alpha2.ResourceBinding); ok && stale != nil {
				stale.DeepCopyInto(rb)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	r := NewAppReconciler(kc, fixedCapacity{cluster("cloud", true, false), cluster("edge", true, false)}, quiet())
	ctx := context.Background()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: "a"}}
	rbKey := types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: BindingName("a")}
	before := &workv1alpha2.ResourceBinding{}
	if err := kc.Get(ctx, rbKey, before); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	placed := &workv1alpha2.ResourceBinding{}
	if err := kc.Get(ctx, rbKey, placed); err != nil {
		t.Fatal(err)
	}
	first, ok := PlacedClusters(placed)
	if !ok || len(first) != 1 {
		t.Fatalf("first pass placed it on %v", first)
	}
	pass := r.LastPass("a")

	// The cache still shows the binding as it was before the placement.
	stale = before
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.Requeue || r.LastPass("a") != pass {
		t.Errorf("pass on a cache behind its placement = %+v, %v (last pass %s, was %s); want it stopped", res, err, r.LastPass("a"), pass)
	}
	// The same stale copy once the wait for it is over (another
	// controller's restart, say): the write conflicts, nothing is assumed.
	r.placed.Forget("a")
	res, err = r.Reconcile(ctx, req)
	if err != nil || !res.Requeue || r.assumed.Len() != 0 {
		t.Errorf("pass on a stale copy = %+v, %v, %d assumed; want a retry and nothing assumed", res, err, r.assumed.Len())
	}
	stale = nil
	now := &workv1alpha2.ResourceBinding{}
	if err := kc.Get(ctx, rbKey, now); err != nil {
		t.Fatal(err)
	}
	if got, _ := PlacedClusters(now); !cmp.Equal(got, first) || now.ResourceVersion != placed.ResourceVersion {
		t.Errorf("placement %v at %s after the stale passes, want %v at %s untouched", got, now.ResourceVersion, first, placed.ResourceVersion)
	}
	if _, err := r.Reconcile(ctx, req); err != nil || r.LastPass("a") == pass {
		t.Errorf("pass once the cache shows the placement: %v, last pass %s", err, r.LastPass("a"))
	}
}

// removals records the applications a reconciler reports removed.
type removals struct{ names []string }

func (r *removals) Update(context.Context, *mlsysopsv1.MLSysOpsApp) error { return nil }
func (r *removals) Removed(_ context.Context, name string) error {
	r.names = append(r.names, name)
	return nil
}

// TestAppMissingFromTheCacheIsNotRemoved: a pass for an application its
// cache does not show yet (its binding's event came first) does not
// report it removed while Karmada has it; one Karmada has not is.
func TestAppMissingFromTheCacheIsNotRemoved(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cached := fake.NewClientBuilder().WithScheme(scheme).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app("new")).Build()
	r := NewAppReconciler(cached, fixedCapacity{cluster("cloud", true, false)}, quiet())
	r.Live = live
	sink := &removals{}
	r.Status = sink
	for _, name := range []string{"new", "gone"} {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"gone"}, sink.names); diff != "" {
		t.Errorf("reported removed (-want +got):\n%s", diff)
	}
}

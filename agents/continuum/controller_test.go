package continuum

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
	kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app("a")).WithStatusSubresource(&mlsysopsv1.MLSysOpsApp{}).Build()
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
		pp := &policyv1alpha1.PropagationPolicy{}
		if err := kc.Get(ctx, key, pp); err != nil {
			t.Fatal(err)
		}
		got := &mlsysopsv1.MLSysOpsApp{}
		if err := kc.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if r.LastPass("a") == "" {
			t.Error("the pass is not recorded")
		}
		return pp.Spec.Placement.ClusterAffinity.ClusterNames, got.Status.Phase
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
	if err := kc.List(ctx, &pps, client.InNamespace(mlsysopsv1.Namespace)); err != nil || len(pps.Items) != 1 {
		t.Errorf("%d PropagationPolicies (%v), want 1", len(pps.Items), err)
	}
}

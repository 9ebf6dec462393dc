package continuum

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// TestWorksPlaceMoveUpdateRemove is a unit test of the placement
// controller writing Works (works.go) on a fake Karmada API: a new
// application gets one Work on the cluster it is placed on, carrying its
// copy as Karmada's binding controller would render it; it moves off a
// cluster reported down (the Work there deleted, one written on the
// other); a change of its spec rewrites its Work; its member status,
// reflected into the Work, makes it Running; its removal deletes its
// Works.
func TestWorksPlaceMoveUpdateRemove(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cloud, edge := karmadaCluster("cloud", false), karmadaCluster("edge", false)
	kc := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app("a"), &cloud, &edge).
		WithStatusSubresource(&mlsysopsv1.MLSysOpsApp{}, &workv1alpha1.Work{}).Build()
	down := map[string]string{}
	r := NewAppReconciler(kc, fixedCapacity{cluster("cloud", true, false), cluster("edge", true, false)}, quiet())
	r.Works = true
	r.Unavailable = func() map[string]string { return down }
	ctx := context.Background()
	key := types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: "a"}
	pass := func(t *testing.T) map[string]*workv1alpha1.Work {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		works, err := appWorks(ctx, kc, "a")
		if err != nil {
			t.Fatal(err)
		}
		return works
	}
	placed := func(works map[string]*workv1alpha1.Work) []string { return worksPlaced(works) }

	works := pass(t)
	if len(works) != 1 {
		t.Fatalf("first pass wrote Works on %v, want one cluster", placed(works))
	}
	first := placed(works)[0]
	w := works[first]
	if w.Namespace != "karmada-es-"+first || w.Name != WorkName("a") || len(w.Spec.Workload.Manifests) != 1 ||
		!slices.Equal(w.Finalizers, []string{"karmada.io/execution-controller"}) {
		t.Fatalf("Work %s/%s with %d manifests, finalizers %v; want one manifest and Karmada's execution finalizer",
			w.Namespace, w.Name, len(w.Spec.Workload.Manifests), w.Finalizers)
	}
	var copy map[string]any
	if err := json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &copy); err != nil {
		t.Fatal(err)
	}
	md := copy["metadata"].(map[string]any)
	ann := md["annotations"].(map[string]any)
	if copy["kind"] != "MLSysOpsApp" || md["name"] != "a" || md["namespace"] != mlsysopsv1.Namespace || copy["status"] != nil ||
		md["resourceVersion"] != nil || ann[workv1alpha2.WorkNameAnnotation] != WorkName("a") ||
		ann[workv1alpha2.WorkNamespaceAnnotation] != "karmada-es-"+first ||
		md["labels"].(map[string]any)[managedByKarmada] != "true" {
		t.Errorf("the copy is not rendered as Karmada would: %s", w.Spec.Workload.Manifests[0].Raw)
	}
	got := &mlsysopsv1.MLSysOpsApp{}
	if err := kc.Get(ctx, key, got); err != nil || got.Status.Phase != mlsysopsv1.AppDeploying {
		t.Fatalf("phase %s (%v), want Deploying", got.Status.Phase, err)
	}

	other := map[string]string{"cloud": "edge", "edge": "cloud"}[first]
	down[first] = "cluster agent gone"
	works = pass(t)
	if diff := cmp.Diff([]string{other}, placed(works)); diff != "" {
		t.Errorf("with %s down: Works on %v, want [%s]", first, placed(works), other)
	}
	delete(down, first)

	// The member reports the component ready: Karmada reflects it into
	// the Work.
	w = works[other]
	w.Status.ManifestStatuses = []workv1alpha1.ManifestStatus{{Status: &runtime.RawExtension{Raw: []byte(
		`{"phase":"Running","components":[{"name":"c","replicas":1,"readyReplicas":1}]}`)}}}
	if err := kc.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	pass(t)
	if err := kc.Get(ctx, key, got); err != nil || got.Status.Phase != mlsysopsv1.AppRunning {
		t.Errorf("phase %s %q (%v), want Running", got.Status.Phase, got.Status.Message, err)
	}

	before := works[other].Annotations[annotationWorkManifest]
	got.Spec.Components[0].Metadata.Name = "renamed"
	if err := kc.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	works = pass(t)
	if after := works[other].Annotations[annotationWorkManifest]; after == before || len(placed(works)) != 1 {
		t.Errorf("after a spec change: Works on %v, digest %s (was %s); want the Work on %s rewritten", placed(works), after, before, other)
	}

	if err := kc.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	// Karmada's execution controller lets them go once it has deleted
	// the copies in the members.
	if works = pass(t); len(works) != 2 || len(placed(works)) != 0 {
		t.Errorf("after the removal: %d Works, placing it on %v; want both being deleted", len(works), placed(works))
	}
}

// TestWorksWritten: a pass waits for the cache to show the Works the last
// one wrote, not longer than the ttl.
func TestWorksWritten(t *testing.T) {
	w := newWorksWritten(placedWriteTTL)
	if w.behind("a", nil) {
		t.Error("behind with nothing written")
	}
	w.wrote("a", []string{"edge", "cloud"})
	if !w.behind("a", nil) || !w.behind("a", []string{"cloud"}) {
		t.Error("not behind while the cache shows fewer Works than written")
	}
	if w.behind("a", []string{"cloud", "edge"}) || w.behind("a", nil) {
		t.Error("still behind once the cache showed the Works written")
	}
	w = newWorksWritten(0)
	w.wrote("a", []string{"cloud"})
	if w.behind("a", nil) {
		t.Error("behind past the ttl")
	}
}

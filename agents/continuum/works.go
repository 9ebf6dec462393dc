package continuum

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Propagation through Works: the continuum agent writes the Karmada Work
// of each cluster it places an application on itself, instead of binding
// the ResourceBinding Karmada's detector makes of the application to a
// PropagationPolicy and letting Karmada's binding controller write the
// Works. Karmada's execution controller still applies each Work in its
// member, its work-status controller still reflects the member copy's
// status into the Work (AppInterpretation), where the placement
// controller reads it; a cluster that fails is left as with the bindings
// (the placement moves the application, and the failed cluster's Work is
// deleted, its copy there once the cluster is back). What goes is the
// detector's claim of the application, the binding, its scheduling and
// its aggregated status: some 15 writes per application in Karmada that
// only carried what the continuum had decided (docs/performance.md).

const (
	// LabelWorkApp names, on a Work the continuum agent wrote, the
	// application whose copy it carries (the namespace is
	// mlsysopsv1.Namespace).
	LabelWorkApp = mlsysopsv1.LabelPrefix + "app"
	// annotationWorkManifest is the digest of the manifest the continuum
	// rendered for a Work: Karmada's webhook adds its own labels to the
	// manifest, so the manifest itself cannot be compared.
	annotationWorkManifest = mlsysopsv1.LabelPrefix + "manifest-digest"
)

// WorkName is the name of the Work of an application in each execution
// namespace.
func WorkName(app string) string { return BindingName(app) }

// executionSpacePrefix begins the name of the namespace of each member's
// Works in Karmada.
const executionSpacePrefix = "karmada-es-"

func executionSpace(cluster string) string { return executionSpacePrefix + cluster }

// appWorks lists the Works of application app the cache shows, by cluster.
func appWorks(ctx context.Context, c client.Reader, app string) (map[string]*workv1alpha1.Work, error) {
	var list workv1alpha1.WorkList
	if err := c.List(ctx, &list, client.MatchingLabels{LabelWorkApp: app}); err != nil {
		return nil, fmt.Errorf("works of %s: %w", app, err)
	}
	out := make(map[string]*workv1alpha1.Work, len(list.Items))
	for i := range list.Items {
		w := &list.Items[i]
		cluster, ok := strings.CutPrefix(w.Namespace, executionSpacePrefix)
		if !ok || w.Name != WorkName(app) {
			continue
		}
		out[cluster] = w
	}
	return out, nil
}

// worksPlaced returns the clusters the Works place the application on,
// sorted: those not being deleted.
func worksPlaced(works map[string]*workv1alpha1.Work) []string {
	var out []string
	for c, w := range works {
		if w.DeletionTimestamp.IsZero() {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// appManifest renders the member copy of app as Karmada's binding
// controller would (its CreateOrUpdateWork): the object's name,
// namespace, labels, annotations and spec, marked as Karmada's and naming
// its Work, with the labels and annotations it manages recorded (its
// retention keeps the member's others). digest is that of the rendering.
func appManifest(app *mlsysopsv1.MLSysOpsApp, cluster string) (raw []byte, digest string, err error) {
	labels := maps.Clone(app.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[managedByKarmada] = "true"
	annotations := maps.Clone(app.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(annotations, corev1.LastAppliedConfigAnnotation)
	annotations[workv1alpha2.ResourceTemplateUIDAnnotation] = string(app.UID)
	annotations[workv1alpha2.WorkNameAnnotation] = WorkName(app.Name)
	annotations[workv1alpha2.WorkNamespaceAnnotation] = executionSpace(cluster)
	annotations[workv1alpha2.ResourceConflictResolutionAnnotation] = workv1alpha2.ResourceConflictResolutionOverwrite
	annotations[workv1alpha2.ManagedLabels] = strings.Join(slices.Sorted(maps.Keys(labels)), ",")
	keys := append(slices.Collect(maps.Keys(annotations)), workv1alpha2.ManagedAnnotation)
	annotations[workv1alpha2.ManagedAnnotation] = strings.Join(slices.Sorted(slices.Values(keys)), ",")
	copy := struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              mlsysopsv1.MLSysOpsAppSpec `json:"spec"`
	}{
		TypeMeta:   metav1.TypeMeta{APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: "MLSysOpsApp"},
		ObjectMeta: metav1.ObjectMeta{Name: app.Name, Namespace: app.Namespace, Labels: labels, Annotations: annotations},
		Spec:       app.Spec,
	}
	if raw, err = json.Marshal(copy); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw)
	return raw, hex.EncodeToString(sum[:12]), nil
}

// executionFinalizer is the finalizer a Work's writer gives it in Karmada:
// its execution controller removes it once it has deleted the Work's
// objects in the member.
const executionFinalizer = "karmada.io/execution-controller"

// managedByKarmada is the label Karmada puts on what it propagates.
const managedByKarmada = "karmada.io/managed"

// applyWorks makes the application's Works those of clusters: each
// written (created, or updated when the application changed since), the
// others deleted. works is what the cache showed. wrote reports whether
// anything was written.
func applyWorks(ctx context.Context, c client.Client, app *mlsysopsv1.MLSysOpsApp, works map[string]*workv1alpha1.Work, clusters []string) (wrote bool, err error) {
	for _, cl := range clusters {
		raw, digest, err := appManifest(app, cl)
		if err != nil {
			return wrote, fmt.Errorf("render the copy of %s for %s: %w", app.Name, cl, err)
		}
		w, ok := works[cl]
		switch {
		case ok && !w.DeletionTimestamp.IsZero():
			// Its removal has to end before the cluster takes the
			// application again; the deletion's event brings a pass.
			continue
		case ok && w.Annotations[annotationWorkManifest] == digest:
			continue
		}
		manifests := []workv1alpha1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}
		if !ok {
			w = &workv1alpha1.Work{
				ObjectMeta: metav1.ObjectMeta{
					Name: WorkName(app.Name), Namespace: executionSpace(cl),
					Labels:      map[string]string{LabelWorkApp: app.Name},
					Annotations: map[string]string{annotationWorkManifest: digest},
					// Karmada's execution controller deletes the member
					// copy before it lets the Work go.
					Finalizers: []string{executionFinalizer},
				},
				Spec: workv1alpha1.WorkSpec{Workload: workv1alpha1.WorkloadTemplate{Manifests: manifests}},
			}
			if err := c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
				return wrote, fmt.Errorf("work of %s for %s: %w", app.Name, cl, err)
			}
			wrote = true
			continue
		}
		w = w.DeepCopy()
		if w.Annotations == nil {
			w.Annotations = map[string]string{}
		}
		w.Annotations[annotationWorkManifest] = digest
		w.Spec.Workload.Manifests = manifests
		if err := c.Update(ctx, w); err != nil {
			return wrote, fmt.Errorf("work of %s for %s: %w", app.Name, cl, err)
		}
		wrote = true
	}
	for cl, w := range works {
		if slices.Contains(clusters, cl) || !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
			return wrote, fmt.Errorf("remove %s from %s: %w", app.Name, cl, err)
		}
		wrote = true
	}
	return wrote, nil
}

// deleteWorks removes every Work of application app the cache shows.
func deleteWorks(ctx context.Context, c client.Client, app string) error {
	works, err := appWorks(ctx, c, app)
	if err != nil {
		return err
	}
	for cl, w := range works {
		if !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove %s from %s: %w", app, cl, err)
		}
	}
	return nil
}

// worksStatus returns, per cluster, the member copy's status Karmada
// reflected into the application's Works.
func worksStatus(works map[string]*workv1alpha1.Work) map[string]*runtime.RawExtension {
	out := map[string]*runtime.RawExtension{}
	for cl, w := range works {
		if st := reflectedStatus(w); st != nil {
			out[cl] = st
		}
	}
	return out
}

// reflectedStatus is the member copy's status Karmada reflected into
// Work w (it carries one manifest), nil before any.
func reflectedStatus(w *workv1alpha1.Work) *runtime.RawExtension {
	for _, ms := range w.Status.ManifestStatuses {
		if ms.Status != nil {
			return ms.Status
		}
	}
	return nil
}

// worksWritten holds, per application, the clusters of the Works a pass
// wrote until the cache shows them (or ttl passes): a pass on the older
// copy would place the application again.
type worksWritten struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[string]worksWrite
}

type worksWrite struct {
	clusters []string
	at       time.Time
}

func newWorksWritten(ttl time.Duration) *worksWritten {
	return &worksWritten{ttl: ttl, m: map[string]worksWrite{}}
}

func (w *worksWritten) wrote(app string, clusters []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[app] = worksWrite{clusters: slices.Compact(slices.Sorted(slices.Values(clusters))), at: time.Now()}
}

// behind reports whether the cache's Works (their clusters, current,
// sorted) are older than the last written.
func (w *worksWritten) behind(app string, current []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := w.m[app]
	if !ok {
		return false
	}
	if slices.Equal(rec.clusters, current) || time.Since(rec.at) > w.ttl {
		delete(w.m, app)
		return false
	}
	return true
}

func (w *worksWritten) forget(app string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, app)
}

// byWork maps a Work the continuum wrote to its application.
var byWork = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
	app := o.GetLabels()[LabelWorkApp]
	if app == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app}}}
})

// workRead passes a Work's creation, deletion and the updates that change
// what the reconciler reads of it: its manifest's digest, its removal
// and the member's status reflected into it.
var workRead = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*workv1alpha1.Work)
		b, okB := e.ObjectNew.(*workv1alpha1.Work)
		if !okA || !okB {
			return true
		}
		return a.Annotations[annotationWorkManifest] != b.Annotations[annotationWorkManifest] ||
			a.DeletionTimestamp.IsZero() != b.DeletionTimestamp.IsZero() ||
			!equality.Semantic.DeepEqual(reflectedStatus(a), reflectedStatus(b))
	},
}

// sweepWorks deletes the Works whose application is gone from Karmada (a
// removal while the agent was down, whose pass never came). The Works are
// read from the cache before the applications are listed live: an
// application that had a Work is listed unless it is gone.
func (r *AppReconciler) sweepWorks(ctx context.Context, reader client.Reader) error {
	var works workv1alpha1.WorkList
	if err := r.client.List(ctx, &works, client.HasLabels{LabelWorkApp}); err != nil {
		return fmt.Errorf("list works: %w", err)
	}
	if len(works.Items) == 0 {
		return nil
	}
	exists, err := appNames(ctx, reader)
	if err != nil {
		return err
	}
	for i := range works.Items {
		w := &works.Items[i]
		app := w.Labels[LabelWorkApp]
		if exists[app] || !w.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.client.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove work %s/%s of removed application %s: %w", w.Namespace, w.Name, app, err)
		}
		r.log.Info("work of an application gone from Karmada removed", "app", app, "work", w.Namespace+"/"+w.Name)
	}
	return nil
}

// Placement reads where application app is placed, whichever the
// propagation: the Works the continuum wrote for it (those not being
// deleted) or, when it wrote none, the application's ResourceBinding.
// found is false when neither is in Karmada; a Work being deleted counts
// as found (its copy may still be in its member).
func Placement(ctx context.Context, c client.Reader, app string) (clusters []string, found bool, err error) {
	works, err := appWorks(ctx, c, app)
	if err != nil {
		return nil, false, err
	}
	if len(works) > 0 {
		return worksPlaced(works), true, nil
	}
	rb := &workv1alpha2.ResourceBinding{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: BindingName(app)}, rb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read the binding of %s: %w", app, err)
	}
	clusters, _ = PlacedClusters(rb)
	return clusters, true, nil
}

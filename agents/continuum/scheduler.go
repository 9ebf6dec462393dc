package continuum

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
)

// SchedulerName is the Karmada scheduler name of the applications'
// propagation policy (AppPropagation): their ResourceBindings are
// scheduled by the continuum agent, not by karmada-scheduler.
//
// The placement controller chooses the clusters and records them on the
// binding (AnnotationPlacement), so karmada-scheduler has nothing left to
// decide; and it schedules one binding at a time, with two API writes
// each, and under load that queue was most of an application's way to
// Running: a burst of 50 waited 26 to 31 s (p50) between its
// ResourceBinding and its clusters, on a machine at a load of 20
// (sidebyside benchmark's steps). The continuum binds many at once.
const SchedulerName = "mlsysops-continuum"

// BindingScheduler is the Karmada scheduler of the continuum agent's
// bindings (SchedulerName): it sets each binding's clusters to those its
// placement names (PlacedClusters), as karmada-scheduler does for a
// policy of cluster names with duplicated replicas, and with its filters:
// a cluster must exist, serve the MLSysOpsApp API, not be evicting the
// binding and tolerate the binding's taints unless the binding is there
// already (karmada-scheduler's APIEnablement, ClusterEviction and
// TaintToleration). It records the applied placement (which Karmada's
// taint manager reads) and the Scheduled condition with the observed
// generation, as karmada-scheduler does, and records no events. The
// placement controller binds a binding itself when it places it (bind);
// this scheduler binds again when a cluster changes what fits.
type BindingScheduler struct {
	client client.Client
	log    *slog.Logger
}

// NewBindingScheduler returns the scheduler on the Karmada API.
func NewBindingScheduler(c client.Client, log *slog.Logger) *BindingScheduler {
	return &BindingScheduler{client: c, log: log}
}

// ours passes the bindings of this scheduler, in the application namespace.
var ours = predicate.NewPredicateFuncs(func(o client.Object) bool {
	rb, ok := o.(*workv1alpha2.ResourceBinding)
	return ok && rb.Namespace == mlsysopsv1.Namespace && rb.Spec.SchedulerName == SchedulerName
})

// SetupWithManager registers the scheduler: it watches its bindings and
// the clusters (a taint, or the API appearing, changes what fits).
func (s *BindingScheduler) SetupWithManager(mgr ctrl.Manager) error {
	everyBinding := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list workv1alpha2.ResourceBindingList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
			s.log.Warn("list resource bindings after a cluster change", "err", err)
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if list.Items[i].Spec.SchedulerName == SchedulerName {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&workv1alpha2.ResourceBinding{}, builder.WithPredicates(ours, schedulingChanged)).
		Watches(&clusterv1alpha1.Cluster{}, everyBinding, builder.WithPredicates(clusterSchedulable)).
		Named("continuum-binding-scheduler").
		// Each binding is two API writes, independent of the others'.
		WithOptions(controller.Options{SkipNameValidation: ptr(true), MaxConcurrentReconciles: 8, RateLimiter: kube.ItemRateLimiter()}).
		Complete(s)
}

// schedulingChanged passes a binding's creation, deletion and the updates
// that change what it is bound to or whether it is bound: its spec (the
// generation: clusters, placement, evictions), its placement annotation
// and its Scheduled condition. Karmada's status writes (the members'
// statuses, its own conditions; several per application) bring no pass.
var schedulingChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*workv1alpha2.ResourceBinding)
		b, okB := e.ObjectNew.(*workv1alpha2.ResourceBinding)
		if !okA || !okB {
			return true
		}
		scheduled := func(rb *workv1alpha2.ResourceBinding) *metav1.Condition {
			return meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
		}
		ca, cb := scheduled(a), scheduled(b)
		return a.Generation != b.Generation || !b.DeletionTimestamp.IsZero() ||
			a.Annotations[mlsysopsv1.AnnotationPlacement] != b.Annotations[mlsysopsv1.AnnotationPlacement] ||
			(ca == nil) != (cb == nil) || (ca != nil && (ca.Status != cb.Status || ca.Message != cb.Message))
	},
}

// clusterSchedulable passes the cluster events that change where a
// binding may go: creation, deletion, taints and the API's presence.
var clusterSchedulable = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*clusterv1alpha1.Cluster)
		b, okB := e.ObjectNew.(*clusterv1alpha1.Cluster)
		if !okA || !okB {
			return true
		}
		return !equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) || HasAppAPI(a) != HasAppAPI(b)
	},
}

// Reconcile schedules one binding.
func (s *BindingScheduler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rb := &workv1alpha2.ResourceBinding{}
	if err := s.client.Get(ctx, req.NamespacedName, rb); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	names, placed := PlacedClusters(rb)
	if !rb.DeletionTimestamp.IsZero() || rb.Spec.SchedulerName != SchedulerName || !placed {
		// Not placed yet: the placement controller binds it.
		return reconcile.Result{}, nil
	}
	var clusters clusterv1alpha1.ClusterList
	if err := s.client.List(ctx, &clusters); err != nil {
		return reconcile.Result{}, err
	}
	_, why, err := bind(ctx, s.client, s.log, rb, names, clusters.Items)
	if err == nil {
		err = markScheduled(ctx, s.client, rb, why)
	}
	if err != nil {
		if apierrors.IsConflict(err) {
			// The binding changed since the cache's copy, maybe by a
			// write that brings no pass (a status): again, on a newer
			// copy.
			return reconcile.Result{Requeue: true}, nil
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// PlacedClusters returns the clusters an application's binding places it
// on: its AnnotationPlacement or, for a binding of the per-application
// policy earlier versions wrote, the clusters that policy names. placed
// is false while the continuum agent has not placed the application.
func PlacedClusters(rb *workv1alpha2.ResourceBinding) (clusters []string, placed bool) {
	if v, ok := rb.Annotations[mlsysopsv1.AnnotationPlacement]; ok {
		if v == "" {
			return nil, true
		}
		return strings.Split(v, ","), true
	}
	if p := rb.Spec.Placement; p != nil && p.ClusterAffinity != nil && len(p.ClusterAffinity.ClusterNames) > 0 {
		return slices.Sorted(slices.Values(p.ClusterAffinity.ClusterNames)), true
	}
	return nil, false
}

// PlacementOf reads the clusters application app is placed on from its
// binding: none before Karmada bound it or the continuum placed it.
func PlacementOf(ctx context.Context, c client.Reader, app string) ([]string, error) {
	rb := &workv1alpha2.ResourceBinding{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: BindingName(app)}, rb); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the binding of %s: %w", app, err)
	}
	clusters, _ := PlacedClusters(rb)
	return clusters, nil
}

// bind places binding rb on clusters names: it records names as the
// placement and sets the binding's clusters to those of them that fit
// (scheduleBinding), in one write conditional on rb's resourceVersion
// (a conflict when the binding changed since rb was read). rb is updated
// to what was written; wrote is the resourceVersion of the write, ""
// when the placement and clusters were already so; why says why no
// cluster of names fits, if none does. The Scheduled condition is the
// binding scheduler's to write (markScheduled).
func bind(ctx context.Context, c client.Client, log *slog.Logger, rb *workv1alpha2.ResourceBinding, names []string, clusters []clusterv1alpha1.Cluster) (wrote, why string, err error) {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	record := strings.Join(names, ",")
	targets, why := scheduleBinding(rb, names, clusters)
	var applied []byte
	if rb.Spec.Placement != nil {
		if applied, err = json.Marshal(*rb.Spec.Placement); err != nil {
			return "", why, err
		}
	}
	if !slices.Equal(targetNames(rb.Spec.Clusters), targetNames(targets)) || rb.Annotations[appliedPlacement] != string(applied) ||
		rb.Annotations[mlsysopsv1.AnnotationPlacement] != record {
		before := rb.DeepCopy()
		if rb.Annotations == nil {
			rb.Annotations = map[string]string{}
		}
		rb.Annotations[mlsysopsv1.AnnotationPlacement] = record
		rb.Annotations[appliedPlacement] = string(applied)
		rb.Spec.Clusters = targets
		// The patch returns the binding as written: its generation is
		// the one markScheduled then observes (karmada-scheduler takes a
		// second pass for that).
		if err := c.Patch(ctx, rb, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return "", why, fmt.Errorf("schedule %s: %w", rb.Name, err)
		}
		wrote = rb.ResourceVersion
		if why == "" {
			log.Info("binding scheduled", "binding", rb.Name, "clusters", targetNames(targets))
		} else {
			log.Warn("binding fits no cluster of its placement", "binding", rb.Name, "placement", names, "reason", why)
		}
	}
	return wrote, why, nil
}

// markScheduled sets binding rb's Scheduled condition (true, or false
// with why when no cluster fits) and, when scheduled, the generation
// observed and the scheduling time, as karmada-scheduler does.
func markScheduled(ctx context.Context, c client.Client, rb *workv1alpha2.ResourceBinding, why string) error {
	before := rb.DeepCopy()
	cond := metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: workv1alpha2.BindingReasonSuccess,
		Message: "Binding has been scheduled successfully."}
	if why != "" {
		cond = metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionFalse, Reason: workv1alpha2.BindingReasonNoClusterFit, Message: why}
	}
	changed := meta.SetStatusCondition(&rb.Status.Conditions, cond)
	observed := false
	if why == "" && rb.Status.SchedulerObservedGeneration != rb.Generation {
		now := metav1.Now()
		rb.Status.SchedulerObservedGeneration, rb.Status.LastScheduledTime = rb.Generation, &now
		changed, observed = true, true
	}
	if !changed {
		return nil
	}
	// Only the Scheduled condition and the scheduling fields are
	// written, guarded by what the patch replaces rather than by the
	// resourceVersion: Karmada's binding status controller writes the
	// binding's status at the same time (its aggregated status and
	// FullyApplied condition), and a lock on the whole object made the
	// two writers refuse each other's copies (1.2 to 1.6 of this patch
	// refused per application in bursts of 200). Should a guard fail
	// (the status changed under it, which the API server calls Invalid),
	// the pass is made again on a newer copy; any other refusal of the
	// patch, and it is written under the lock.
	patch, err := scheduledStatusPatch(&before.Status, rb, observed)
	if err != nil {
		return err
	}
	err = c.Status().Patch(ctx, rb, patch)
	if apierrors.IsInvalid(err) {
		// A guard failed: the status changed since rb was read. A lock on
		// that copy's resourceVersion would be refused too; the next pass
		// reads a newer one.
		return apierrors.NewConflict(workv1alpha2.Resource("resourcebindings"), rb.Name, err)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		// Any other refusal of the JSON patch: the write under the lock.
		err = c.Status().Patch(ctx, rb, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("schedule status of %s: %w", rb.Name, err)
	}
	return nil
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// scheduledStatusPatch returns the JSON patch that sets rb's Scheduled
// condition, as rb has it, in a status that was before, and, when
// observed, the generation and time it was scheduled at. The status is
// made if there was none and still is none; the condition replaces the
// one at its index if that still is Scheduled, is the whole list if there
// was none and still is none, or is appended (the continuum is the only
// writer of the Scheduled condition of the bindings it schedules): the
// patch fails rather than take back what another writer set.
func scheduledStatusPatch(before *workv1alpha2.ResourceBindingStatus, rb *workv1alpha2.ResourceBinding, observed bool) (client.Patch, error) {
	cond := meta.FindStatusCondition(rb.Status.Conditions, workv1alpha2.Scheduled)
	if cond == nil {
		return nil, fmt.Errorf("binding %s has no Scheduled condition to write", rb.Name)
	}
	var ops []jsonPatchOp
	if equality.Semantic.DeepEqual(*before, workv1alpha2.ResourceBindingStatus{}) {
		// A new binding has no status at all (the API server drops it
		// at creation): the patch makes it, if still none.
		st := map[string]any{"conditions": []metav1.Condition{*cond}}
		if observed {
			st["schedulerObservedGeneration"], st["lastScheduledTime"] = rb.Status.SchedulerObservedGeneration, rb.Status.LastScheduledTime
		}
		ops = []jsonPatchOp{{"test", "/status", nil}, {"add", "/status", st}}
	} else {
		switch i := slices.IndexFunc(before.Conditions, func(c metav1.Condition) bool { return c.Type == workv1alpha2.Scheduled }); {
		case i >= 0:
			at := fmt.Sprintf("/status/conditions/%d", i)
			ops = []jsonPatchOp{{"test", at + "/type", workv1alpha2.Scheduled}, {"replace", at, cond}}
		case len(before.Conditions) == 0:
			ops = []jsonPatchOp{{"test", "/status/conditions", nil}, {"add", "/status/conditions", []metav1.Condition{*cond}}}
		default:
			ops = []jsonPatchOp{{"add", "/status/conditions/-", cond}}
		}
		if observed {
			ops = append(ops, jsonPatchOp{"add", "/status/schedulerObservedGeneration", rb.Status.SchedulerObservedGeneration},
				jsonPatchOp{"add", "/status/lastScheduledTime", rb.Status.LastScheduledTime})
		}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// appliedPlacement is the annotation in which karmada-scheduler records
// the placement a binding was scheduled for; Karmada's taint manager
// reads its tolerations from it.
const appliedPlacement = "policy.karmada.io/applied-placement"

// scheduleBinding returns the clusters a binding goes to: those of names
// (sorted, without repeats) that exist, serve the MLSysOpsApp API, are not evicting
// it, and whose NoSchedule and NoExecute taints it tolerates (or that it
// is on already: Karmada's taint manager decides when it leaves those).
// why says why none fits when none does.
func scheduleBinding(rb *workv1alpha2.ResourceBinding, names []string, clusters []clusterv1alpha1.Cluster) (targets []workv1alpha2.TargetCluster, why string) {
	var tolerations []corev1.Toleration
	if rb.Spec.Placement != nil {
		tolerations = rb.Spec.Placement.ClusterTolerations
	}
	byName := map[string]*clusterv1alpha1.Cluster{}
	for i := range clusters {
		byName[clusters[i].Name] = &clusters[i]
	}
	untolerated := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	var reasons []string
	for _, name := range names {
		c := byName[name]
		switch {
		case c == nil:
			reasons = append(reasons, name+": no such cluster")
			continue
		case !HasAppAPI(c):
			reasons = append(reasons, name+": does not serve the MLSysOpsApp API")
			continue
		case rb.Spec.ClusterInGracefulEvictionTasks(name):
			reasons = append(reasons, name+": evicting the binding")
			continue
		}
		if !rb.Spec.TargetContains(name) {
			if t, bad := v1helper.FindMatchingUntoleratedTaint(c.Spec.Taints, tolerations, untolerated); bad {
				reasons = append(reasons, fmt.Sprintf("%s: untolerated taint {%s}", name, t.ToString()))
				continue
			}
		}
		targets = append(targets, workv1alpha2.TargetCluster{Name: name, Replicas: rb.Spec.Replicas})
	}
	if len(targets) == 0 {
		if len(reasons) == 0 {
			reasons = []string{"the placement names no cluster"}
		}
		return nil, fmt.Sprintf("0/%d clusters are available: %v", len(names), reasons)
	}
	return targets, ""
}

func targetNames(ts []workv1alpha2.TargetCluster) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

package continuum

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// SchedulerName is the Karmada scheduler name of the propagation policies
// the continuum agent writes: their ResourceBindings are scheduled by the
// continuum agent (BindingScheduler), not by karmada-scheduler.
//
// The placement controller has chosen the clusters already and the policy
// names exactly those, so karmada-scheduler has nothing left to decide;
// but it schedules one binding at a time, with two API writes each, and
// under load that queue was most of an application's way to Running: a
// burst of 50 waited 26 to 31 s (p50) between its ResourceBinding and its
// clusters, on a machine at a load of 20 (sidebyside benchmark's steps).
// The continuum's scheduler binds many at once.
const SchedulerName = "mlsysops-continuum"

// BindingScheduler is the Karmada scheduler of the continuum agent's
// propagation policies (SchedulerName): it sets each of their
// ResourceBindings' clusters to the clusters its placement names, as
// karmada-scheduler does for a policy of cluster names with duplicated
// replicas, and with its filters: a cluster must exist, serve the
// MLSysOpsApp API, not be evicting the binding and tolerate the binding's
// taints unless the binding is there already (karmada-scheduler's
// APIEnablement, ClusterEviction and TaintToleration). It records the
// applied placement (which Karmada's taint manager reads) and the
// Scheduled condition with the observed generation, as karmada-scheduler
// does, and records no events.
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
		For(&workv1alpha2.ResourceBinding{}, builder.WithPredicates(ours)).
		Watches(&clusterv1alpha1.Cluster{}, everyBinding, builder.WithPredicates(clusterSchedulable)).
		Named("continuum-binding-scheduler").
		// Each binding is two API writes, independent of the others'.
		WithOptions(controller.Options{SkipNameValidation: ptr(true), MaxConcurrentReconciles: 8, RateLimiter: kube.ItemRateLimiter()}).
		Complete(s)
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
	if !rb.DeletionTimestamp.IsZero() || rb.Spec.SchedulerName != SchedulerName || rb.Spec.Placement == nil {
		return reconcile.Result{}, nil
	}
	var clusters clusterv1alpha1.ClusterList
	if err := s.client.List(ctx, &clusters); err != nil {
		return reconcile.Result{}, err
	}
	targets, why := scheduleBinding(rb, clusters.Items)
	placement, err := json.Marshal(*rb.Spec.Placement)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !slices.Equal(targetNames(rb.Spec.Clusters), targetNames(targets)) || rb.Annotations[appliedPlacement] != string(placement) {
		before := rb.DeepCopy()
		if rb.Annotations == nil {
			rb.Annotations = map[string]string{}
		}
		rb.Annotations[appliedPlacement] = string(placement)
		rb.Spec.Clusters = targets
		// The patch returns the binding as written: its generation is
		// the one the status below observes (karmada-scheduler takes a
		// second pass for that).
		if err := s.client.Patch(ctx, rb, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, fmt.Errorf("schedule %s: %w", rb.Name, err)
		}
		if why == "" {
			s.log.Info("binding scheduled", "binding", rb.Name, "clusters", targetNames(targets))
		} else {
			s.log.Warn("binding fits no cluster of its placement", "binding", rb.Name, "reason", why)
		}
	}
	before := rb.DeepCopy()
	cond := metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionTrue, Reason: workv1alpha2.BindingReasonSuccess,
		Message: "Binding has been scheduled successfully."}
	if why != "" {
		cond = metav1.Condition{Type: workv1alpha2.Scheduled, Status: metav1.ConditionFalse, Reason: workv1alpha2.BindingReasonNoClusterFit, Message: why}
	}
	changed := meta.SetStatusCondition(&rb.Status.Conditions, cond)
	if why == "" && rb.Status.SchedulerObservedGeneration != rb.Generation {
		now := metav1.Now()
		rb.Status.SchedulerObservedGeneration, rb.Status.LastScheduledTime = rb.Generation, &now
		changed = true
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	if err := s.client.Status().Patch(ctx, rb, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("schedule status of %s: %w", rb.Name, err)
	}
	return reconcile.Result{}, nil
}

// appliedPlacement is the annotation in which karmada-scheduler records
// the placement a binding was scheduled for; Karmada's taint manager
// reads its tolerations from it.
const appliedPlacement = "policy.karmada.io/applied-placement"

// scheduleBinding returns the clusters a binding goes to: those its
// placement names that exist, serve the MLSysOpsApp API, are not evicting
// it, and whose NoSchedule and NoExecute taints it tolerates (or that it
// is on already: Karmada's taint manager decides when it leaves those).
// why says why none fits when none does.
func scheduleBinding(rb *workv1alpha2.ResourceBinding, clusters []clusterv1alpha1.Cluster) (targets []workv1alpha2.TargetCluster, why string) {
	var names []string
	if a := rb.Spec.Placement.ClusterAffinity; a != nil {
		names = append(names, a.ClusterNames...)
	}
	sort.Strings(names)
	byName := map[string]*clusterv1alpha1.Cluster{}
	for i := range clusters {
		byName[clusters[i].Name] = &clusters[i]
	}
	untolerated := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	var reasons []string
	for _, name := range slices.Compact(names) {
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
			if t, bad := v1helper.FindMatchingUntoleratedTaint(c.Spec.Taints, rb.Spec.Placement.ClusterTolerations, untolerated); bad {
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

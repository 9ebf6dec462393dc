package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// podNodeField indexes pods by the node they run on.
const podNodeField = "spec.nodeName"

// TargetsReconciler works out, node by node, the metrics endpoints of the
// running pods of managed components: the container ports named
// mlsysopsv1.MetricsPortName at the pod's IP. It is level-triggered per
// node: any change of a pod on a node recomputes that node's list.
type TargetsReconciler struct {
	client client.Client
	log    *slog.Logger
	// Changed receives each node's list whenever it is computed; nil
	// when nobody listens.
	Changed func(ctx context.Context, node string, targets []messaging.ScrapeTarget)
}

var _ reconcile.Reconciler = (*TargetsReconciler)(nil)

// NewTargetsReconciler returns a reconciler reading through c.
func NewTargetsReconciler(c client.Client, log *slog.Logger) *TargetsReconciler {
	return &TargetsReconciler{client: c, log: log}
}

// SetupWithManager indexes pods by node and watches the managed ones.
func (r *TargetsReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podNodeField, func(o client.Object) []string {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	byNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: p.Spec.NodeName}}}
	})
	managed := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[mlsysopsv1.LabelManagedBy] == mlsysopsv1.ManagedByValue
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("cluster-scrape-targets").
		Watches(&corev1.Pod{}, byNode, builder.WithPredicates(managed)).
		// Several cluster layers may run in one process (tests), as with
		// cluster-fluidity.
		WithOptions(controller.Options{SkipNameValidation: ptr(true)}).
		Complete(r)
}

// Reconcile computes one node's targets.
func (r *TargetsReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// The cache's own objects, read only: a copy of every pod of the node
	// at each change of one of them was most of this controller's work.
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.MatchingFields{podNodeField: req.Name},
		client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("pods of node %s: %w", req.Name, err)
	}
	targets := ScrapeTargets(pods.Items)
	if r.Changed != nil {
		r.Changed(ctx, req.Name, targets)
	}
	return reconcile.Result{}, nil
}

// ScrapeTargets returns the metrics endpoints of the pods, sorted: one per
// container port named mlsysopsv1.MetricsPortName of each pod of a managed
// component that runs, has an IP and is not being deleted (a pod that
// goes away is not scraped during its grace period: it is not the
// component any more).
func ScrapeTargets(pods []corev1.Pod) []messaging.ScrapeTarget {
	var out []messaging.ScrapeTarget
	for i := range pods {
		p := &pods[i]
		app, comp := p.Labels[mlsysopsv1.LabelApp], p.Labels[mlsysopsv1.LabelComponent]
		if app == "" || comp == "" || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning || !p.DeletionTimestamp.IsZero() {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, port := range c.Ports {
				if !strings.EqualFold(port.Name, mlsysopsv1.MetricsPortName) || port.ContainerPort == 0 {
					continue
				}
				out = append(out, messaging.ScrapeTarget{
					Application: app, Component: comp, Pod: p.Name,
					Address: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort))),
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pod != out[j].Pod {
			return out[i].Pod < out[j].Pod
		}
		return out[i].Address < out[j].Address
	})
	return out
}

// setTargets is the targets reconciler's Changed hook: the node agent is
// told its list when it changed since it was last told.
func (c *clusterLayer) setTargets(ctx context.Context, node string, targets []messaging.ScrapeTarget) {
	c.mu.Lock()
	r, ok := c.nodes[node]
	if !ok {
		c.mu.Unlock()
		return // not a node this cluster manages: no agent to tell
	}
	if r.targetsSent && slices.Equal(r.targets, targets) {
		c.mu.Unlock()
		return
	}
	r.targets, r.targetsSent = targets, true
	jid := r.jid
	c.mu.Unlock()
	c.sendTargets(ctx, node, jid, targets)
}

func (c *clusterLayer) sendTargets(ctx context.Context, node, jid string, targets []messaging.ScrapeTarget) {
	pods := make([]string, 0, len(targets))
	for _, t := range targets {
		pods = append(pods, t.Application+"/"+t.Component+"/"+t.Pod)
	}
	c.a.Log.Info("telling node its scrape targets", "node", node, "targets", len(targets), "pods", pods)
	if _, err := c.a.Msg.SendAsync(ctx, jid, &messaging.ScrapeTargets{Node: node, Targets: targets}); err != nil {
		c.a.Log.Warn("scrape targets not queued", "node", node, "err", err)
	}
}

// resendTargets tells a node agent that (re)registered its current list:
// a restarted agent starts with none.
func (c *clusterLayer) resendTargets(ctx context.Context, node string) {
	c.mu.Lock()
	r, ok := c.nodes[node]
	if !ok || len(r.targets) == 0 {
		c.mu.Unlock()
		return
	}
	targets, jid := slices.Clone(r.targets), r.jid
	c.mu.Unlock()
	c.sendTargets(ctx, node, jid, targets)
}

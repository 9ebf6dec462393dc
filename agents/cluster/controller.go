package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// AppReconciler realises the applications Karmada propagated to this
// cluster. It is level-triggered: each pass re-derives the wanted objects
// from the application, the nodes and what exists, so a restart neither
// duplicates nor loses a component, and existing pods are left alone.
//
// What fluidity plans change (the mechanism records a fluidity.Override on
// the component's Deployment) is honoured at every pass until the
// application changes the component or a pinned node stops fitting it.
type AppReconciler struct {
	client  client.Client
	cluster string
	log     *slog.Logger
	// Placed is told about every component placed on a node, so the node
	// agents can learn what runs on them; nil when nobody listens.
	// The component is as it now runs (with a change_spec plan's spec).
	Placed func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, component *mlsysopsv1.Component, nodes []string)
	// Updated is told when a component keeps its nodes but runs with
	// another spec (a change_spec plan, or the user's edit of the
	// application); nil when nobody listens.
	Updated func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, component *mlsysopsv1.Component, nodes []string)
	// Unavailable, when set, names nodes not to place on beyond what the
	// Kubernetes API says, with the reason (a node whose node agent is
	// gone). Components on them are moved like those of NotReady nodes.
	Unavailable func() map[string]string
	// AppSeen, when set, hears of every application of this cluster after
	// each pass over it, and AppGone of every application that leaves the
	// cluster; FeedEngine points them at the agent's MAPE engine.
	AppSeen func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp)
	AppGone func(ctx context.Context, name string)
	// PendingSettle is how long a component's pod may stay unschedulable
	// on the nodes chosen for it before those nodes count as full for it
	// and the component is placed again; set it before starting.
	PendingSettle time.Duration

	resync  kube.Resyncer
	assumed assumed
	// passes records what each successful pass read.
	passes *kube.Passes
}

var _ reconcile.Reconciler = (*AppReconciler)(nil)

// NewAppReconciler returns a reconciler for the member cluster named
// cluster.
func NewAppReconciler(c client.Client, cluster string, log *slog.Logger) *AppReconciler {
	return &AppReconciler{client: c, cluster: cluster, log: log, resync: kube.NewResyncer(), passes: kube.NewPasses(), PendingSettle: DefaultPendingSettle}
}

// SetupWithManager watches applications, the Deployments made for them
// and nodes (a node that fails or comes back may change placements).
func (r *AppReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		app := o.GetLabels()[mlsysopsv1.LabelApp]
		if app == "" || o.GetLabels()[mlsysopsv1.LabelManagedBy] != mlsysopsv1.ManagedByValue {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		// Applications live in one namespace; others are not ours.
		For(&mlsysopsv1.MLSysOpsApp{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == mlsysopsv1.Namespace
		}))).
		Watches(&appsv1.Deployment{}, byLabel).
		// Only node changes that matter to placement: a node's status is
		// rewritten every heartbeat, and each write would otherwise
		// reconcile every application.
		Watches(&corev1.Node{}, kube.EveryApp(mgr.GetClient(), mlsysopsv1.Namespace), builder.WithPredicates(placementRelevant)).
		// Resync reconciles every application on demand.
		WatchesRawSource(source.Channel(r.resync.C, kube.EveryApp(mgr.GetClient(), mlsysopsv1.Namespace))).
		Named("cluster-fluidity").
		// Few in flight: each chooses nodes from the cached free capacity,
		// which the pods of a placement in flight do not show yet; many
		// at once would crowd the same nodes.
		WithOptions(controller.Options{SkipNameValidation: ptr(true), MaxConcurrentReconciles: 4}).
		Complete(r)
}

// placementRelevant passes node events that can change a placement:
// creation, deletion, and updates of readiness, schedulability, taints,
// labels or allocatable resources.
var placementRelevant = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*corev1.Node)
		b, okB := e.ObjectNew.(*corev1.Node)
		if !okA || !okB {
			return true
		}
		return nodeReadyStatus(a) != nodeReadyStatus(b) ||
			a.Spec.Unschedulable != b.Spec.Unschedulable ||
			!equality.Semantic.DeepEqual(a.Spec.Taints, b.Spec.Taints) ||
			!equality.Semantic.DeepEqual(a.Labels, b.Labels) ||
			!equality.Semantic.DeepEqual(a.Status.Allocatable, b.Status.Allocatable)
	},
}

func nodeReadyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// Reconcile realises one application.
func (r *AppReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, err error) {
	log := r.log.With("app", req.Name, "cluster", r.cluster)
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := r.client.Get(ctx, req.NamespacedName, app); err != nil {
		if apierrors.IsNotFound(err) {
			r.gone(ctx, req.Name)
			r.passes.Forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		r.gone(ctx, app.Name)
		return r.remove(ctx, app, log)
	}
	if r.AppSeen != nil {
		defer r.AppSeen(ctx, app)
	}
	// The resourceVersion read now: a pass that adds the finalizer
	// below acts on the object it read.
	read := app.ResourceVersion
	defer func() {
		if err == nil {
			r.passes.Done(app.Name, read)
		}
	}()
	if controllerutil.AddFinalizer(app, mlsysopsv1.Finalizer) {
		if err := r.client.Update(ctx, app); err != nil {
			return reconcile.Result{}, err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace(app.Name)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.client, ns, func() error {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[mlsysopsv1.LabelApp] = app.Name
		ns.Labels[mlsysopsv1.LabelManagedBy] = mlsysopsv1.ManagedByValue
		return nil
	}); err != nil {
		return reconcile.Result{}, fmt.Errorf("namespace for %s: %w", app.Name, err)
	}

	nodes, err := listNodes(ctx, r.client)
	if err != nil {
		return reconcile.Result{}, err
	}
	existing := map[string]*appsv1.Deployment{}
	var deps appsv1.DeploymentList
	if err := r.client.List(ctx, &deps, client.InNamespace(ns.Name), client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return reconcile.Result{}, err
	}
	for i := range deps.Items {
		existing[deps.Items[i].Labels[mlsysopsv1.LabelComponent]] = &deps.Items[i]
	}

	statuses := map[string]*mlsysopsv1.ComponentStatus{}
	unschedulable := false
	requeue := time.Duration(0)
	for _, comp := range ordered(app.Spec.Components) {
		st := &mlsysopsv1.ComponentStatus{Name: comp.Metadata.Name, Cluster: r.cluster, Replicas: placement.Replicas(&app.Spec, comp)}
		statuses[comp.Metadata.Name] = st
		if waiting := notReady(comp.DependsOn, existing); len(waiting) > 0 {
			// depends_on orders the roll-out: dependents wait for ready
			// dependencies.
			st.Message = "waiting for " + strings.Join(waiting, ", ")
			requeue = 5 * time.Second
			continue
		}
		prev := existing[comp.Metadata.Name]
		ov, dropped := currentOverride(comp, prev, log)
		run := ov.Effective(comp)
		pods, err := r.componentPods(ctx, ns.Name, comp.Metadata.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		full, recheck := unschedulableOn(pods, prev, r.PendingSettle, time.Now())
		if recheck > 0 && (requeue == 0 || recheck < requeue) {
			requeue = recheck
		}
		chosen, why, unpinned := r.decide(app, run, prev, nodes, ov, full)
		if unpinned != "" {
			// The controller places the component as if no plan had.
			log.Info("placement override dropped", "component", comp.Metadata.Name, "plan", ov.Plan, "nodes", ov.Nodes, "reason", unpinned)
			dropped = fmt.Sprintf("%s: nodes %v dropped: %s", ov.Plan, ov.Nodes, unpinned)
			if ov.Nodes = nil; ov.Empty() {
				ov = nil
			}
		}
		if chosen == nil {
			st.Message = why
			unschedulable = true
			continue
		}
		objs, err := fluidity.Render(app, run, chosen, ov)
		if err != nil {
			st.Message = err.Error()
			unschedulable = true
			continue
		}
		if dropped != "" {
			objs.Deployment.Annotations[mlsysopsv1.AnnotationOverrideDropped] = dropped
		}
		if err := r.apply(ctx, objs); err != nil {
			return reconcile.Result{}, err
		}
		switch running, before := runningOn(objs.Deployment), runningOn(prev); {
		case prev == nil || !slices.Equal(running, before):
			if len(full) > 0 && len(before) > 0 {
				// Every node of the earlier placement has the same reason.
				log.Info("component placed again: kube-scheduler found its nodes full", "component", comp.Metadata.Name, "from", before, "nodes", running, "reason", full[before[0]])
			} else {
				log.Info("component placed", "component", comp.Metadata.Name, "nodes", running)
			}
			if r.Placed != nil {
				r.Placed(ctx, app, run, running)
			}
		case len(running) > 0 && prev.Annotations[mlsysopsv1.AnnotationSpecHash] != objs.Deployment.Annotations[mlsysopsv1.AnnotationSpecHash]:
			log.Info("component updated", "component", comp.Metadata.Name, "nodes", running)
			if r.Updated != nil {
				r.Updated(ctx, app, run, running)
			}
		}
		st.Replicas = *objs.Deployment.Spec.Replicas
		if prev != nil {
			st.ReadyReplicas = prev.Status.ReadyReplicas
		}
		if ov != nil {
			st.Message = overrideMessage(ov)
		}
		if st.Nodes = podNodes(pods); len(st.Nodes) == 0 {
			st.Nodes = runningOn(objs.Deployment)
		}
	}
	if err := r.prune(ctx, ns.Name, app); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeStatus(ctx, app, statuses, unschedulable); err != nil {
		return reconcile.Result{}, err
	}
	if unschedulable && (requeue == 0 || requeue > 15*time.Second) {
		// Capacity may free up; try again.
		requeue = 15 * time.Second
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// decide chooses the nodes of a component as choose does, with the
// replicas assumed for other components counted on their nodes, and
// assumes the component's replicas on the nodes chosen when they change.
// Decisions are made one at a time, so concurrent reconciles each see
// the others'.
func (r *AppReconciler) decide(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, cur *appsv1.Deployment, nodes []placement.Node, ov *fluidity.Override, full map[string]string) (chosen []string, why, unpinned string) {
	r.assumed.mu.Lock()
	defer r.assumed.mu.Unlock()
	now := time.Now()
	chosen, why, unpinned = r.choose(app, comp, cur, r.assumed.onto(nodes, app.Name, comp.Metadata.Name, now), ov, full)
	if replicas := ov.Replicas(&app.Spec, comp); len(chosen) > 0 && replicas > 0 && !sameNodes(chosen, runningOn(cur)) {
		r.assumed.add(app.Name, comp.Metadata.Name, chosen, replicas, placement.PodRequests(comp), now)
	}
	return chosen, why, unpinned
}

// choose returns the nodes for a component (comp as it runs) or why there
// are none. A stopped component keeps its last nodes; nodes a plan pinned
// are kept while they fit the component, and unpinned says why not; other
// components keep their current nodes while these are Ready and still fit
// them, and are placed afresh otherwise. full names nodes kube-scheduler
// found full for the component, with its reason: they are avoided like
// nodes whose agent is gone.
func (r *AppReconciler) choose(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, cur *appsv1.Deployment, nodes []placement.Node, ov *fluidity.Override, full map[string]string) (chosen []string, why, unpinned string) {
	gone := maps.Clone(full)
	if gone == nil {
		gone = map[string]string{}
	}
	if r.Unavailable != nil {
		maps.Copy(gone, r.Unavailable())
	}
	exclude := maps.Clone(gone)
	if ov != nil && ov.Stopped && len(ov.Nodes) > 0 {
		return ov.Nodes, "", ""
	}
	if ov.Pinned() {
		if unpinned = pinProblem(app, comp, ov.Nodes, ov.Replicas(&app.Spec, comp), nodes, gone); unpinned == "" {
			return ov.Nodes, "", ""
		}
	}
	if cur != nil && cur.Annotations[mlsysopsv1.AnnotationNodes] != "" {
		prev := strings.Split(cur.Annotations[mlsysopsv1.AnnotationNodes], ",")
		// The component's own pods stay counted on their nodes; placing it
		// on the same nodes again must not need twice the room.
		own := withoutComponent(nodes, app.Name, comp.Metadata.Name)
		d, err := placement.PlaceComponent(placement.Request{App: &app.Spec, Component: comp}, restrict(own, prev))
		if err == nil && d.Feasible() && allReadyNodes(nodes, prev) && noneIn(prev, gone) {
			return prev, "", unpinned
		}
		for _, n := range prev {
			if !ready(nodes, n) {
				exclude[n] = "failed while hosting the component"
			}
		}
		nodes = own
	}
	d, err := placement.PlaceComponent(placement.Request{App: &app.Spec, Component: comp, Exclude: exclude}, nodes)
	if err != nil {
		return nil, err.Error(), unpinned
	}
	if !d.Feasible() {
		if len(d.Nodes) > 0 {
			// Run what fits; the message says what does not.
			return d.Nodes, "", unpinned
		}
		return nil, d.Reason(), unpinned
	}
	return d.Nodes, "", unpinned
}

// runningOn returns the nodes a component's Deployment runs it on: none
// when a plan removed it from all of them.
func runningOn(dep *appsv1.Deployment) []string {
	if dep == nil || dep.Annotations[mlsysopsv1.AnnotationNodes] == "" {
		return nil
	}
	if ov, _ := fluidity.ReadOverride(dep.Annotations); ov != nil && ov.Stopped {
		return nil
	}
	return strings.Split(dep.Annotations[mlsysopsv1.AnnotationNodes], ",")
}

// sameNodes reports whether a and b name the same nodes.
func sameNodes(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func (r *AppReconciler) gone(ctx context.Context, app string) {
	r.assumed.forget(app)
	if r.AppGone != nil {
		r.AppGone(ctx, app)
	}
}

// withoutComponent returns the nodes with the requests of a component's
// own pods removed.
func withoutComponent(nodes []placement.Node, app, comp string) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
		var mine []*corev1.Pod
		for _, p := range n.Pods {
			if p.Labels[mlsysopsv1.LabelApp] == app && p.Labels[mlsysopsv1.LabelComponent] == comp {
				mine = append(mine, p)
			}
		}
		if len(mine) == 0 {
			continue
		}
		// Subtracted rather than summed afresh: Requested may hold more
		// than the pods (replicas assumed for other components).
		own := corev1.ResourceList{}
		for _, p := range mine {
			placement.AddPodRequests(own, p)
		}
		req := corev1.ResourceList{}
		for name, q := range n.Requested {
			q = q.DeepCopy()
			q.Sub(own[name])
			req[name] = q
		}
		out[i].Requested = req
	}
	return out
}

func restrict(nodes []placement.Node, names []string) []placement.Node {
	var out []placement.Node
	for _, n := range nodes {
		for _, want := range names {
			if n.Name() == want {
				out = append(out, n)
			}
		}
	}
	return out
}

func ready(nodes []placement.Node, name string) bool {
	for _, n := range nodes {
		if n.Name() == name {
			for _, c := range n.Node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionTrue
				}
			}
		}
	}
	return false
}

func noneIn(names []string, set map[string]string) bool {
	for _, n := range names {
		if _, ok := set[n]; ok {
			return false
		}
	}
	return true
}

func allReadyNodes(nodes []placement.Node, names []string) bool {
	for _, n := range names {
		if !ready(nodes, n) {
			return false
		}
	}
	return true
}

// apply creates or updates the rendered objects.
func (r *AppReconciler) apply(ctx context.Context, objs fluidity.Objects) error {
	want := objs.Deployment
	th, err := fluidity.TemplateHash(&want.Spec.Template)
	if err != nil {
		return err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.client, dep, func() error {
		// Merge: the deployment controller keeps its revision annotation
		// here.
		dep.Labels = merge(dep.Labels, want.Labels)
		dep.Annotations = merge(dep.Annotations, want.Annotations)
		if _, ok := want.Annotations[mlsysopsv1.AnnotationOverride]; !ok {
			delete(dep.Annotations, mlsysopsv1.AnnotationOverride)
		}
		dep.Spec.Replicas = want.Spec.Replicas
		dep.Spec.Strategy = want.Spec.Strategy
		if dep.CreationTimestamp.IsZero() {
			dep.Spec.Selector = want.Spec.Selector
		}
		// The template as the API server defaulted it stays unless ours
		// changed: no write on a pass that changes nothing.
		if dep.CreationTimestamp.IsZero() || dep.Annotations[mlsysopsv1.AnnotationTemplateHash] != th {
			dep.Spec.Template = want.Spec.Template
		}
		dep.Annotations[mlsysopsv1.AnnotationTemplateHash] = th
		return nil
	}); err != nil {
		return fmt.Errorf("deployment %s/%s: %w", want.Namespace, want.Name, err)
	}
	if s := objs.Service; s != nil {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.client, svc, func() error {
			svc.Labels = merge(svc.Labels, s.Labels)
			svc.Spec.Selector = s.Spec.Selector
			svc.Spec.Type = s.Spec.Type
			// Keep allocated node ports across updates.
			for i := range s.Spec.Ports {
				for _, old := range svc.Spec.Ports {
					if old.Port == s.Spec.Ports[i].Port && old.Protocol == s.Spec.Ports[i].Protocol {
						s.Spec.Ports[i].NodePort = old.NodePort
					}
				}
			}
			svc.Spec.Ports = s.Spec.Ports
			return nil
		}); err != nil {
			return fmt.Errorf("service %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// prune deletes the Deployments and Services of components no longer in
// the application.
func (r *AppReconciler) prune(ctx context.Context, ns string, app *mlsysopsv1.MLSysOpsApp) error {
	keep := map[string]bool{}
	svcKeep := map[string]bool{}
	for i := range app.Spec.Components {
		keep[app.Spec.Components[i].Metadata.Name] = true
	}
	var deps appsv1.DeploymentList
	if err := r.client.List(ctx, &deps, client.InNamespace(ns), client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return err
	}
	for i := range deps.Items {
		if name := deps.Items[i].Labels[mlsysopsv1.LabelComponent]; !keep[name] {
			if err := r.client.Delete(ctx, &deps.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
			// The component left the application: it runs nowhere now.
			if r.Placed != nil {
				r.Placed(ctx, app, &mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: name}}, nil)
			}
		}
	}
	for i := range app.Spec.Components {
		comp := &app.Spec.Components[i]
		if objs, err := fluidity.Render(app, comp, []string{"x"}, nil); err == nil && objs.Service != nil {
			svcKeep[comp.Metadata.Name] = true
		}
	}
	var svcs corev1.ServiceList
	if err := r.client.List(ctx, &svcs, client.InNamespace(ns), client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return err
	}
	for i := range svcs.Items {
		if !svcKeep[svcs.Items[i].Labels[mlsysopsv1.LabelComponent]] {
			if err := r.client.Delete(ctx, &svcs.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// componentPods lists the pods of a component.
func (r *AppReconciler) componentPods(ctx context.Context, ns, comp string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{mlsysopsv1.LabelComponent: comp}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// podNodes returns the nodes pods run on, sorted.
func podNodes(pods []corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp.IsZero() && !seen[p.Spec.NodeName] {
			seen[p.Spec.NodeName] = true
			out = append(out, p.Spec.NodeName)
		}
	}
	sort.Strings(out)
	return out
}

func (r *AppReconciler) writeStatus(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, statuses map[string]*mlsysopsv1.ComponentStatus, unschedulable bool) error {
	var comps []mlsysopsv1.ComponentStatus
	allReady, stopped := true, 0
	for i := range app.Spec.Components {
		st := statuses[app.Spec.Components[i].Metadata.Name]
		comps = append(comps, *st)
		if st.Replicas == 0 {
			// A plan stopped it: it is where it was asked to be.
			stopped++
		}
		if st.ReadyReplicas < st.Replicas {
			allReady = false
		}
	}
	phase, msg := mlsysopsv1.AppDeploying, "components starting"
	switch {
	case unschedulable:
		phase, msg = mlsysopsv1.AppUnschedulable, "some components fit no node of "+r.cluster
	case stopped == len(comps) && stopped > 0:
		phase, msg = mlsysopsv1.AppDegraded, "every component stopped by a plan"
	case allReady && stopped > 0:
		phase, msg = mlsysopsv1.AppRunning, fmt.Sprintf("all components ready but %d stopped by a plan", stopped)
	case allReady:
		phase, msg = mlsysopsv1.AppRunning, "all components ready"
	case app.Status.Phase == mlsysopsv1.AppRunning || app.Status.Phase == mlsysopsv1.AppDegraded:
		phase, msg = mlsysopsv1.AppDegraded, "components lost ready replicas"
	}
	before := app.DeepCopy()
	patch := client.MergeFrom(before)
	app.Status.Components = comps
	app.Status.Phase, app.Status.Message = phase, msg
	app.Status.ObservedGeneration = app.Generation
	meta.SetStatusCondition(&app.Status.Conditions, metav1.Condition{
		Type: mlsysopsv1.ConditionReady, Status: kube.ConditionStatus(phase == mlsysopsv1.AppRunning), Reason: string(phase), Message: msg,
		ObservedGeneration: app.Generation,
	})
	if equality.Semantic.DeepEqual(before.Status, app.Status) {
		return nil // nothing to write
	}
	if err := r.client.Status().Patch(ctx, app, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("status of %s: %w", app.Name, err)
	}
	return nil
}

// remove deletes the application's namespace (and with it every object
// created for it), waits until it is gone, then lets the application go.
func (r *AppReconciler) remove(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, log *slog.Logger) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(app, mlsysopsv1.Finalizer) {
		return reconcile.Result{}, nil
	}
	ns := &corev1.Namespace{}
	err := r.client.Get(ctx, types.NamespacedName{Name: members.Namespace(app.Name)}, ns)
	switch {
	case err == nil:
		if ns.DeletionTimestamp.IsZero() {
			if err := r.client.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
			log.Info("removing application objects", "namespace", ns.Name)
		}
		return reconcile.Result{RequeueAfter: time.Second}, nil
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, err
	}
	controllerutil.RemoveFinalizer(app, mlsysopsv1.Finalizer)
	if err := r.client.Update(ctx, app); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	log.Info("application removed")
	return reconcile.Result{}, nil
}

// ordered sorts components so that each comes after what it depends on
// (validation guarantees there is no cycle; order is otherwise kept).
func ordered(comps []mlsysopsv1.Component) []*mlsysopsv1.Component {
	byName := map[string]*mlsysopsv1.Component{}
	for i := range comps {
		byName[comps[i].Metadata.Name] = &comps[i]
	}
	var out []*mlsysopsv1.Component
	done := map[string]bool{}
	var visit func(c *mlsysopsv1.Component, depth int)
	visit = func(c *mlsysopsv1.Component, depth int) {
		if done[c.Metadata.Name] || depth > len(comps) {
			return
		}
		for _, d := range c.DependsOn {
			if dep := byName[d]; dep != nil {
				visit(dep, depth+1)
			}
		}
		if !done[c.Metadata.Name] {
			done[c.Metadata.Name] = true
			out = append(out, c)
		}
	}
	for i := range comps {
		visit(&comps[i], 0)
	}
	return out
}

// notReady lists the dependencies whose Deployments are not fully ready.
func notReady(deps []string, existing map[string]*appsv1.Deployment) []string {
	var out []string
	for _, d := range deps {
		dep := existing[d]
		if dep == nil || dep.Spec.Replicas == nil || dep.Status.ReadyReplicas < *dep.Spec.Replicas {
			out = append(out, d)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// merge sets want's entries in have (allocating it if needed).
func merge(have, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range want {
		have[k] = v
	}
	return have
}

// Resync makes the controller reconcile every application soon, for
// changes it cannot watch (an agent gone or back, an Unavailable change).
func (r *AppReconciler) Resync() { r.resync.Resync() }

// Passes returns, per application, the resourceVersion its last
// successful reconcile read.
func (r *AppReconciler) Passes() map[string]string { return r.passes.Snapshot() }

// LastPass returns the resourceVersion the last successful reconcile of
// the application read, "" when none completed.
func (r *AppReconciler) LastPass(app string) string { return r.passes.Last(app) }

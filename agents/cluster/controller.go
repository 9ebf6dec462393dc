package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
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
	// StatusWritten is told of every status written in the member (the
	// application as written); nil when nobody listens.
	StatusWritten func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp)
	// Unavailable, when set, names nodes not to place on beyond what the
	// Kubernetes API says, with the reason (a node whose node agent is
	// gone). Components on them are moved like those of NotReady nodes.
	Unavailable func() map[string]string
	// AppSeen, when set, hears of every application of this cluster after
	// each pass over it, and AppGone of every application that leaves the
	// cluster; FeedEngine points them at the agent's MAPE engine.
	AppSeen func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp)
	AppGone func(ctx context.Context, name string)
	// FirstStatusDelay is how long an application's first status waits
	// while its components are starting (see writeStatus); set it before
	// starting.
	FirstStatusDelay time.Duration
	// PendingSettle is how long a component's pod may stay unschedulable
	// on the nodes chosen for it before those nodes count as full for it
	// and the component is placed again; set it before starting.
	PendingSettle time.Duration
	// Live reads what decides a removal from the API server, not the
	// cache: the namespace at removal (a namespace made a moment ago may
	// not be in the cache yet) and the application after a pass made its
	// namespace. The manager's API reader; the client when nil.
	Live client.Reader

	resync  kube.Resyncer
	assumed assumed
	// feed keeps the placement index of the cluster's nodes and pods.
	feed indexFeed
	// refused remembers the nodes found full for each component.
	refused refusals
	// passes records what each successful pass read.
	passes *kube.Passes
	// made holds the Deployments this controller created that its cache
	// has not shown yet (madeKey): a pass that reads the cache before it
	// does stops there, and their add event brings the next pass.
	made *kube.Expectations
	// firstStatus delays first statuses (FirstStatusDelay).
	firstStatus firstSeen
	// ownStatus is the status last written to each application.
	ownStatus *kube.OwnStatus[*mlsysopsv1.MLSysOpsApp]
}

var _ reconcile.Reconciler = (*AppReconciler)(nil)

// DefaultFirstStatusDelay is AppReconciler.FirstStatusDelay's default: on
// this machine a component's pod ran within a second of its Deployment
// alone, and within a few in a burst.
const DefaultFirstStatusDelay = 5 * time.Second

// PlacementWorkers is how many applications the controller handles at
// once.
const PlacementWorkers = 16

// NewAppReconciler returns a reconciler for the member cluster named
// cluster.
func NewAppReconciler(c client.Client, cluster string, log *slog.Logger) *AppReconciler {
	return &AppReconciler{client: c, cluster: cluster, log: log, resync: kube.NewResyncer(), passes: kube.NewPasses(), made: kube.NewExpectations(madeTTL), PendingSettle: DefaultPendingSettle,
		FirstStatusDelay: DefaultFirstStatusDelay,
		feed:             indexFeed{index: placement.NewIndex()},
		ownStatus:        kube.NewOwnStatus(func(a *mlsysopsv1.MLSysOpsApp) any { return a.Status.DeepCopy() })}
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
		// The agent writes the member copy's status: the echo of its
		// last status write brings no pass; nor does the echo of the
		// finalizer a pass adds.
		For(&mlsysopsv1.MLSysOpsApp{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == mlsysopsv1.Namespace
		}), r.ownStatus.Predicate(), notFinalizerAdded)).
		// Of a Deployment's status only the ready replicas are read: the
		// deployment controller's other status writes (several per roll-out)
		// bring no pass.
		Watches(&appsv1.Deployment{}, byLabel, builder.WithPredicates(deploymentRelevant)).
		// Only node changes that matter to placement: a node's status is
		// rewritten every heartbeat, and each write would otherwise
		// reconcile every application.
		Watches(&corev1.Node{}, kube.EveryApp(mgr.GetClient(), mlsysopsv1.Namespace), builder.WithPredicates(placementRelevant)).
		// Resync reconciles every application on demand.
		WatchesRawSource(source.Channel(r.resync.C, kube.EveryApp(mgr.GetClient(), mlsysopsv1.Namespace))).
		Named("cluster-fluidity").
		// Node decisions are made one at a time and see the placements
		// in flight through the assumed replicas (decide), so workers do
		// not crowd the same nodes; a new application's pass is three
		// API round trips (finalizer and namespace, the Deployments,
		// the status) that 4 workers made a queue of in a burst.
		WithOptions(controller.Options{SkipNameValidation: ptr(true), MaxConcurrentReconciles: PlacementWorkers, RateLimiter: kube.ItemRateLimiter()}).
		Complete(r)
}

// notFinalizerAdded passes every event but an update that only adds the
// agent's finalizer to an application: the echo of the write of a pass
// that acted on the application as it was before it, so a pass over it
// would find nothing to do (one pass less per new application).
var notFinalizerAdded = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*mlsysopsv1.MLSysOpsApp)
		b, okB := e.ObjectNew.(*mlsysopsv1.MLSysOpsApp)
		return !okA || !okB || !onlyFinalizerAdded(a, b)
	},
}

// onlyFinalizerAdded reports whether b is a with the agent's finalizer
// added and nothing else changed but the bookkeeping of a write (the
// resourceVersion and managed fields).
func onlyFinalizerAdded(a, b *mlsysopsv1.MLSysOpsApp) bool {
	if controllerutil.ContainsFinalizer(a, mlsysopsv1.Finalizer) || !controllerutil.ContainsFinalizer(b, mlsysopsv1.Finalizer) {
		return false
	}
	with := a.DeepCopy()
	controllerutil.AddFinalizer(with, mlsysopsv1.Finalizer)
	with.ResourceVersion, with.ManagedFields = b.ResourceVersion, b.ManagedFields
	return equality.Semantic.DeepEqual(with, b)
}

// deploymentRelevant passes a Deployment's creation, deletion, and the
// updates of its spec (generation), labels, annotations, deletion or
// ready replicas.
var deploymentRelevant = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*appsv1.Deployment)
		b, okB := e.ObjectNew.(*appsv1.Deployment)
		if !okA || !okB {
			return true
		}
		return a.Generation != b.Generation || a.Status.ReadyReplicas != b.Status.ReadyReplicas ||
			!a.DeletionTimestamp.Equal(b.DeletionTimestamp) ||
			!maps.Equal(a.Labels, b.Labels) || !equalBut(a.Annotations, b.Annotations, revisionAnnotation)
	},
}

// revisionAnnotation is the roll-out revision the deployment controller
// writes on each Deployment it takes up (a write after the creation that
// changes nothing the agent reads).
const revisionAnnotation = "deployment.kubernetes.io/revision"

// equalBut reports whether a and b hold the same entries but for key.
func equalBut(a, b map[string]string, key string) bool {
	return maps.Equal(withoutKey(a, key), withoutKey(b, key))
}

func withoutKey(m map[string]string, key string) map[string]string {
	if _, ok := m[key]; !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, key)
	return out
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
	// How long each stage of the pass took (debug log): where a new
	// application's first seconds go.
	stages := stageTimer{last: time.Now()}
	// behind is set when the cache lags this controller's own writes: the
	// pass stops without acting, so it is not recorded as done.
	behind := false
	defer func() {
		if err == nil && !behind {
			r.passes.Done(app.Name, read)
		}
		log.Debug("pass", append(stages.attrs(), "err", err)...)
	}()
	// The finalizer and the namespace are written at once: each is a
	// round trip to the API server before the components' Deployments,
	// which need only the namespace (one after the other, a burst's
	// pods waited for both). A removal in between is caught below: the
	// namespace made goes; one the finalizer's failure (a conflict)
	// leaves behind is swept (NamespaceSweeper). The update rewrites app:
	// until it returns, only name is read.
	name := app.Name
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace(name)}}
	finalized := make(chan error, 1)
	addsFinalizer := controllerutil.AddFinalizer(app, mlsysopsv1.Finalizer)
	if addsFinalizer {
		go func() { finalized <- r.client.Update(ctx, app) }()
	} else {
		finalized <- nil
	}
	op, err := kube.CreateOrUpdate(ctx, r.client, r.live(), ns, func() error {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[mlsysopsv1.LabelApp] = name
		ns.Labels[mlsysopsv1.LabelManagedBy] = mlsysopsv1.ManagedByValue
		return nil
	})
	if ferr := <-finalized; ferr != nil {
		return reconcile.Result{}, ferr
	}
	stages.mark("finalizer_namespace")
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("namespace for %s: %w", name, err)
	}
	if op == controllerutil.OperationResultCreated && !addsFinalizer {
		// The application was read from the cache: if it was removed
		// meanwhile, its removal may have found no namespace to delete.
		// Not so when this pass added the finalizer: the write succeeded,
		// so the application was there and not being deleted, and its
		// removal, a later pass (passes over one application do not
		// overlap), finds the namespace this one made.
		if gone, err := r.goneLive(ctx, req.NamespacedName); err != nil {
			return reconcile.Result{}, err
		} else if gone {
			log.Info("application removed while its namespace was made; deleting the namespace", "namespace", ns.Name)
			uid := ns.UID
			return reconcile.Result{}, client.IgnoreNotFound(r.client.Delete(ctx, ns, client.Preconditions{UID: &uid}))
		}
		stages.mark("live_check")
	}

	// Placement reads the index: wait until it holds every node and pod
	// (the first pass after a start).
	if !cache.WaitForCacheSync(ctx.Done(), r.feed.synced) {
		return reconcile.Result{}, ctx.Err()
	}
	nodes := r.feed.index
	existing := map[string]*appsv1.Deployment{}
	var deps appsv1.DeploymentList
	if err := r.client.List(ctx, &deps, client.InNamespace(ns.Name), client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return reconcile.Result{}, err
	}
	for i := range deps.Items {
		existing[deps.Items[i].Labels[mlsysopsv1.LabelComponent]] = &deps.Items[i]
	}
	for _, comp := range app.Spec.Components {
		key := madeKey(ns.Name, comp.Metadata.Name)
		if existing[comp.Metadata.Name] != nil {
			r.made.Seen(key)
		} else if r.made.Pending(key) {
			behind = true
		}
	}
	stages.mark("read")
	if behind {
		// A Deployment made a moment ago is not in the cache yet: its add
		// event brings the next pass; the requeue is in case it never
		// comes (deleted meanwhile).
		log.Debug("pass stopped: the cache has not shown a Deployment made before", "namespace", ns.Name)
		return reconcile.Result{RequeueAfter: time.Second}, nil
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
		full, recheck := unschedulableOn(pods, prev, nodes.Node, nodes.NodeNames, r.PendingSettle, time.Now())
		// Nodes found full for it before stay avoided for a while.
		full = r.refused.note(app.Name, comp.Metadata.Name, full, time.Now())
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
	stages.mark("components")
	if err := r.prune(ctx, ns.Name, app); err != nil {
		return reconcile.Result{}, err
	}
	stages.mark("prune")
	wait, err := r.writeStatus(ctx, app, statuses, unschedulable)
	if err != nil {
		return reconcile.Result{}, err
	}
	stages.mark("status")
	if wait > 0 && (requeue == 0 || wait < requeue) {
		requeue = wait
	}
	if unschedulable && (requeue == 0 || requeue > 15*time.Second) {
		// Capacity may free up; try again.
		requeue = 15 * time.Second
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// madeTTL is how long a Deployment this controller created is awaited in
// its cache (see AppReconciler.made).
const madeTTL = 30 * time.Second

// madeKey names a component's Deployment in AppReconciler.made.
func madeKey(namespace, component string) string { return namespace + "/" + component }

func (r *AppReconciler) gone(ctx context.Context, app string) {
	// An application made again under this name creates its Deployments
	// again: none of the old ones is awaited.
	r.made.ForgetPrefix(madeKey(members.Namespace(app), ""))
	r.assumed.forget(app)
	r.firstStatus.forget(app)
	r.refused.forget(app)
	r.ownStatus.Forget(types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app})
	if r.AppGone != nil {
		r.AppGone(ctx, app)
	}
}

// remove deletes the application's namespace (and with it every object
// created for it), waits until it is gone, then lets the application go.
func (r *AppReconciler) remove(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, log *slog.Logger) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(app, mlsysopsv1.Finalizer) {
		return reconcile.Result{}, nil
	}
	ns := &corev1.Namespace{}
	err := r.live().Get(ctx, types.NamespacedName{Name: members.Namespace(app.Name)}, ns)
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

func (r *AppReconciler) live() client.Reader {
	if r.Live != nil {
		return r.Live
	}
	return r.client
}

// goneLive tells whether the application is gone, asking the API server.
// One being deleted is not: its finalizer holds it until a pass has
// removed its namespace. One made again under the same name owns the
// namespace.
func (r *AppReconciler) goneLive(ctx context.Context, key types.NamespacedName) (bool, error) {
	err := r.live().Get(ctx, key, &mlsysopsv1.MLSysOpsApp{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
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

// stageTimer records how long each stage of a pass took, from the last
// mark (the pass's start at first).
type stageTimer struct {
	last time.Time
	took []any
}

func (t *stageTimer) mark(stage string) {
	now := time.Now()
	t.took = append(t.took, stage+"_ms", float64(now.Sub(t.last).Microseconds())/1000)
	t.last = now
}

func (t *stageTimer) attrs() []any { return t.took }

package continuum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// AppReconciler places each MLSysOpsApp of the Karmada API on member
// clusters. Karmada's detector binds every application to one
// PropagationPolicy (AppPropagation) as it sees it; the reconciler records
// the clusters it chose on the application's ResourceBinding
// (AnnotationPlacement, which goes when the application goes) and binds
// it there; Karmada propagates the application to them, where the cluster
// agents place its components on nodes.
//
// A placement is kept while its clusters stay Ready: the reconciler is
// level-triggered, so a restart re-derives everything from the objects and
// neither moves nor duplicates an application. Clusters a clusterPlacement
// plan chose (a ClusterPin on the application) are honoured while they
// hold.
type AppReconciler struct {
	client   client.Client
	capacity CapacitySource
	log      *slog.Logger
	// ownStatus is the status last written to each application.
	ownStatus *kube.OwnStatus[*mlsysopsv1.MLSysOpsApp]
	// Status, when set, receives every status the reconciler writes and
	// hears of removed applications (Redis, for the northbound API).
	Status StatusSink
	// Unavailable, when set, names clusters not to place on beyond what
	// Karmada says, with the reason (a cluster whose cluster agent has been
	// gone past its grace period). Applications there are re-placed.
	Unavailable func() map[string]string
	// AppSeen, when set, hears of every application after each pass over
	// it, and AppGone of every application deleted; FeedEngine points
	// them at the agent's MAPE engine.
	AppSeen func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp)
	AppGone func(ctx context.Context, name string)
	// SweepInterval is how often statuses of applications gone from
	// Karmada are swept while the agent runs (default DefaultSweepInterval):
	// a status written after its application's removal was reported (a
	// mirror of a stale read, a removal reported while Redis was down)
	// has no reconcile left to remove it.
	SweepInterval time.Duration
	// Orphans, when set, also deletes at each sweep the member copies
	// of applications gone from Karmada (see orphans.go).
	Orphans *OrphanSweeper
	// Reported, when set, holds the cluster agents' status reports
	// (MemberStatuses); set before SetupWithManager.
	Reported *MemberStatuses
	// Live, when set, reads Karmada past the cache: an application the
	// cache does not show is looked for there before it counts as
	// removed (its binding's creation, on another watch, can bring its
	// first pass before the application's own add event).
	Live client.Reader
	// Works, when set, has the reconciler write each placed cluster's
	// Work itself (works.go) instead of binding the application's
	// ResourceBinding; set before SetupWithManager.
	Works bool
	// placedWorks holds the clusters of the Works a pass wrote, until
	// the cache shows them.
	placedWorks *worksWritten

	resync kube.Resyncer
	// passes records what each successful pass read.
	passes *kube.Passes
	// placed holds the bindings' resourceVersions after the placements
	// written on them, until the cache shows them.
	placed *kube.Writes
	// retry is how soon an Unschedulable application is tried again.
	retry time.Duration
	// assumed holds the placements the capacity reports do not show yet;
	// it serialises the decisions, so each sees those before it.
	assumed *placement.Assumed
}

// PlacementWorkers is how many applications the placement controller
// handles at once.
const PlacementWorkers = 16

// placedWriteTTL bounds how long a pass waits for the cache to show the
// placement an earlier pass wrote on a binding.
const placedWriteTTL = 30 * time.Second

// bindWait is how long an application may wait for Karmada to bind it to
// AppPropagation before its status says so (the policy is missing, say).
// A burst queues Karmada's detector for minutes (500 applications on 10 x
// 1,000 nodes: half of them past 30 s), and the status write would add
// to its load.
const bindWait = 5 * time.Minute

// DefaultSweepInterval is AppReconciler.SweepInterval's default.
const DefaultSweepInterval = time.Minute

// AssumeTTL is how long a placement is counted against its clusters'
// reported capacity when its application is never seen running.
const AssumeTTL = 3 * time.Minute

var _ reconcile.Reconciler = (*AppReconciler)(nil)

// StatusSink mirrors application status somewhere else. Update is called
// on every reconcile, with the status unchanged or not, and must be cheap
// and idempotent.
type StatusSink interface {
	Update(ctx context.Context, app *mlsysopsv1.MLSysOpsApp) error
	Removed(ctx context.Context, name string) error
}

// StatusSweeper is a StatusSink that can forget the statuses of
// applications gone from Karmada, which no reconcile reports (deleted
// while the agent was down). exists lists the applications in Karmada;
// Sweep returns the ids it forgot.
type StatusSweeper interface {
	Sweep(ctx context.Context, exists func(context.Context) (map[string]bool, error)) ([]string, error)
}

// NewAppReconciler returns a reconciler on the Karmada API.
func NewAppReconciler(c client.Client, capacity CapacitySource, log *slog.Logger) *AppReconciler {
	return &AppReconciler{client: c, capacity: capacity, log: log, retry: 15 * time.Second, resync: kube.NewResyncer(),
		passes: kube.NewPasses(), placed: kube.NewWrites(placedWriteTTL), assumed: placement.NewAssumed(AssumeTTL),
		placedWorks: newWorksWritten(placedWriteTTL),
		ownStatus:   kube.NewOwnStatus(func(a *mlsysopsv1.MLSysOpsApp) any { return a.Status.DeepCopy() })}
}

// SetupWithManager registers the reconciler: it watches applications and
// their bindings.
func (r *AppReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A ResourceBinding carries the members' reflected status of the
	// application it binds.
	byBinding := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		rb, ok := o.(*workv1alpha2.ResourceBinding)
		if !ok || rb.Spec.Resource.Kind != "MLSysOpsApp" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rb.Spec.Resource.Namespace, Name: rb.Spec.Resource.Name}}}
	})
	// Once the caches have synced, statuses of applications deleted while
	// the agent was down are swept, and then every SweepInterval those
	// that a lost or late write left behind.
	err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		every := r.SweepInterval
		if every <= 0 {
			every = DefaultSweepInterval
		}
		for {
			r.sweep(ctx, mgr.GetAPIReader())
			if r.Works {
				if err := r.sweepWorks(ctx, mgr.GetAPIReader()); err != nil && ctx.Err() == nil {
					r.log.Warn("sweep of works of removed applications incomplete; next in a sweep interval", "err", err)
				}
			}
			if r.Orphans != nil {
				deleted, err := r.Orphans.Sweep(ctx)
				if err != nil && ctx.Err() == nil {
					r.log.Warn("sweep of member copies of removed applications incomplete; next in a sweep interval", "err", err, "deleted", deleted)
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(every):
			}
		}
	}))
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Reported != nil {
		// A cluster agent's status report brings a pass at once.
		b = b.WatchesRawSource(source.Channel(r.Reported.C, &handler.EnqueueRequestForObject{}))
	}
	if r.Works {
		b = b.Watches(&workv1alpha1.Work{}, byWork, builder.WithPredicates(workRead))
	} else {
		// Only the placement and the members' reflected status are read
		// from a binding: its other updates (the clusters bound,
		// conditions, Karmada's bookkeeping; several per application)
		// bring no pass.
		b = b.Watches(&workv1alpha2.ResourceBinding{}, byBinding, builder.WithPredicates(bindingRead))
	}
	return b.
		// Applications live in one namespace; others are not ours. The
		// agent writes their status: the echo of its last status write
		// brings no pass.
		For(&mlsysopsv1.MLSysOpsApp{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == mlsysopsv1.Namespace
		}), r.ownStatus.Predicate())).
		// A member that becomes Ready, or starts serving the MLSysOps API,
		// can take the applications that fit nowhere: they are tried at
		// once rather than at their next retry (the first application
		// after start-up used to wait for it).
		Watches(&clusterv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if inv, ok := r.capacity.(interface{ Invalidate() }); ok {
				inv.Invalidate()
			}
			return kube.EveryAppRequest(mgr.GetClient(), mlsysopsv1.Namespace)(ctx, o)
		}), builder.WithPredicates(clusterPlaceable)).
		// Resync reconciles every application on demand.
		WatchesRawSource(source.Channel(r.resync.C, kube.EveryApp(mgr.GetClient(), mlsysopsv1.Namespace))).
		Named("continuum-placement").
		// Tests run several managers in one process.
		// Decisions are serialised and see each other through the
		// assumed ledger, so more workers do not crowd one cluster; a
		// new application's pass is two API writes (its policy, its
		// status), so 4 workers placed a burst of 50 over 8 s (p50) at
		// a load of 20, ahead of everything Karmada and the members do.
		WithOptions(controller.Options{SkipNameValidation: ptr(true), MaxConcurrentReconciles: PlacementWorkers, RateLimiter: kube.ItemRateLimiter()}).
		Complete(r)
}

// Reconcile places one application and updates its status.
func (r *AppReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if errors.Is(err, errStatusBehind) {
		// The cache did not show the status last written: the echo of
		// that write brings no pass, so again once it has caught up.
		return reconcile.Result{RequeueAfter: kube.OwnStatusRetry}, nil
	}
	if apierrors.IsConflict(err) {
		// The application changed since the cache's copy (Karmada's
		// detector labels each new one): the newer copy's event brings
		// another pass at once. An error would requeue it behind the
		// rate limiter instead, which a burst of applications, each
		// labelled as it is placed, turned into seconds.
		r.log.Debug("application changed during its pass; the next pass takes it", "app", req.Name)
		return reconcile.Result{}, nil
	}
	return res, err
}

func (r *AppReconciler) reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	log := r.log.With("app", req.Name, "namespace", req.Namespace)
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := r.client.Get(ctx, req.NamespacedName, app); err != nil {
		if apierrors.IsNotFound(err) && r.Live != nil {
			if lerr := r.Live.Get(ctx, req.NamespacedName, &mlsysopsv1.MLSysOpsApp{}); lerr == nil {
				// Not in the cache yet: its add event brings the pass.
				return reconcile.Result{}, nil
			} else if !apierrors.IsNotFound(lerr) {
				return reconcile.Result{}, lerr
			}
		}
		if apierrors.IsNotFound(err) {
			if r.Works {
				if derr := deleteWorks(ctx, r.client, req.Name); derr != nil {
					return reconcile.Result{}, derr
				}
				r.placedWorks.forget(req.Name)
			}
			r.gone(ctx, req.Name)
			r.assumed.Forget(req.Name)
			r.passes.Forget(req.Name)
			r.placed.Forget(req.Name)
			r.Reported.Forget(req.Name)
			r.ownStatus.Forget(req.NamespacedName)
		}
		// Deleted: Karmada removes its binding, and the placement there.
		if apierrors.IsNotFound(err) && r.Status != nil {
			return reconcile.Result{}, r.Status.Removed(ctx, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		if r.Works {
			if err := deleteWorks(ctx, r.client, app.Name); err != nil {
				return reconcile.Result{}, err
			}
		}
		r.gone(ctx, app.Name)
		r.assumed.Forget(app.Name)
		return reconcile.Result{}, r.setPhase(ctx, app, mlsysopsv1.AppRemoving, "removing from its clusters")
	}
	if r.AppSeen != nil {
		defer r.AppSeen(ctx, app)
	}
	// The resourceVersion read now, not the one status writes leave.
	read := app.ResourceVersion
	waiting := false
	defer func() {
		if err == nil && !waiting && !res.Requeue {
			r.passes.Done(app.Name, read)
		}
	}()
	var (
		current   []string
		reflected map[string]*runtime.RawExtension
		apply     func([]string) error
	)
	if r.Works {
		works, err := appWorks(ctx, r.client, app.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		current = worksPlaced(works)
		if r.placedWorks.behind(app.Name, current) {
			// The cache does not show the Works a pass wrote a moment
			// ago yet; their events bring the next pass.
			waiting = true
			return reconcile.Result{}, nil
		}
		reflected = worksStatus(works)
		apply = func(clusters []string) error {
			wrote, err := applyWorks(ctx, r.client, app, works, clusters)
			if wrote {
				r.placedWorks.wrote(app.Name, clusters)
			}
			return err
		}
	} else {
		rb := &workv1alpha2.ResourceBinding{}
		err = r.client.Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: BindingName(app.Name)}, rb)
		if apierrors.IsNotFound(err) {
			// Karmada's detector binds every application to AppPropagation
			// as it sees it: the binding's creation brings the next pass.
			waiting = true
			if age := time.Since(app.CreationTimestamp.Time); age < bindWait {
				return reconcile.Result{RequeueAfter: bindWait - age}, nil
			}
			return reconcile.Result{RequeueAfter: bindWait}, r.setPhase(ctx, app, mlsysopsv1.AppScheduling, fmt.Sprintf(
				"waiting for Karmada to bind the application to PropagationPolicy %s/%s", mlsysopsv1.Namespace, AppPropagationPolicy))
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		if r.placed.Behind(app.Name, rb.ResourceVersion) {
			// The cache does not show the placement a pass wrote a moment
			// ago yet; its event brings the next pass.
			waiting = true
			return reconcile.Result{}, nil
		}
		current, _ = PlacedClusters(rb)
		reflected = bindingStatus(rb)
		apply = func(clusters []string) error { return r.applyPlacement(ctx, app, rb, clusters) }
	}

	clusters, err := r.capacity.Clusters(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	gone := map[string]string{}
	if r.Unavailable != nil {
		gone = r.Unavailable()
	}
	ready := map[string]bool{}
	for _, c := range clusters {
		_, down := gone[c.Name]
		ready[c.Name] = c.Ready && !down
	}
	pinned, err := r.pinned(ctx, app, clusters, gone, current, log)
	if err != nil {
		return reconcile.Result{}, err
	}
	if pinned != nil && !sameClusters(pinned, current) {
		// What the plan's clusters take is not simulated here: the
		// assumption ends with the move.
		r.assumed.Forget(app.Name)
		r.Reported.Forget(app.Name)
		if err := apply(pinned); err != nil {
			return placeFailed(err)
		}
		log.Info("application moved by plan", "from", current, "to", pinned)
		return reconcile.Result{}, r.setPlaced(ctx, app, pinned)
	}
	if len(current) > 0 && allReady(current, ready) && respects(app, current) {
		if r.Works {
			// The application may have changed since its Works were
			// written.
			if err := apply(current); err != nil {
				return placeFailed(err)
			}
		}
		comps := r.memberComponents(app, reflected, current)
		err = r.updateRunningPhase(ctx, app, current, comps)
		if app.Status.Phase == mlsysopsv1.AppRunning {
			// Its pods run: the clusters' next reports count them.
			r.assumed.Visible(app.Name)
		}
		return reconcile.Result{}, err
	}

	// Place (again): new application, or a cluster of its placement failed.
	exclude := map[string]string{}
	for c, why := range gone {
		exclude[c] = why
	}
	for _, c := range current {
		if !ready[c] {
			if _, ok := exclude[c]; !ok {
				exclude[c] = "failed while hosting the application"
			}
		}
	}
	// The decision is made in this pass, so the next status written is
	// its outcome (Deploying, Unschedulable or Failed): announcing
	// Scheduling first would cost every application one more write to
	// Karmada. (Submissions through the API are Scheduling in Redis from
	// the moment the intake hands them over.)
	d, err := r.place(app.Name, placement.AppRequest{App: &app.Spec, Exclude: exclude}, clusters)
	if err != nil {
		return reconcile.Result{}, r.setPhase(ctx, app, mlsysopsv1.AppFailed, err.Error())
	}
	if !d.Feasible() {
		log.Info("application fits no cluster", "reason", d.Reason())
		if err := r.setPhase(ctx, app, mlsysopsv1.AppUnschedulable, d.Reason()); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: r.retry}, nil
	}
	// Reports of an earlier placement say nothing of this one.
	r.Reported.Forget(app.Name)
	if err := apply(d.Clusters); err != nil {
		r.assumed.Forget(app.Name)
		return placeFailed(err)
	}
	if len(current) > 0 {
		log.Info("application moved", "from", current, "to", d.Clusters)
	} else {
		log.Info("application placed", "clusters", d.Clusters)
	}
	return reconcile.Result{}, r.setPlaced(ctx, app, d.Clusters)
}

// place chooses the clusters of application name on the reported capacity
// less what earlier placements, not reported yet, take, and assumes what
// this one takes.
func (r *AppReconciler) place(name string, req placement.AppRequest, clusters []placement.Cluster) (placement.ClusterDecision, error) {
	return r.assumed.PlaceApp(name, req, clusters)
}

// sweep forgets the mirrored statuses of the applications that are no
// longer in Karmada, retrying until it succeeds or ctx ends. Karmada is
// read live (reader), after the statuses: an application written since
// is listed.
func (r *AppReconciler) sweep(ctx context.Context, reader client.Reader) {
	sw, ok := r.Status.(StatusSweeper)
	if !ok {
		return
	}
	exists := func(ctx context.Context) (map[string]bool, error) { return appNames(ctx, reader) }
	for {
		gone, err := sw.Sweep(ctx, exists)
		for _, id := range gone {
			r.log.Info("status of an application gone from Karmada removed", "app", id)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		r.log.Warn("sweep of statuses of applications gone from Karmada failed; retrying", "err", err, "retry_in", r.retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.retry):
		}
	}
}

// appNames lists the names of the applications in Karmada (metadata
// only), with reader.
func appNames(ctx context.Context, reader client.Reader) (map[string]bool, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(mlsysopsv1.SchemeGroupVersion.WithKind("MLSysOpsAppList"))
	if err := reader.List(ctx, list, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
		return nil, fmt.Errorf("list applications: %w", err)
	}
	out := make(map[string]bool, len(list.Items))
	for _, o := range list.Items {
		out[o.Name] = true
	}
	return out, nil
}

// bindingRead passes a ResourceBinding's creation, deletion and the
// updates that change what the reconciler reads of it: the placement and
// the members' status reflected into it.
var bindingRead = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*workv1alpha2.ResourceBinding)
		b, okB := e.ObjectNew.(*workv1alpha2.ResourceBinding)
		if !okA || !okB {
			return true
		}
		return a.Annotations[mlsysopsv1.AnnotationPlacement] != b.Annotations[mlsysopsv1.AnnotationPlacement] ||
			!equality.Semantic.DeepEqual(a.Status.AggregatedStatus, b.Status.AggregatedStatus)
	},
}

// clusterPlaceable passes the cluster events that change whether
// applications can be placed there: creation, deletion, and updates of
// readiness or of the MLSysOps API's presence.
var clusterPlaceable = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*clusterv1alpha1.Cluster)
		b, okB := e.ObjectNew.(*clusterv1alpha1.Cluster)
		if !okA || !okB {
			return true
		}
		ready := func(c *clusterv1alpha1.Cluster) bool {
			return meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		}
		return ready(a) != ready(b) || HasAppAPI(a) != HasAppAPI(b)
	},
}

func allReady(names []string, ready map[string]bool) bool {
	for _, n := range names {
		if !ready[n] {
			return false
		}
	}
	return true
}

// respects reports whether a placement still satisfies the application's
// cluster_id list (the user may have edited it).
func respects(app *mlsysopsv1.MLSysOpsApp, clusters []string) bool {
	cp := app.Spec.ClusterPlacement
	if cp == nil || len(cp.ClusterID) == 0 || slices.Contains(cp.ClusterID, "*") {
		return true
	}
	for _, c := range clusters {
		if !slices.Contains(cp.ClusterID, c) {
			return false
		}
	}
	return true
}

// applyPlacement records clusters as the application's placement on its
// binding rb, as the cache showed it, and binds it there.
func (r *AppReconciler) applyPlacement(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, rb *workv1alpha2.ResourceBinding, clusters []string) error {
	var list clusterv1alpha1.ClusterList
	if err := r.client.List(ctx, &list); err != nil {
		return fmt.Errorf("placement of %s: %w", app.Name, err)
	}
	// The Scheduled condition is left to the binding scheduler, whose
	// pass the write brings: two writers of it at once refused each
	// other's (0.8 to 0.9 of each refused per application in bursts of
	// 200).
	wrote, _, err := bind(ctx, r.client, r.log, rb, clusters, list.Items)
	if wrote != "" {
		r.placed.Wrote(app.Name, wrote)
		return nil
	}
	if err != nil {
		return fmt.Errorf("placement of %s: %w", app.Name, err)
	}
	return nil
}

// placeFailed ends a pass whose placement could not be written. A
// conflict means the binding changed since the cache's copy, which may
// not show an earlier placement yet: the application is tried again at
// once rather than decided on that copy.
func placeFailed(err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		return reconcile.Result{Requeue: true}, nil
	}
	return reconcile.Result{}, err
}

func (r *AppReconciler) setPlaced(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, clusters []string) error {
	sorted := append([]string(nil), clusters...)
	sort.Strings(sorted)
	// Written as the next pass would derive it before any member reports
	// (see updateRunningPhase), so that pass writes nothing.
	msg := fmt.Sprintf("placed on %v; 0 of %d components ready", sorted, len(app.Spec.Components)*len(sorted))
	return r.updateStatus(ctx, app, func(st *mlsysopsv1.MLSysOpsAppStatus) {
		st.Phase, st.Message = mlsysopsv1.AppDeploying, msg
		st.Components = nil
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: mlsysopsv1.ConditionPlaced, Status: metav1.ConditionTrue, Reason: "Placed",
			Message: fmt.Sprintf("clusters %v", sorted), ObservedGeneration: app.Generation,
		})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: mlsysopsv1.ConditionReady, Status: metav1.ConditionFalse, Reason: string(mlsysopsv1.AppDeploying),
			Message: msg, ObservedGeneration: app.Generation,
		})
	})
}

func (r *AppReconciler) setPhase(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, phase mlsysopsv1.AppPhase, msg string) error {
	return r.updateStatus(ctx, app, func(st *mlsysopsv1.MLSysOpsAppStatus) {
		st.Phase, st.Message = phase, msg
		if phase == mlsysopsv1.AppUnschedulable || phase == mlsysopsv1.AppFailed {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: mlsysopsv1.ConditionPlaced, Status: metav1.ConditionFalse, Reason: string(phase),
				Message: truncate(msg, 1024), ObservedGeneration: app.Generation,
			})
		}
	})
}

// memberComponents gathers the component status each chosen member
// cluster reports, as Karmada reflects it into the application's
// ResourceBinding rb. The cluster agents' reports (Reported) stand in for
// a cluster's reflected status until the binding shows the same.
func (r *AppReconciler) memberComponents(app *mlsysopsv1.MLSysOpsApp, reflected map[string]*runtime.RawExtension, clusters []string) []mlsysopsv1.ComponentStatus {
	byCluster := map[string][]mlsysopsv1.ComponentStatus{}
	for name, raw := range reflected {
		if raw == nil || !slices.Contains(clusters, name) {
			continue
		}
		var st mlsysopsv1.MLSysOpsAppStatus
		if err := json.Unmarshal(raw.Raw, &st); err != nil {
			r.log.Warn("unreadable member status", "app", app.Name, "cluster", name, "error", err)
			continue
		}
		for _, c := range st.Components {
			if c.Cluster == "" {
				c.Cluster = name
			}
			byCluster[name] = append(byCluster[name], c)
		}
	}
	return r.Reported.Merge(app.Name, clusters, byCluster)
}

// bindingStatus returns, per cluster, the member copy's status Karmada
// reflected into binding rb.
func bindingStatus(rb *workv1alpha2.ResourceBinding) map[string]*runtime.RawExtension {
	out := map[string]*runtime.RawExtension{}
	for _, item := range rb.Status.AggregatedStatus {
		if item.Status != nil {
			out[item.ClusterName] = item.Status
		}
	}
	return out
}

// updateRunningPhase derives the phase of a placed application from the
// component status its clusters report.
func (r *AppReconciler) updateRunningPhase(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, clusters []string, comps []mlsysopsv1.ComponentStatus) error {
	// Every component runs on every cluster of the placement, and each
	// cluster reports its own.
	want := len(app.Spec.Components) * len(clusters)
	ready, reported, stopped := 0, 0, 0
	for _, c := range comps {
		reported++
		switch {
		case c.Replicas == 0:
			// A plan stopped it (see ComponentStatus.Replicas): it is
			// where it was asked to be.
			stopped++
			ready++
		case c.ReadyReplicas >= c.Replicas:
			ready++
		}
	}
	phase, msg := mlsysopsv1.AppDeploying, fmt.Sprintf("placed on %v; %d of %d components ready", clusters, ready, want)
	switch {
	case stopped >= want && want > 0:
		phase, msg = mlsysopsv1.AppDegraded, fmt.Sprintf("every component stopped by a plan on %v", clusters)
	case ready >= want && want > 0:
		phase, msg = mlsysopsv1.AppRunning, fmt.Sprintf("running on %v", clusters)
	case app.Status.Phase == mlsysopsv1.AppRunning || app.Status.Phase == mlsysopsv1.AppDegraded:
		if reported > 0 {
			phase = mlsysopsv1.AppDegraded
		}
	}
	return r.updateStatus(ctx, app, func(st *mlsysopsv1.MLSysOpsAppStatus) {
		st.Phase, st.Message = phase, msg
		st.Components = comps
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: mlsysopsv1.ConditionReady, Status: kube.ConditionStatus(phase == mlsysopsv1.AppRunning), Reason: string(phase),
			Message: msg, ObservedGeneration: app.Generation,
		})
	})
}

// errStatusBehind is a status write refused because the cache did not
// show the status last written yet.
var errStatusBehind = errors.New("the cache is behind the last status write")

func (r *AppReconciler) updateStatus(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, mutate func(*mlsysopsv1.MLSysOpsAppStatus)) error {
	// Nothing to write only if the cache shows the last status written
	// (the echo of a write brings no pass; a pass before it reaches the
	// cache compares with the status from before). The update is refused
	// while the cache is behind.
	current := r.ownStatus.Current(app)
	if !current && r.ownStatus.Behind(app) {
		// A locked write on this copy could only be refused.
		return fmt.Errorf("status of %s: %w", app.Name, errStatusBehind)
	}
	before := app.Status.DeepCopy()
	mutate(&app.Status)
	app.Status.ObservedGeneration = app.Generation
	if !current || !equalStatus(before, &app.Status) {
		if err := r.client.Status().Update(ctx, app); err != nil {
			switch {
			case apierrors.IsConflict(err) && !current:
				return fmt.Errorf("status of %s: %w", app.Name, errStatusBehind)
			case apierrors.IsConflict(err):
				// The object changed since it was read; reconcile again.
				return err
			}
			return fmt.Errorf("status of %s: %w", app.Name, err)
		}
		r.ownStatus.Wrote(app)
	}
	// Mirrored even when unchanged, so that the sink catches up with
	// applications it missed (written while it was down, or applied
	// directly to Karmada); the sink skips writes that change nothing.
	if r.Status != nil {
		if err := r.Status.Update(ctx, app); err != nil {
			return fmt.Errorf("mirror status of %s: %w", app.Name, err)
		}
	}
	return nil
}

func equalStatus(a, b *mlsysopsv1.MLSysOpsAppStatus) bool {
	if !equality.Semantic.DeepEqual(a.Components, b.Components) {
		return false
	}
	if a.Phase != b.Phase || a.Message != b.Message || a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func ptr[T any](v T) *T { return &v }

// BindingName is the name Karmada gives the ResourceBinding of an
// application (application names cannot contain the ':' Karmada replaces).
func BindingName(app string) string { return strings.ToLower(app + "-mlsysopsapp") }

// Resync makes the controller reconcile every application soon, for
// changes it cannot watch (an agent gone or back, an Unavailable change).
func (r *AppReconciler) Resync() { r.resync.Resync() }

// Passes returns, per application, the resourceVersion its last
// successful reconcile read.
func (r *AppReconciler) Passes() map[string]string { return r.passes.Snapshot() }

// LastPass returns the resourceVersion the last successful reconcile of
// the application read, "" when none completed.
func (r *AppReconciler) LastPass(app string) string { return r.passes.Last(app) }

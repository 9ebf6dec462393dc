package continuum

import (
	"context"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

// ClusterPlacementName is the continuum mechanism's name in plans
// (upstream).
const ClusterPlacementName = "clusterPlacement"

// DefaultPlanTimeout is how long the mechanism waits, by default, for an
// application to run on the clusters a plan chose.
const DefaultPlanTimeout = 3 * time.Minute

// ClusterPlacementOptions configure the clusterPlacement mechanism.
type ClusterPlacementOptions struct {
	// Complete receives the outcome of pending plans (mechanism.Env).
	Complete func(mechanism.Completion)
	// Unavailable, when set, names clusters whose agents are gone, with
	// the reason; plans may not choose them. Use the source the placement
	// controller uses.
	Unavailable func() map[string]string
	// Timeout bounds how long a plan may take; DefaultPlanTimeout when
	// zero.
	Timeout time.Duration
	// Poll is how often a pending plan is checked; one second when zero.
	Poll time.Duration
	// Works reads the placements from the Works the placement controller
	// writes (ControllersOptions.Works) rather than from the bindings.
	Works bool
	// Cache, when set and returning a reader, is the placement
	// controller's cache, which the Works are read from: listed live at
	// each refresh of the policies' view (every Work of every
	// application) and each check of a plan's progress, they were 93 to
	// 100 LISTs of Works in Karmada in a burst of 200 applications.
	Cache func() client.Reader
}

// ClusterPlacement is the continuum's clusterPlacement mechanism. It
// executes upstream plans, {action: {component: cluster}, app:
// [description]} (or name instead of app), by pinning the application to
// the clusters named (a ClusterPin on the MLSysOpsApp) which the placement
// controller then honours. Every component of an application runs in the
// same clusters, so every entry of action must name the same cluster (or
// list of clusters).
//
// A cluster the application's cluster_id does not list is refused (the
// user wins), as is one that is not Ready, whose agent is gone or that
// placement's filters reject, with the reason. A plan for the clusters the
// application already runs on succeeds at once; any other is Pending until
// the propagation policy names the clusters and they report every
// component ready, then Success; Failed when the controller dropped the
// pin, another plan replaced it, or Timeout passed.
type ClusterPlacement struct {
	client   client.Client
	capacity CapacitySource
	log      *slog.Logger
	opts     ClusterPlacementOptions
	follow   *mechanism.Follower
}

var (
	_ mechanism.Mechanism = (*ClusterPlacement)(nil)
	_ mechanism.Closer    = (*ClusterPlacement)(nil)
)

// NewClusterPlacement returns the mechanism on the Karmada API; c should
// read from the API server, not a cache.
func NewClusterPlacement(c client.Client, capacity CapacitySource, log *slog.Logger, opts ClusterPlacementOptions) *ClusterPlacement {
	return &ClusterPlacement{client: c, capacity: capacity, log: log, opts: opts, follow: mechanism.NewFollower(opts.Timeout, opts.Poll, DefaultPlanTimeout)}
}

// ParseClusterCommand reads a clusterPlacement command: the application's
// name (name, or app as a description or a list of them) and the clusters
// its components go to.
func ParseClusterCommand(cmd map[string]any) (app string, clusters []string, err error) {
	app, _ = cmd["name"].(string)
	if app == "" {
		descs, ok := cmd["app"].([]any)
		if !ok {
			descs = []any{cmd["app"]}
		}
		if len(descs) > 0 {
			if d, ok := descs[0].(map[string]any); ok {
				app, _ = d["name"].(string)
			}
		}
	}
	action, _ := cmd["action"].(map[string]any)
	if app == "" || len(action) == 0 {
		return "", nil, errors.New("clusterPlacement: the command needs action {component: cluster} and the application (app or name)")
	}
	comps := make([]string, 0, len(action))
	for c := range action {
		comps = append(comps, c)
	}
	sort.Strings(comps)
	var first string
	for _, comp := range comps {
		var list []string
		switch v := action[comp].(type) {
		case string:
			list = []string{v}
		case []any:
			for _, x := range v {
				if s, ok := x.(string); ok {
					list = append(list, s)
				}
			}
		}
		if len(list) == 0 || slices.Contains(list, "") {
			return "", nil, fmt.Errorf("clusterPlacement: action.%s must name a cluster (or a list of clusters)", comp)
		}
		set := sortedClusters(list)
		if clusters == nil {
			clusters, first = set, comp
			continue
		}
		if !sameClusters(set, clusters) {
			return "", nil, fmt.Errorf("clusterPlacement: %s goes to %v but %s to %v; the components of an application run in the same clusters, so name the same ones for all", first, clusters, comp, set)
		}
	}
	return app, clusters, nil
}

// Apply implements mechanism.Mechanism.
func (m *ClusterPlacement) Apply(ctx context.Context, cmd map[string]any) (mechanism.Result, error) {
	planID, _ := cmd[mechanism.PlanIDKey].(string)
	name, want, err := ParseClusterCommand(cmd)
	if err != nil {
		return mechanism.Result{}, err
	}
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := m.client.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, app); err != nil {
		if apierrors.IsNotFound(err) {
			return mechanism.Result{}, fmt.Errorf("clusterPlacement: application %s does not exist in Karmada", name)
		}
		return mechanism.Result{}, fmt.Errorf("clusterPlacement: read %s: %w", name, err)
	}
	refuse := func(why string) (mechanism.Result, error) {
		m.log.Warn("clusterPlacement plan refused", "app", name, "plan", planID, "clusters", want, "reason", why)
		return mechanism.Result{}, fmt.Errorf("clusterPlacement cannot place %s on %v: %s", name, want, why)
	}
	if why := userConflict(app, want); why != "" {
		return refuse(why)
	}
	current, err := m.currentClusters(ctx, name)
	if err != nil {
		return mechanism.Result{}, err
	}
	pin, _ := readPin(app)
	if pin == nil && sameClusters(current, want) {
		return mechanism.Result{Status: mechanism.StatusSuccess, Detail: map[string]any{"clusters": toAny(want), "changed": false}}, nil
	}
	if len(current) > 0 {
		// Moving a placed application is upstream's component_relocation;
		// a policy's first choice of clusters needs no permission.
		perms := mechanism.NewAppPermissions(app.Name, app.Spec.PermittedActions)
		if !perms.Allows(mlsysopsv1.AppActionComponentRelocation) {
			err := perms.Forbidden(mlsysopsv1.AppActionComponentRelocation, "clusterPlacement move")
			m.log.Warn("clusterPlacement plan refused", "app", name, "plan", planID, "clusters", want, "reason", err)
			return mechanism.Result{}, err
		}
	}
	clusters, err := m.capacity.Clusters(ctx)
	if err != nil {
		return mechanism.Result{}, fmt.Errorf("clusterPlacement: read the member clusters: %w", err)
	}
	var gone map[string]string
	if m.opts.Unavailable != nil {
		gone = m.opts.Unavailable()
	}
	if why := pinProblem(app, want, clusters, gone, current); why != "" {
		return refuse(why)
	}
	np := &ClusterPin{Plan: planID, Clusters: want}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &mlsysopsv1.MLSysOpsApp{}
		if err := m.client.Get(ctx, client.ObjectKeyFromObject(app), cur); err != nil {
			return err
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[mlsysopsv1.AnnotationClusters] = np.encode()
		delete(cur.Annotations, mlsysopsv1.AnnotationClustersDropped)
		return m.client.Update(ctx, cur)
	}); err != nil {
		return mechanism.Result{}, fmt.Errorf("clusterPlacement: record the plan on %s: %w", name, err)
	}
	m.log.Info("clusterPlacement plan recorded", "app", name, "plan", planID, "from", current, "to", want)
	m.followPlan(np, name)
	return mechanism.Result{Status: mechanism.StatusPending, Detail: map[string]any{"clusters": toAny(want), "from": toAny(current)}}, nil
}

// currentClusters returns the clusters the application is placed on.
func (m *ClusterPlacement) currentClusters(ctx context.Context, app string) ([]string, error) {
	clusters, err := m.placementOf(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("clusterPlacement: %w", err)
	}
	return clusters, nil
}

// follow checks the application until it runs on the pinned clusters,
// the pin is gone or the timeout passed, and reports the outcome.
func (m *ClusterPlacement) followPlan(pin *ClusterPin, app string) {
	m.follow.Follow(func(ctx context.Context) (string, error) {
		return m.progress(ctx, pin, app)
	}, func(waiting string) error {
		return fmt.Errorf("%s does not run on %v after %s: %s", app, pin.Clusters, m.follow.Timeout, waiting)
	}, func(err error) { m.finish(pin, app, err) })
}

func (m *ClusterPlacement) finish(pin *ClusterPin, app string, err error) {
	c := mechanism.Completion{PlanID: pin.Plan, Status: mechanism.StatusSuccess, Detail: map[string]any{"app": app, "clusters": toAny(pin.Clusters)}}
	if err != nil {
		c.Status, c.Err = mechanism.StatusFailed, err
		m.log.Warn("clusterPlacement plan failed", "app", app, "plan", pin.Plan, "err", err)
	} else {
		m.log.Info("clusterPlacement plan carried out", "app", app, "plan", pin.Plan, "clusters", pin.Clusters)
	}
	if m.opts.Complete != nil {
		m.opts.Complete(c)
	}
}

// progress says what the application still waits for ("" when it runs on
// the pinned clusters), or why it never will.
func (m *ClusterPlacement) progress(ctx context.Context, pin *ClusterPin, name string) (string, error) {
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := m.client.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, app); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errors.New("the application was deleted")
		}
		return err.Error(), nil
	}
	cur, _ := readPin(app)
	switch {
	case cur == nil:
		if d := app.Annotations[mlsysopsv1.AnnotationClustersDropped]; strings.HasPrefix(d, pin.Plan+":") {
			return "", fmt.Errorf("the placement controller dropped the pin: %s", strings.TrimPrefix(d, pin.Plan+": "))
		}
		return "", errors.New("the pin was removed")
	case cur.Plan != pin.Plan:
		return "", fmt.Errorf("plan %s replaced this plan's choice", cur.Plan)
	}
	current, err := m.currentClusters(ctx, name)
	if err != nil {
		return err.Error(), nil
	}
	if !sameClusters(current, pin.Clusters) {
		return fmt.Sprintf("the binding places it on %v", current), nil
	}
	var missing []string
	for _, c := range app.Spec.Components {
		for _, cl := range pin.Clusters {
			ok := false
			for _, st := range app.Status.Components {
				if st.Name == c.Metadata.Name && st.Cluster == cl && st.ReadyReplicas >= st.Replicas {
					ok = true
				}
			}
			if !ok {
				missing = append(missing, c.Metadata.Name+"@"+cl)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("not ready yet: %v (phase %s: %s)", missing, app.Status.Phase, app.Status.Message), nil
	}
	return "", nil
}

// State implements mechanism.Mechanism: the member clusters
// (clusters[name].ready) and where each application runs
// (applications[app].clusters, and pinned: the clusters a plan chose).
func (m *ClusterPlacement) State(ctx context.Context) (map[string]any, error) {
	var cl clusterv1alpha1.ClusterList
	if err := m.client.List(ctx, &cl); err != nil {
		return nil, fmt.Errorf("list Karmada clusters: %w", err)
	}
	clusters := map[string]any{}
	for i := range cl.Items {
		c := &cl.Items[i]
		clusters[c.Name] = map[string]any{"ready": meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) && HasAppAPI(c)}
	}
	placed, err := m.placements(ctx)
	if err != nil {
		return nil, err
	}
	var apps mlsysopsv1.MLSysOpsAppList
	if err := m.client.List(ctx, &apps, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
		return nil, fmt.Errorf("list applications: %w", err)
	}
	out := map[string]any{}
	for i := range apps.Items {
		a := &apps.Items[i]
		info := map[string]any{"clusters": toAny(placed[a.Name]), "phase": string(a.Status.Phase)}
		if pin, _ := readPin(a); pin != nil {
			info["pinned"] = toAny(pin.Clusters)
		}
		out[a.Name] = info
	}
	return map[string]any{"clusters": clusters, "applications": out}, nil
}

// Options implements mechanism.Mechanism.
func (m *ClusterPlacement) Options() map[string]any {
	return map[string]any{"action": "{component: cluster}: the clusters the whole application runs in"}
}

// Close stops following pending plans (mechanism.Closer).
func (m *ClusterPlacement) Close() error {
	m.follow.Close()
	return nil
}

func toAny(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// placementOf returns the clusters application app is placed on.
func (m *ClusterPlacement) placementOf(ctx context.Context, app string) ([]string, error) {
	if !m.opts.Works {
		return PlacementOf(ctx, m.client, app)
	}
	works, err := appWorks(ctx, m.worksReader(), app)
	if err != nil {
		return nil, err
	}
	return worksPlaced(works), nil
}

// worksReader reads the Works from the placement controller's cache
// while it runs, else from Karmada.
func (m *ClusterPlacement) worksReader() client.Reader {
	if m.opts.Cache != nil {
		if c := m.opts.Cache(); c != nil {
			return c
		}
	}
	return m.client
}

// placements returns the clusters each application is placed on.
func (m *ClusterPlacement) placements(ctx context.Context) (map[string][]string, error) {
	placed := map[string][]string{}
	if m.opts.Works {
		var works workv1alpha1.WorkList
		if err := m.worksReader().List(ctx, &works, client.HasLabels{LabelWorkApp}); err != nil {
			return nil, fmt.Errorf("list works: %w", err)
		}
		for _, w := range works.Items {
			cl, ok := strings.CutPrefix(w.Namespace, executionSpacePrefix)
			if ok && w.DeletionTimestamp.IsZero() && w.Name == WorkName(w.Labels[LabelWorkApp]) {
				app := w.Labels[LabelWorkApp]
				placed[app] = append(placed[app], cl)
			}
		}
		for _, cls := range placed {
			sort.Strings(cls)
		}
		return placed, nil
	}
	var rbs workv1alpha2.ResourceBindingList
	if err := m.client.List(ctx, &rbs, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
		return nil, fmt.Errorf("list resource bindings: %w", err)
	}
	for i := range rbs.Items {
		if res := rbs.Items[i].Spec.Resource; res.Kind == "MLSysOpsApp" {
			placed[res.Name], _ = PlacedClusters(&rbs.Items[i])
		}
	}
	return placed, nil
}

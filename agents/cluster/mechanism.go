package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// FluidityName is the cluster mechanism's name in plans (upstream).
const FluidityName = "fluidity"

// DefaultPlanTimeout is how long a mechanism waits, by default, for the
// placement controllers to carry out a plan before it fails.
const DefaultPlanTimeout = 3 * time.Minute

// FluidityOptions configure the fluidity mechanism.
type FluidityOptions struct {
	// Complete receives the outcome of pending plans (mechanism.Env).
	Complete func(mechanism.Completion)
	// Unavailable, when set, names nodes whose agents are gone, with the
	// reason; plans may not place components there. Use the source the
	// placement controller uses.
	Unavailable func() map[string]string
	// Timeout bounds how long a plan may take to be carried out;
	// DefaultPlanTimeout when zero.
	Timeout time.Duration
	// Poll is how often a pending plan is checked; one second when zero.
	Poll time.Duration
	// Events, when set, records Kubernetes events of the plans on the
	// application and the Deployments of the components they change:
	// PlanAccepted, PlanRefused, PlanCompleted, PlanFailed.
	Events record.EventRecorder
	// Reader, when set and returning a reader, is where State reads the
	// cluster (the placement controller's informer caches); the live API
	// otherwise. State runs at every analysis (at most once a sampling
	// interval): read live, it listed every pod, node and Deployment of
	// the member about twice a second during a burst of applications.
	Reader func() client.Reader
}

// Reasons of the fluidity mechanism's Kubernetes events.
const (
	EventPlanAccepted  = "PlanAccepted"
	EventPlanRefused   = "PlanRefused"
	EventPlanCompleted = "PlanCompleted"
	EventPlanFailed    = "PlanFailed"
)

// Fluidity is the cluster's fluidity mechanism. It executes upstream
// deployment plans, {name, deployment_plan: {component: [{action: deploy |
// move | remove | change_spec, ...}], initial_plan}}, by recording on each
// component's Deployment an Override that the placement controller
// honours from then on (mlsysopsv1.AnnotationOverride), so neither the next
// reconcile nor an agent restart undoes it.
//
// A plan the application's permitted_actions do not allow is refused
// before anything else (fluidity.PermitPlacement and PermitSpecChange:
// deploy, move and remove need component_relocation, change_spec the
// action of each field it changes). Targets are then checked, with
// placement's filters: a node that is not
// Ready, lacks what the component needs, has no room or whose agent is
// gone is refused with the reason, and nothing is written. A plan that is
// accepted is Pending until the controller has carried it out (the
// component runs on the nodes and with the spec asked for, every replica
// ready) and then Success; Failed when the controller dropped the
// override, another plan replaced it, or Timeout passed.
//
// An initial plan (initial_plan: true) does not move components the
// controller placed already: its deploys succeed where the component runs
// on the host and fail otherwise; deploys of components not placed yet
// wait for the controller.
type Fluidity struct {
	client  client.Client
	cluster string
	log     *slog.Logger
	opts    FluidityOptions
	follow  *mechanism.Follower
}

var (
	_ mechanism.Mechanism = (*Fluidity)(nil)
	_ mechanism.Closer    = (*Fluidity)(nil)
)

// NewFluidity returns the fluidity mechanism of the member cluster named
// cluster; c should read from the API server, not a cache, so that checks
// see the latest state.
func NewFluidity(c client.Client, cluster string, log *slog.Logger, opts FluidityOptions) *Fluidity {
	return &Fluidity{client: c, cluster: cluster, log: log, opts: opts, follow: mechanism.NewFollower(opts.Timeout, opts.Poll, DefaultPlanTimeout)}
}

// target is what a plan wants of one component.
type target struct {
	comp string
	// ov is the override the plan recorded; nil when it removed it.
	ov *fluidity.Override
	// run is the component as it will run.
	run *mlsysopsv1.Component
	// replicas it will run with.
	replicas int32
	// host, for an initial deploy of a component not placed yet: it is
	// only checked once the controller placed the component.
	host string
}

// Apply implements mechanism.Mechanism.
func (f *Fluidity) Apply(ctx context.Context, cmd map[string]any) (mechanism.Result, error) {
	planID, _ := cmd[mechanism.PlanIDKey].(string)
	policy, _ := cmd[mechanism.PolicyKey].(string)
	p, err := fluidity.ParsePlan(cmd)
	if err != nil {
		return mechanism.Result{}, err
	}
	who := "plan " + planID
	if policy != "" {
		who += " of policy " + policy
	}
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := f.client.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: p.App}, app); err != nil {
		if apierrors.IsNotFound(err) {
			return mechanism.Result{}, fmt.Errorf("fluidity: application %s is not placed in cluster %s", p.App, f.cluster)
		}
		return mechanism.Result{}, fmt.Errorf("fluidity: read application %s: %w", p.App, err)
	}
	// The nodes and pods are read when a check needs them, once: a plan
	// that changes nothing, or is refused before (an initial deploy of a
	// component the controller placed), reads none.
	var (
		index    *placement.Index
		indexErr error
	)
	nodes := func() (*placement.Index, error) {
		if index == nil && indexErr == nil {
			if index, indexErr = readIndex(ctx, f.client); indexErr != nil {
				indexErr = fmt.Errorf("read the nodes of %s: %w", f.cluster, indexErr)
			}
		}
		return index, indexErr
	}
	var gone map[string]string
	if f.opts.Unavailable != nil {
		gone = f.opts.Unavailable()
	}
	comps := make([]string, 0, len(p.Components))
	for c := range p.Components {
		comps = append(comps, c)
	}
	sort.Strings(comps)
	var problems []string
	var writes, waits []target
	for _, name := range comps {
		t, write, err := f.plan(ctx, app, p, name, nodes, gone)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
		case t == nil:
		case write:
			writes = append(writes, *t)
		default:
			waits = append(waits, *t)
		}
	}
	if len(problems) > 0 {
		f.log.Warn("fluidity plan refused", "app", p.App, "plan", planID, "policy", policy, "problems", problems)
		f.event(app, corev1.EventTypeWarning, EventPlanRefused, "%s refused: %s", who, strings.Join(problems, "; "))
		return mechanism.Result{}, fmt.Errorf("fluidity cannot execute the plan for %s: %s", p.App, strings.Join(problems, "; "))
	}
	for _, t := range writes {
		if t.ov != nil {
			t.ov.Plan = planID
		}
		dep, err := f.record(ctx, app.Name, t)
		if err != nil {
			return mechanism.Result{}, fmt.Errorf("fluidity: record the plan for %s/%s: %w", app.Name, t.comp, err)
		}
		f.log.Info("fluidity plan recorded", "app", app.Name, "component", t.comp, "plan", planID, "policy", policy,
			"actions", actionList(p.Components[t.comp]), "nodes", t.ov.Running(nil), "override", t.ov != nil, "reason", p.Reason)
		msg := fmt.Sprintf("%s: %s %s", who, t.comp, actionList(p.Components[t.comp]))
		if p.Reason != "" {
			msg += " (" + p.Reason + ")"
		}
		f.event(app, corev1.EventTypeNormal, EventPlanAccepted, "%s", msg)
		f.event(dep, corev1.EventTypeNormal, EventPlanAccepted, "%s", msg)
	}
	todo := append(writes, waits...)
	if len(todo) == 0 {
		return mechanism.Result{Status: mechanism.StatusSuccess, Detail: map[string]any{"changed": false}}, nil
	}
	f.followPlan(planID, who, app, todo)
	return mechanism.Result{Status: mechanism.StatusPending, Detail: map[string]any{"components": names(todo)}}, nil
}

// plan works out what a plan wants of one component and checks it. It
// returns a nil target when the component already is as the plan wants;
// write says whether an override must be recorded (else the target is an
// initial deploy waiting for the controller).
func (f *Fluidity) plan(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, p *fluidity.Plan, name string, readNodes func() (*placement.Index, error), gone map[string]string) (*target, bool, error) {
	var comp *mlsysopsv1.Component
	for i := range app.Spec.Components {
		if app.Spec.Components[i].Metadata.Name == name {
			comp = &app.Spec.Components[i]
		}
	}
	if comp == nil {
		return nil, false, fmt.Errorf("not a component of %s", app.Name)
	}
	acts := p.Components[name]
	// The application's permitted_actions come first: a plan it forbids
	// is refused whatever the state of the component.
	perms := mechanism.NewAppPermissions(app.Name, app.Spec.PermittedActions)
	for _, a := range acts {
		if err := fluidity.PermitPlacement(perms, p.Initial, a); err != nil {
			return nil, false, err
		}
	}
	dep, err := f.deployment(ctx, app.Name, name)
	if err != nil {
		return nil, false, err
	}
	if dep == nil {
		for _, a := range acts {
			if !p.Initial || a.Kind != fluidity.ActionDeploy {
				return nil, false, fmt.Errorf("not placed yet (%s); plan again once the placement controller placed it", componentMessage(app, name))
			}
		}
		return &target{comp: name, host: acts[len(acts)-1].Host}, false, nil
	}
	prev, err := fluidity.ReadOverride(dep.Annotations)
	if err != nil {
		prev = nil // the controller drops it too
	}
	current := strings.Split(dep.Annotations[mlsysopsv1.AnnotationNodes], ",")
	ov := prev.Copy()
	run := ov.Effective(comp)
	for i, a := range acts {
		fail := func(err error) (*target, bool, error) {
			if len(acts) > 1 {
				err = fmt.Errorf("action %d (%s): %w", i, a.Kind, err)
			}
			return nil, false, err
		}
		switch {
		case a.Kind == fluidity.ActionChangeSpec:
			if a.Host != "" && !slices.Contains(ov.Running(current), a.Host) {
				return fail(fmt.Errorf("change_spec on %s: the component runs on %v", a.Host, ov.Running(current)))
			}
			spec, err := fluidity.ChangeSpec(app, run, a.NewSpec)
			if err != nil {
				return fail(err)
			}
			if err := fluidity.PermitSpecChange(perms, run, spec); err != nil {
				return fail(err)
			}
			run, ov.Spec = spec, spec
			if fluidity.SpecHash(spec) == fluidity.SpecHash(comp) {
				ov.Spec = nil // back to the application's spec
			}
		case p.Initial && a.Kind == fluidity.ActionDeploy:
			if on := ov.Running(current); !slices.Contains(on, a.Host) {
				return fail(fmt.Errorf("initial deploy to %s: the placement controller placed the component on %v already; an initial plan does not move it (plan a move)", a.Host, on))
			}
		default:
			if _, err := ov.Step(a, current); err != nil {
				return fail(err)
			}
		}
	}
	if ov.Empty() {
		ov = nil
	} else {
		ov.Base = fluidity.SpecHash(comp)
	}
	if sameOverride(prev, ov) {
		return nil, false, nil
	}
	replicas := ov.Replicas(&app.Spec, run)
	switch {
	case ov.Pinned():
		nodes, err := readNodes()
		if err != nil {
			return nil, false, err
		}
		if why := pinProblem(app, run, ov.Nodes, replicas, nodes, nil, gone); why != "" {
			return nil, false, fmt.Errorf("cannot run on %v: %s", ov.Nodes, why)
		}
	case ov != nil && ov.Stopped:
	default:
		// The controller places the component: somewhere must fit it.
		nodes, err := readNodes()
		if err != nil {
			return nil, false, err
		}
		d, err := nodes.Place(placement.Request{App: &app.Spec, Component: run, Exclude: gone, Own: placement.ComponentKey{App: app.Name, Component: name}})
		if err != nil {
			return nil, false, err
		}
		if !d.Feasible() {
			return nil, false, fmt.Errorf("the changed component fits no node: %s", d.Reason())
		}
	}
	return &target{comp: name, ov: ov, run: run, replicas: replicas}, true, nil
}

// sameOverride reports whether two overrides place and specify the
// component alike (the plan that set them aside).
func sameOverride(a, b *fluidity.Override) bool {
	if a.Empty() || b.Empty() {
		return a.Empty() == b.Empty()
	}
	x, y := a.Copy(), b.Copy()
	x.Plan, y.Plan = "", ""
	return x.Encode() == y.Encode()
}

func componentMessage(app *mlsysopsv1.MLSysOpsApp, comp string) string {
	for _, st := range app.Status.Components {
		if st.Name == comp && st.Message != "" {
			return st.Message
		}
	}
	return "no Deployment yet"
}

// deployment returns the component's Deployment, nil when there is none.
func (f *Fluidity) deployment(ctx context.Context, app, comp string) (*appsv1.Deployment, error) {
	var deps appsv1.DeploymentList
	if err := f.client.List(ctx, &deps, client.InNamespace(members.Namespace(app)), client.MatchingLabels{
		mlsysopsv1.LabelComponent: comp, mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue,
	}); err != nil {
		return nil, fmt.Errorf("read the Deployment of %s: %w", comp, err)
	}
	if len(deps.Items) == 0 {
		return nil, nil
	}
	return &deps.Items[0], nil
}

// record writes the target's override on the component's Deployment (or
// removes it) and forgets why an earlier one was dropped. It returns the
// Deployment as written.
func (f *Fluidity) record(ctx context.Context, app string, t target) (*appsv1.Deployment, error) {
	var dep *appsv1.Deployment
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		dep, err = f.deployment(ctx, app, t.comp)
		if err != nil {
			return err
		}
		if dep == nil {
			return errors.New("the Deployment is gone")
		}
		if dep.Annotations == nil {
			dep.Annotations = map[string]string{}
		}
		if t.ov.Empty() {
			delete(dep.Annotations, mlsysopsv1.AnnotationOverride)
		} else {
			dep.Annotations[mlsysopsv1.AnnotationOverride] = t.ov.Encode()
		}
		delete(dep.Annotations, mlsysopsv1.AnnotationOverrideDropped)
		return f.client.Update(ctx, dep)
	})
	return dep, err
}

// event records a Kubernetes event on obj when the mechanism has a
// recorder.
func (f *Fluidity) event(obj runtime.Object, eventType, reason, format string, args ...any) {
	if f.opts.Events == nil || obj == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxEventMessage {
		msg = msg[:maxEventMessage-3] + "..."
	}
	f.opts.Events.Event(obj, eventType, reason, msg)
}

// maxEventMessage keeps event messages short enough to read in kubectl.
const maxEventMessage = 1000

// actionList renders a component's actions: "move a -> b, deploy on c".
func actionList(acts []fluidity.Action) string {
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = a.String()
	}
	return strings.Join(out, ", ")
}

// follow checks the plan's components until the controller has carried
// it out, something made it impossible or the timeout passed, and
// reports the outcome.
func (f *Fluidity) followPlan(planID, who string, app *mlsysopsv1.MLSysOpsApp, todo []target) {
	f.follow.Follow(func(ctx context.Context) (string, error) {
		var waiting []string
		for _, tg := range todo {
			why, err := f.progress(ctx, planID, app.Name, tg)
			if err != nil {
				return "", fmt.Errorf("%s: %w", tg.comp, err)
			}
			if why != "" {
				waiting = append(waiting, tg.comp+": "+why)
			}
		}
		return strings.Join(waiting, "; "), nil
	}, func(waiting string) error {
		return fmt.Errorf("not carried out after %s: %s", f.follow.Timeout, waiting)
	}, func(err error) { f.finish(planID, who, app, todo, err) })
}

func (f *Fluidity) finish(planID, who string, app *mlsysopsv1.MLSysOpsApp, todo []target, err error) {
	c := mechanism.Completion{PlanID: planID, Status: mechanism.StatusSuccess, Detail: map[string]any{"app": app.Name}}
	if err != nil {
		c.Status, c.Err = mechanism.StatusFailed, err
		f.log.Warn("fluidity plan failed", "app", app.Name, "plan", planID, "err", err)
		f.event(app, corev1.EventTypeWarning, EventPlanFailed, "%s failed: %v", who, err)
	} else {
		f.log.Info("fluidity plan carried out", "app", app.Name, "plan", planID)
		f.event(app, corev1.EventTypeNormal, EventPlanCompleted, "%s carried out: %s", who, strings.Join(planOutcome(todo), ", "))
	}
	if f.opts.Complete != nil {
		f.opts.Complete(c)
	}
}

// progress says what the component still waits for ("" when it is as the
// plan wants), or why the plan cannot be carried out any more.
func (f *Fluidity) progress(ctx context.Context, planID, app string, t target) (string, error) {
	dep, err := f.deployment(ctx, app, t.comp)
	if err != nil {
		return err.Error(), nil // transient: try again
	}
	if dep == nil {
		if t.host != "" {
			return "waiting for the placement controller", nil
		}
		return "", errors.New("the component's Deployment is gone (was it removed from the application?)")
	}
	if t.host != "" {
		if on := runningOn(dep); !slices.Contains(on, t.host) {
			return "", fmt.Errorf("initial deploy to %s: the placement controller placed the component on %v; plan a move to change that", t.host, on)
		}
		return "", nil
	}
	ov, _ := fluidity.ReadOverride(dep.Annotations)
	switch {
	case ov != nil && ov.Plan != planID:
		return "", fmt.Errorf("plan %s replaced this plan's changes", ov.Plan)
	case ov == nil && t.ov != nil:
		if d := dep.Annotations[mlsysopsv1.AnnotationOverrideDropped]; strings.HasPrefix(d, planID+":") {
			return "", fmt.Errorf("the placement controller dropped the plan's changes: %s", strings.TrimPrefix(d, planID+": "))
		}
		return "", errors.New("the plan's changes were removed")
	}
	if h := dep.Annotations[mlsysopsv1.AnnotationSpecHash]; h != fluidity.SpecHash(t.run) {
		return "the Deployment does not run the new spec yet", nil
	}
	want := t.ov.Running(nil)
	if t.ov.Pinned() && dep.Annotations[mlsysopsv1.AnnotationNodes] != strings.Join(want, ",") {
		return fmt.Sprintf("the Deployment is not on %v yet", want), nil
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != t.replicas {
		return fmt.Sprintf("the Deployment does not ask for %d replicas yet", t.replicas), nil
	}
	st := dep.Status
	if st.ObservedGeneration < dep.Generation || st.UpdatedReplicas != t.replicas || st.Replicas != t.replicas || st.AvailableReplicas != t.replicas {
		return fmt.Sprintf("rolling out: %d of %d replicas updated and available, %d in all", min(st.UpdatedReplicas, st.AvailableReplicas), t.replicas, st.Replicas), nil
	}
	var pods corev1.PodList
	if err := f.client.List(ctx, &pods, client.InNamespace(dep.Namespace), client.MatchingLabels{mlsysopsv1.LabelComponent: t.comp}); err != nil {
		return err.Error(), nil
	}
	var where []string
	count := int32(0)
	for _, p := range pods.Items {
		if !p.DeletionTimestamp.IsZero() || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		count++
		if p.Spec.NodeName == "" || (t.ov.Pinned() && !slices.Contains(want, p.Spec.NodeName)) {
			where = append(where, p.Name+"@"+p.Spec.NodeName)
		}
	}
	if len(where) > 0 || count != t.replicas {
		return fmt.Sprintf("%d pods, want %d; elsewhere: %v", count, t.replicas, where), nil
	}
	return "", nil
}

// planOutcome describes what each target of a plan runs as now: "server on
// [edge-2]".
func planOutcome(ts []target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		switch {
		case t.host != "":
			out[i] = fmt.Sprintf("%s on %s", t.comp, t.host)
		case t.ov != nil && t.ov.Stopped:
			out[i] = t.comp + " stopped"
		case t.ov.Pinned():
			out[i] = fmt.Sprintf("%s on %v", t.comp, t.ov.Running(nil))
		default:
			out[i] = t.comp + " placed by the controller"
		}
	}
	return out
}

func names(ts []target) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = t.comp
	}
	return out
}

// State implements mechanism.Mechanism: what runs where, in the shape
// upstream policies read: applications[app].components[comp].node_placed
// (and nodes, replicas, ready_replicas, override, and candidates: the
// nodes placement's filters accept for one replica of the component as it
// runs, best score first, whether or not it runs there), and nodes[node]
// with spec (its MLSysOpsNode description), ready and components.
func (f *Fluidity) State(ctx context.Context) (map[string]any, error) {
	var read client.Reader = f.client
	if f.opts.Reader != nil {
		if r := f.opts.Reader(); r != nil {
			read = r
		}
	}
	var deps appsv1.DeploymentList
	if err := read.List(ctx, &deps, client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("list Deployments: %w", err)
	}
	pnodes, err := listNodes(ctx, read)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	index := placement.NewIndexOf(pnodes)
	var al mlsysopsv1.MLSysOpsAppList
	if err := read.List(ctx, &al, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
		return nil, fmt.Errorf("list applications: %w", err)
	}
	specs := map[string]*mlsysopsv1.MLSysOpsApp{}
	for i := range al.Items {
		specs[al.Items[i].Name] = &al.Items[i]
	}
	var gone map[string]string
	if f.opts.Unavailable != nil {
		gone = f.opts.Unavailable()
	}
	onNode := map[string][]any{}
	apps := map[string]any{}
	for i := range deps.Items {
		d := &deps.Items[i]
		app, comp := d.Labels[mlsysopsv1.LabelApp], d.Labels[mlsysopsv1.LabelComponent]
		if app == "" || comp == "" {
			continue
		}
		on := runningOn(d)
		info := map[string]any{"nodes": toAny(on), "ready_replicas": int64(d.Status.ReadyReplicas), "candidates": []any{}}
		if len(on) > 0 {
			info["node_placed"] = on[0]
		}
		if d.Spec.Replicas != nil {
			info["replicas"] = int64(*d.Spec.Replicas)
		}
		ov, _ := fluidity.ReadOverride(d.Annotations)
		if ov != nil {
			info["override"], _ = toData(ov)
		}
		if a := specs[app]; a != nil {
			if c := componentOf(a, comp); c != nil {
				info["candidates"] = toAny(candidates(a, ov.Effective(c), index, gone))
			}
		}
		a, _ := apps[app].(map[string]any)
		if a == nil {
			a = map[string]any{"components": map[string]any{}}
			apps[app] = a
		}
		a["components"].(map[string]any)[comp] = info
		for _, n := range on {
			onNode[n] = append(onNode[n], comp)
		}
	}
	nodes := map[string]any{}
	for i := range pnodes {
		n := pnodes[i].Node
		spec := map[string]any{}
		if pnodes[i].Description != nil {
			spec, _ = toData(*pnodes[i].Description)
		}
		comps := onNode[n.Name]
		if comps == nil {
			comps = []any{}
		}
		nodes[n.Name] = map[string]any{"spec": spec, "ready": nodeIsReady(n), "components": comps}
	}
	return map[string]any{"cluster": f.cluster, "applications": apps, "nodes": nodes}, nil
}

// componentOf returns the application's component of that name.
func componentOf(app *mlsysopsv1.MLSysOpsApp, name string) *mlsysopsv1.Component {
	for i := range app.Spec.Components {
		if app.Spec.Components[i].Metadata.Name == name {
			return &app.Spec.Components[i]
		}
	}
	return nil
}

// candidates are the nodes that could take one replica of the component
// (as it runs, run), with its own pods' requests set aside, best score
// first, then by name.
func candidates(app *mlsysopsv1.MLSysOpsApp, run *mlsysopsv1.Component, nodes *placement.Index, gone map[string]string) []string {
	d, err := nodes.Place(placement.Request{App: &app.Spec, Component: run, Replicas: 1, Exclude: gone, Explain: true,
		Own: placement.ComponentKey{App: app.Name, Component: run.Metadata.Name}})
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(d.Scores))
	for n := range d.Scores {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		if d.Scores[out[i]] != d.Scores[out[j]] {
			return d.Scores[out[i]] > d.Scores[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// Options implements mechanism.Mechanism.
func (f *Fluidity) Options() map[string]any {
	return map[string]any{"actions": []any{fluidity.ActionDeploy, fluidity.ActionMove, fluidity.ActionRemove, fluidity.ActionChangeSpec}}
}

// Close stops following pending plans (mechanism.Closer).
func (f *Fluidity) Close() error {
	f.follow.Close()
	return nil
}

func toAny(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// listNodes reads the cluster's nodes with their pods and descriptions.
func listNodes(ctx context.Context, c client.Reader) ([]placement.Node, error) {
	var nl corev1.NodeList
	if err := c.List(ctx, &nl, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var pl corev1.PodList
	if err := c.List(ctx, &pl, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	descs := map[string]*mlsysopsv1.MLSysOpsNodeSpec{}
	var ml mlsysopsv1.MLSysOpsNodeList
	if err := c.List(ctx, &ml, client.InNamespace(mlsysopsv1.Namespace), client.UnsafeDisableDeepCopy); err == nil {
		for i := range ml.Items {
			descs[ml.Items[i].Name] = &ml.Items[i].Spec
		}
	}
	out := placement.NodesWithPods(nl.Items, pl.Items)
	for i := range out {
		out[i].Description = descs[out[i].Name()]
	}
	return out, nil
}

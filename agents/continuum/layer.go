package continuum

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/agents/internal/backends"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// continuumLayer is the continuum agent: the MLSysOps API and placement in
// Karmada, the cluster agents' registration and the registry.
type continuumLayer struct {
	a     *agent.Agent
	desc  *mlsysopsv1.MLSysOpsContinuum
	kcfg  *rest.Config
	kc    client.Client
	store *state.Store
	// self is the continuum agent's own registry entry.
	self state.Agent

	mu       sync.Mutex
	apiReady bool
	viewDone bool
	trigger  chan struct{}

	// grace says which clusters' agents are gone past the grace period:
	// their applications are placed elsewhere.
	grace *agent.GraceTracker
	// reports are the cluster agents' latest capacity reports.
	reports *Reports
	// statuses are the cluster agents' latest application status
	// reports, ahead of Karmada's reflection of them.
	statuses *MemberStatuses
	// resync asks the running placement controller to reconcile every
	// application (nil while it is not running); passes says what its
	// last successful pass over each application read.
	resync func()
	passes func() map[string]string
	// cache is the running placement controller's cache of Karmada
	// (nil while it is not running).
	cache client.Reader
}

var _ agent.Layer = (*continuumLayer)(nil)

func init() { agent.RegisterLayer(agentconfig.LayerContinuum, newContinuumLayer) }

func newContinuumLayer(_ context.Context, a *agent.Agent, env agentconfig.LookupEnv) (agent.Layer, error) {
	desc, err := description.ContinuumFor(a.Conn.Descriptions, a.Name)
	if err != nil {
		return nil, fmt.Errorf("continuum %s has no valid description in %s (want continuum/%s.yaml with an MLSysOpsContinuum): %w",
			a.Name, a.Conn.Descriptions, a.Name, err)
	}
	kcfg, err := kube.RESTConfig(a.Conn.KarmadaKubeconfig, a.Conn.KarmadaContext)
	if err != nil {
		return nil, fmt.Errorf("karmada kubeconfig: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	kc, err := client.New(kcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("karmada client: %w", err)
	}
	store, err := backends.Store(a, env)
	if err != nil {
		return nil, err
	}
	self := state.Agent{JID: a.JID, Layer: string(agentconfig.LayerContinuum), Node: a.Name, Version: agent.Version}
	agent.AcceptChildren(a, store.Agents(), self)
	c := &continuumLayer{a: a, desc: desc, kcfg: kcfg, kc: kc, store: store, self: self, trigger: make(chan struct{}, 1),
		// A report is trusted for three of the cluster agents' intervals.
		reports: NewReports(3 * a.Conn.CapacityReportInterval), statuses: NewMemberStatuses(MemberStatusTTL)}
	c.grace = agent.NewGraceTracker(a.Conn.ChildGracePeriod, desc.Spec.Clusters, c.clustersGoneChanged)
	return c, nil
}

// clustersGoneChanged runs when a cluster agent passes its grace period or
// comes back: the placement controller re-places what ran there.
func (c *continuumLayer) clustersGoneChanged() {
	c.a.Log.Info("clusters whose agents are gone changed", "gone", c.grace.GoneList())
	c.mu.Lock()
	resync := c.resync
	c.mu.Unlock()
	if resync != nil {
		resync()
	}
}

// clusterOf returns the cluster a cluster agent's JID names.
func (c *continuumLayer) clusterOf(jid string) (string, bool) {
	for _, cl := range c.desc.Spec.Clusters {
		if agent.AgentJID(agentconfig.LayerCluster, cl, c.a.Domain) == jid {
			return cl, true
		}
	}
	return "", false
}

// DescriptionChanged restarts the agent: its description names its
// children, which its messaging and controllers are built with. It comes
// back with the new one and rebuilds its view from the Kubernetes objects,
// Redis and its children.
func (c *continuumLayer) DescriptionChanged(context.Context) error {
	if _, err := description.ContinuumFor(c.a.Conn.Descriptions, c.a.Name); err != nil {
		c.a.Log.Warn("changed descriptions refused; keeping the loaded one", "err", err)
		return nil
	}
	return agent.RestartFor("(continuum description)")
}

func (c *continuumLayer) ChildLayer() messaging.Layer { return messaging.LayerCluster }

func (c *continuumLayer) Children() []string {
	out := make([]string, 0, len(c.desc.Spec.Clusters))
	for _, cl := range c.desc.Spec.Clusters {
		out = append(out, agent.AgentJID(agentconfig.LayerCluster, cl, c.a.Domain))
	}
	sort.Strings(out)
	return out
}

func (c *continuumLayer) SystemDescription() map[string]any {
	return agent.SystemDescription(mlsysopsv1.KindContinuum, c.desc.Name, c.desc.Spec)
}

func (c *continuumLayer) Mechanisms(a *agent.Agent) (*mechanism.Set, error) {
	r := mechanism.NewRegistry()
	if err := r.Register(ClusterPlacementName, func(env mechanism.Env) (mechanism.Mechanism, error) {
		return c.newClusterPlacement(env)
	}); err != nil {
		return nil, err
	}
	return r.Build(a.Opts.EnabledMechanisms(), mechanism.Env{Logger: a.Log, Node: a.Name, Permissions: mechanism.AllowAll()})
}

func (c *continuumLayer) Setup(a *agent.Agent) error {
	messaging.HandleFunc(a.Msg, c.handleCapacity)
	messaging.HandleFunc(a.Msg, c.handleApplicationMetrics)
	messaging.HandleFunc(a.Msg, c.handleApplicationStatus)
	return nil
}

func (c *continuumLayer) Registered(context.Context) {}

func (c *continuumLayer) ChildRegistered(_ context.Context, jid string, _ *messaging.Subscribe) {
	if cl, ok := c.clusterOf(jid); ok {
		c.grace.Set(cl, true, time.Now())
	}
}

func (c *continuumLayer) Peer(_ context.Context, ev messaging.PeerEvent) {
	if ev.Role != messaging.RoleChild {
		return
	}
	if cl, ok := c.clusterOf(ev.Peer); ok {
		c.grace.Set(cl, ev.Online, ev.Time)
	}
}

// newClusterPlacement builds the clusterPlacement mechanism on the Karmada
// API (kc reads without a cache). It judges plans with what the placement
// controller uses: the cluster agents' capacity reports and the clusters
// whose agents are gone.
func (c *continuumLayer) newClusterPlacement(env mechanism.Env) (*ClusterPlacement, error) {
	capacity, err := NewProxyCapacity(c.kcfg)
	if err != nil {
		return nil, err
	}
	capacity.Reports = c.reports
	return NewClusterPlacement(c.kc, capacity, env.Logger, ClusterPlacementOptions{
		Complete: env.Complete, Timeout: mechanism.FollowTimeout(c.a.Opts.PendingTimeout), Unavailable: c.grace.Unavailable,
		Works: c.a.Conn.Propagation == agent.PropagationWork,
		Cache: func() client.Reader {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.cache
		},
	}), nil
}

// handleCapacity keeps a cluster agent's capacity report for placement.
func (c *continuumLayer) handleCapacity(_ context.Context, env *messaging.Envelope, m *messaging.CapacityReport) (messaging.Message, error) {
	cl, ok := c.clusterOf(env.From)
	if !ok || cl != m.Cluster {
		c.a.Log.Warn("capacity report rejected: sender is not that cluster's agent", "cluster", m.Cluster, "peer", env.From)
		return nil, fmt.Errorf("capacity report for %s from %s", m.Cluster, env.From)
	}
	if err := c.reports.Put(m); err != nil {
		c.a.Log.Warn("capacity report rejected", "cluster", m.Cluster, "err", err)
		return nil, err
	}
	return nil, nil
}

// handleApplicationStatus keeps a cluster agent's report of an
// application's status in its cluster, for the placement controller to
// use until Karmada reflects the same status.
func (c *continuumLayer) handleApplicationStatus(_ context.Context, env *messaging.Envelope, m *messaging.ApplicationStatusReport) (messaging.Message, error) {
	cl, ok := c.clusterOf(env.From)
	if !ok || cl != m.Cluster {
		c.a.Log.Warn("application status report rejected: sender is not that cluster's agent", "cluster", m.Cluster, "app", m.Application, "peer", env.From)
		return nil, fmt.Errorf("status of %s in %s from %s", m.Application, m.Cluster, env.From)
	}
	if !c.statuses.Put(m) {
		c.a.Log.Debug("application status report older than the one held", "cluster", m.Cluster, "app", m.Application)
	}
	return nil, nil
}

// handleApplicationMetrics keeps the application series a cluster's node
// scraped in the continuum's telemetry, labelled with the cluster and the
// node, so that continuum policies see how applications perform
// (telemetry.select("demo_server_latency_seconds", labels={"app": ...})).
func (c *continuumLayer) handleApplicationMetrics(_ context.Context, env *messaging.Envelope, m *messaging.ApplicationMetrics) (messaging.Message, error) {
	cl, ok := c.clusterOf(env.From)
	if !ok || cl != m.Cluster {
		c.a.Log.Warn("application metrics rejected: sender is not that cluster's agent", "cluster", m.Cluster, "peer", env.From)
		return nil, fmt.Errorf("application metrics of %s from %s", m.Cluster, env.From)
	}
	readings := make([]telemetry.Reading, 0, len(m.Series))
	for _, s := range m.Series {
		l := telemetry.Labels{}
		for k, v := range s.Labels {
			l[k] = v
		}
		l["cluster"], l[telemetry.LabelNode] = m.Cluster, m.Node
		readings = append(readings, telemetry.Reading{Name: s.Name, Labels: l, Value: s.Value})
	}
	c.a.Sampler.Store().Append(m.Time, readings)
	return nil, nil
}

func (c *continuumLayer) Ready(ctx context.Context) error {
	return backends.Ready(ctx, c.store, c.kcfg, "karmada API")
}

func (c *continuumLayer) Status() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	reports := map[string]any{}
	for name, r := range c.reports.Latest() {
		reports[name] = map[string]any{"received": r.Received.UTC().Format(time.RFC3339), "fresh": r.Fresh,
			"ready_nodes": r.Report.ReadyNodes, "nodes_listed": len(r.Report.Nodes), "gpus": r.Report.GPUs}
	}
	var passes map[string]string
	if c.passes != nil {
		passes = c.passes()
	}
	held, accepted, used := c.statuses.Counts()
	return map[string]any{"karmada_api_ready": c.apiReady, "continuum_view_written": c.viewDone, "clusters": c.desc.Spec.Clusters,
		"clusters_gone": c.grace.GoneList(), "capacity_reports": reports, "reconciled": passes,
		"status_reports": map[string]any{"held": held, "accepted": accepted, "used": used}}
}

// run ensures the MLSysOps API in Karmada, runs the placement controller
// and keeps the MLSysOpsContinuum view, retrying while Karmada is away.
func (c *continuumLayer) Run(ctx context.Context) error {
	// The continuum is an agent of the registry too, so that tools can
	// ping it and set its mode.
	if err := c.store.Agents().Register(ctx, c.self); err == nil {
		_ = c.store.Agents().SetLiveness(ctx, c.a.JID, true, time.Now())
	}
	go c.grace.Run(ctx)
	backoff := time.Second
	for ctx.Err() == nil {
		err := c.start(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.a.Log.Warn("karmada side stopped; retrying", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
	return nil
}

func (c *continuumLayer) start(ctx context.Context) error {
	var ctrls *Controllers
	var err error
	if c.a.Conn.PlacementControllers {
		var capacity *ProxyCapacity
		if capacity, err = NewProxyCapacity(c.kcfg); err == nil {
			capacity.Reports = c.reports
			ctrls, err = NewControllersWith(ctx, c.kcfg, c.a.Log,
				ControllersOptions{Capacity: capacity, CheckAPIOnly: !c.a.Conn.InstallAPI, Reported: c.statuses,
					Works: c.a.Conn.Propagation == agent.PropagationWork})
		}
	} else if c.a.Conn.InstallAPI {
		err = EnsureAPIFor(ctx, c.kcfg, c.a.Conn.Propagation == agent.PropagationWork)
	} else {
		err = CheckAPI(ctx, c.kcfg)
	}
	if err != nil {
		return fmt.Errorf("MLSysOps API in Karmada: %w", err)
	}
	c.mu.Lock()
	c.apiReady = true
	c.mu.Unlock()
	c.a.Log.Info("MLSysOps API ready in Karmada", "placement_controllers", ctrls != nil)
	if err := c.upsertView(ctx); err != nil {
		return fmt.Errorf("MLSysOpsContinuum view: %w", err)
	}
	c.mu.Lock()
	c.viewDone = true
	c.mu.Unlock()
	if ctrls == nil {
		<-ctx.Done()
		return nil
	}
	// Submissions from the northbound API (applications and ML
	// deployments) become MLSysOpsApps; their status goes back to Redis.
	ctrls.Apps.Status = RedisStatus{Apps: c.store.Applications(), ML: c.store.MLDeployments()}
	ctrls.Apps.Unavailable = c.grace.Unavailable
	c.mu.Lock()
	c.resync, c.passes, c.cache = ctrls.Apps.Resync, ctrls.Apps.Passes, ctrls.Client()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.resync, c.passes, c.cache = nil, nil, nil
		c.mu.Unlock()
	}()
	ctrls.Apps.FeedEngine(c.a.Engine)
	apps, err := NewIntake(ctx, c.store, ctrls.Client(), c.a.Name, c.a.Log)
	if err != nil {
		return fmt.Errorf("application submission intake: %w", err)
	}
	ml, err := NewMLIntake(ctx, c.store, ctrls.Client(), c.a.Name, c.a.Log)
	if err != nil {
		return fmt.Errorf("ML deployment submission intake: %w", err)
	}
	apps.Live, ml.Live = ctrls.APIReader(), ctrls.APIReader()
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, intake := range []*Intake{apps, ml} {
		go func() {
			if err := intake.Run(ictx); err != nil && ictx.Err() == nil {
				c.a.Log.Warn("submission intake stopped", "err", err)
			}
		}()
	}
	return ctrls.Start(ctx)
}

// upsertView writes the MLSysOpsContinuum CR in Karmada. It stays in the
// Karmada API: the CRD propagation carries the CRDs, not this object.
func (c *continuumLayer) upsertView(ctx context.Context) error {
	obj := &mlsysopsv1.MLSysOpsContinuum{ObjectMeta: metav1.ObjectMeta{Name: c.desc.Name, Namespace: mlsysopsv1.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.kc, obj, func() error {
		obj.Spec = c.desc.Spec
		return nil
	}); err != nil {
		return err
	}
	conds, phase := kube.AgentReady(true, obj.Generation)
	for _, cnd := range conds {
		meta.SetStatusCondition(&obj.Status.Conditions, cnd)
	}
	obj.Status.Phase, obj.Status.ObservedGeneration = phase, obj.Generation
	if err := c.kc.Status().Update(ctx, obj); err != nil {
		return err
	}
	c.a.Log.Info("MLSysOpsContinuum written", "namespace", mlsysopsv1.Namespace, "name", c.desc.Name)
	return nil
}

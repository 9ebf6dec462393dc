package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/agents/internal/backends"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state"
)

// clusterLayer is the cluster agent: its nodes' registration, descriptions
// and telemetry, the fluidity controllers and mechanism.
type clusterLayer struct {
	a     *agent.Agent
	desc  *mlsysopsv1.MLSysOpsCluster
	kcfg  *rest.Config
	kc    client.Client
	cs    kubernetes.Interface
	store *state.Store

	mu           sync.Mutex
	nodes        map[string]*nodeRecord // by node name
	clusterDirty bool
	sentInterval time.Duration
	trigger      chan struct{}
	// nsMade: the application namespace was made (syncCRs's goroutine only).
	nsMade bool

	// grace says which described nodes' agents are gone past the grace
	// period: the fluidity controller moves their components.
	grace    *agent.GraceTracker
	capacity *capacityReporter
	// events records the fluidity mechanism's events in the member
	// cluster.
	events      record.EventRecorder
	broadcaster record.EventBroadcaster
	// resync asks the running fluidity controllers to reconcile every
	// application (nil while they are not running); passes says what
	// their last successful pass over each application read.
	resyncMu sync.Mutex
	resync   func()
	passes   func() map[string]string
	// cached reads the running controllers' caches (nil while they are
	// not running).
	cached client.Reader
}

var _ agent.Layer = (*clusterLayer)(nil)

// EventSource is the component name of the cluster agent's Kubernetes
// events.
const EventSource = mlsysopsv1.EventSourceClusterAgent

func init() { agent.RegisterLayer(agentconfig.LayerCluster, newClusterLayer) }

func newClusterLayer(_ context.Context, a *agent.Agent, env agentconfig.LookupEnv) (agent.Layer, error) {
	desc, err := description.ClusterFor(a.Conn.Descriptions, a.Name)
	if err != nil {
		return nil, fmt.Errorf("cluster %s has no valid description in %s (want clusters/%s.yaml with an MLSysOpsCluster): %w",
			a.Name, a.Conn.Descriptions, a.Name, err)
	}
	if a.Conn.ContinuumName == "" {
		if a.Conn.ContinuumName, err = agent.ContinuumName(a.Conn.Descriptions); err != nil && a.Conn.Parent == "" {
			return nil, err
		}
	}
	a.Parent = agent.AgentJID(agentconfig.LayerContinuum, a.Conn.ContinuumName, a.Domain)
	kcfg, err := kube.RESTConfig(a.Conn.Kubeconfig, a.Conn.KubeContext)
	if err != nil {
		return nil, fmt.Errorf("member cluster kubeconfig: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	kc, err := client.New(kcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("member cluster client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(kube.Protobuf(kcfg))
	if err != nil {
		return nil, err
	}
	store, err := backends.Store(a, env)
	if err != nil {
		return nil, err
	}
	agent.AcceptChildren(a, store.Agents())
	c := &clusterLayer{a: a, desc: desc, kcfg: kcfg, kc: kc, cs: cs, store: store, nodes: map[string]*nodeRecord{}, clusterDirty: true, trigger: make(chan struct{}, 1)}
	for _, n := range desc.Spec.Nodes {
		c.nodes[n] = &nodeRecord{jid: agent.AgentJID(agentconfig.LayerNode, n, a.Domain), apps: map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec{}}
	}
	c.grace = agent.NewGraceTracker(a.Conn.ChildGracePeriod, desc.Spec.Nodes, c.nodesGoneChanged)
	c.broadcaster = record.NewBroadcaster()
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	c.events = c.broadcaster.NewRecorder(scheme, corev1.EventSource{Component: EventSource, Host: a.Name})
	c.capacity = newCapacityReporter(a, cs, a.Conn.CapacityReportInterval, !a.Conn.PlacementControllers)
	return c, nil
}

// DescriptionChanged restarts the agent: its description names its
// children and its parent, which its messaging and controllers are built
// with. It comes back with the new one and rebuilds its view from the
// Kubernetes objects, Redis and its children.
func (c *clusterLayer) DescriptionChanged(context.Context) error {
	if _, err := description.ClusterFor(c.a.Conn.Descriptions, c.a.Name); err != nil {
		c.a.Log.Warn("changed descriptions refused; keeping the loaded one", "err", err)
		return nil
	}
	return agent.RestartFor("(cluster description)")
}

func (c *clusterLayer) ChildLayer() messaging.Layer { return messaging.LayerNode }

func (c *clusterLayer) Children() []string {
	out := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n.jid)
	}
	sort.Strings(out)
	return out
}

func (c *clusterLayer) SystemDescription() map[string]any {
	return agent.SystemDescription(mlsysopsv1.KindCluster, c.desc.Name, c.desc.Spec)
}

func (c *clusterLayer) Mechanisms(a *agent.Agent) (*mechanism.Set, error) {
	r := mechanism.NewRegistry()
	if err := r.Register(FluidityName, func(env mechanism.Env) (mechanism.Mechanism, error) {
		return NewFluidity(c.kc, a.Name, env.Logger, FluidityOptions{
			Complete: env.Complete, Timeout: mechanism.FollowTimeout(a.Opts.PendingTimeout), Unavailable: c.grace.Unavailable,
			Events: c.events, Reader: c.cachedReader,
		}), nil
	}); err != nil {
		return nil, err
	}
	return r.Build(a.Opts.EnabledMechanisms(), mechanism.Env{Logger: a.Log, Node: a.Name, Permissions: mechanism.AllowAll()})
}

func (c *clusterLayer) Setup(a *agent.Agent) error {
	messaging.HandleFunc(a.Msg, c.handleDescription)
	messaging.HandleFunc(a.Msg, c.handleStateSync)
	messaging.HandleFunc(a.Msg, c.handleTelemetry)
	messaging.HandleFunc(a.Msg, c.handleTelemetryDeploy)
	messaging.HandleFunc(a.Msg, c.handlePlan)
	return nil
}

// registered sends a fresh capacity report to the (maybe restarted)
// continuum agent.
func (c *clusterLayer) Registered(context.Context) { c.capacity.poke() }

// nodesGoneChanged runs when a node agent passes its grace period or comes
// back: the fluidity controller re-places what ran there.
func (c *clusterLayer) nodesGoneChanged() {
	c.a.Log.Info("nodes whose agents are gone changed", "gone", c.grace.GoneList())
	c.resyncMu.Lock()
	resync := c.resync
	c.resyncMu.Unlock()
	if resync != nil {
		resync()
	}
}

func (c *clusterLayer) ChildRegistered(ctx context.Context, _ string, m *messaging.Subscribe) {
	c.mu.Lock()
	r := c.record(m.Name)
	r.online = true
	r.dirty = r.desc != nil
	c.mu.Unlock()
	c.grace.Set(m.Name, true, time.Now())
	c.resendTargets(ctx, m.Name)
	c.poke()
}

func (c *clusterLayer) Peer(_ context.Context, ev messaging.PeerEvent) {
	if ev.Role != messaging.RoleChild {
		return
	}
	c.mu.Lock()
	name, r := c.nodeOf(ev.Peer)
	if r != nil {
		r.online = ev.Online
		r.dirty = r.desc != nil
	}
	c.mu.Unlock()
	if r != nil {
		c.grace.Set(name, ev.Online, ev.Time)
	}
	c.poke()
}

func (c *clusterLayer) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

func (c *clusterLayer) Ready(ctx context.Context) error {
	return backends.Ready(ctx, c.store, c.kcfg, "kubernetes API")
}

func (c *clusterLayer) Status() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes := map[string]any{}
	for name, r := range c.nodes {
		apps := map[string][]string{}
		for app, comps := range r.apps {
			for comp := range comps {
				apps[app] = append(apps[app], comp)
			}
			sort.Strings(apps[app])
		}
		nodes[name] = map[string]any{"jid": r.jid, "online": r.online, "described": r.desc != nil,
			"interval_seconds": r.interval.Seconds(), "components": apps, "scrape_targets": len(r.targets)}
	}
	c.resyncMu.Lock()
	var passes map[string]string
	if c.passes != nil {
		passes = c.passes()
	}
	c.resyncMu.Unlock()
	return map[string]any{"nodes": nodes, "sent_interval_seconds": c.sentInterval.Seconds(),
		"nodes_gone": c.grace.GoneList(), "capacity": c.capacity.status(), "reconciled": passes}
}

// run keeps the CRs in step, the controllers running and the nodes'
// telemetry interval in line with the cluster's policies.
func (c *clusterLayer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if c.a.Conn.PlacementControllers {
		wg.Add(1)
		go func() { defer wg.Done(); c.runControllers(ctx) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); c.grace.Run(ctx) }()
	go func() { defer wg.Done(); c.capacity.run(ctx) }()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		c.syncCRs(ctx)
		c.syncInterval(ctx)
		select {
		case <-ctx.Done():
			wg.Wait()
			c.broadcaster.Shutdown()
			return nil
		case <-t.C:
		case <-c.trigger:
		}
	}
}

// cachedReader is the running controllers' cache reader, nil while they
// are not running.
func (c *clusterLayer) cachedReader() client.Reader {
	c.resyncMu.Lock()
	defer c.resyncMu.Unlock()
	return c.cached
}

func (c *clusterLayer) runControllers(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		ctrls, err := NewControllers(ctx, c.kcfg, c.a.Name, c.a.Log)
		if err == nil {
			ctrls.Targets.Changed = c.setTargets
			ctrls.Apps.Placed = c.placed
			ctrls.Apps.Updated = c.updated
			ctrls.Apps.StatusWritten = c.statusWritten
			ctrls.Apps.PendingSettle = c.a.Conn.PendingSettle
			ctrls.Apps.Unavailable = c.grace.Unavailable
			c.resyncMu.Lock()
			c.resync, c.passes, c.cached = ctrls.Apps.Resync, ctrls.Apps.Passes, ctrls.Reader()
			c.resyncMu.Unlock()
			ctrls.Apps.FeedEngine(c.a.Engine)
			toEngine := ctrls.Apps.AppGone
			ctrls.Apps.AppGone = func(ctx context.Context, app string) {
				toEngine(ctx, app)
				c.appGone(ctx, app)
			}
			detach := c.capacity.attach(&ctrls.Apps.feed)
			c.a.Log.Info("fluidity controllers started")
			err = ctrls.Start(ctx)
			detach()
			c.resyncMu.Lock()
			c.resync, c.passes, c.cached = nil, nil, nil
			c.resyncMu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		c.a.Log.Warn("fluidity controllers stopped; restarting", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

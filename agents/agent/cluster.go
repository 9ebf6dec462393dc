//go:build !nodeagent

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusteragent "github.com/mlsysops-go/mlsysops/agents/cluster"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/mape"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state"
)

// Namespace holds the MLSysOps description objects (MLSysOpsNode,
// MLSysOpsCluster, MLSysOpsContinuum) and the applications.
const Namespace = clusteragent.AppNamespace

// nodeRecord is what the cluster agent knows of one of its nodes.
type nodeRecord struct {
	jid      string
	desc     *mlsysopsv1.MLSysOpsNode // submitted description; nil until then
	online   bool
	dirty    bool                                              // the CR needs writing
	interval time.Duration                                     // the node's sampling interval
	apps     map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec // app -> component -> the spec it was last sent
}

// clusterLayer is the cluster agent: its nodes' registration, descriptions
// and telemetry, the fluidity controllers and mechanism.
type clusterLayer struct {
	a     *Agent
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

	// grace says which described nodes' agents are gone past the grace
	// period: the fluidity controller moves their components.
	grace    *graceTracker
	capacity *capacityReporter
	// resync asks the running fluidity controllers to reconcile every
	// application (nil while they are not running).
	resyncMu sync.Mutex
	resync   func()
}

var _ layer = (*clusterLayer)(nil)

func restConfigFrom(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

func newStore(a *Agent, env agentconfig.LookupEnv) (*state.Store, error) {
	pw, err := password(a.conn.RedisPasswordFile, env, "MLSYSOPS_REDIS_PASSWORD", "REDIS_PASSWORD")
	if err != nil {
		return nil, err
	}
	rdb, err := state.NewClient(state.Config{Addrs: []string{a.conn.RedisAddr}, Password: pw, DB: a.conn.RedisDB})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return state.New(rdb, state.Options{Prefix: a.conn.RedisPrefix, Logger: a.log}), nil
}

// backendsReady is the readiness of the cluster and continuum layers:
// Redis answers and so does the Kubernetes API they work on (what names
// it in the error).
func backendsReady(ctx context.Context, s *state.Store, cfg *rest.Config, what string) error {
	if err := s.Client().Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func init() { registerLayer(agentconfig.LayerCluster, newClusterLayer) }

func newClusterLayer(_ context.Context, a *Agent, env agentconfig.LookupEnv) (layer, error) {
	desc, err := description.ClusterFor(a.conn.Descriptions, a.name)
	if err != nil {
		return nil, fmt.Errorf("cluster %s has no valid description in %s (want clusters/%s.yaml with an MLSysOpsCluster): %w",
			a.name, a.conn.Descriptions, a.name, err)
	}
	if a.conn.ContinuumName == "" {
		if a.conn.ContinuumName, err = continuumName(a.conn.Descriptions); err != nil && a.conn.Parent == "" {
			return nil, err
		}
	}
	a.parent = AgentJID(agentconfig.LayerContinuum, a.conn.ContinuumName, a.domain)
	kcfg, err := restConfigFrom(a.conn.Kubeconfig, a.conn.KubeContext)
	if err != nil {
		return nil, fmt.Errorf("member cluster kubeconfig: %w", err)
	}
	scheme, err := clusteragent.Scheme()
	if err != nil {
		return nil, err
	}
	kc, err := client.New(kcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("member cluster client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, err
	}
	store, err := newStore(a, env)
	if err != nil {
		return nil, err
	}
	a.registry = store.Agents()
	c := &clusterLayer{a: a, desc: desc, kcfg: kcfg, kc: kc, cs: cs, store: store, nodes: map[string]*nodeRecord{}, clusterDirty: true, trigger: make(chan struct{}, 1)}
	for _, n := range desc.Spec.Nodes {
		c.nodes[n] = &nodeRecord{jid: AgentJID(agentconfig.LayerNode, n, a.domain), apps: map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec{}}
	}
	c.grace = newGraceTracker(a.conn.ChildGracePeriod, desc.Spec.Nodes, c.nodesGoneChanged)
	c.capacity = newCapacityReporter(a, cs, a.conn.CapacityReportInterval)
	return c, nil
}

// descriptionChanged restarts the agent: its description names its
// children (and, for a cluster, its parent), which its messaging and
// controllers are built with. It comes back with the new one and rebuilds
// its view from the Kubernetes objects, Redis and its children.
func (c *clusterLayer) descriptionChanged(context.Context) error {
	if _, err := description.ClusterFor(c.a.conn.Descriptions, c.a.name); err != nil {
		c.a.log.Warn("changed descriptions refused; keeping the loaded one", "err", err)
		return nil
	}
	return restartFor("(cluster description)")
}

func (c *clusterLayer) childLayer() messaging.Layer { return messaging.LayerNode }

func (c *clusterLayer) children() []string {
	out := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n.jid)
	}
	sort.Strings(out)
	return out
}

func (c *clusterLayer) systemDescription() map[string]any {
	spec := toMap(c.desc.Spec)
	if spec == nil {
		spec = map[string]any{}
	}
	spec["name"] = c.desc.Name
	return map[string]any{mlsysopsv1.KindCluster: spec}
}

func (c *clusterLayer) mechanisms(a *Agent) (*mechanism.Set, error) {
	r := mechanism.NewRegistry()
	if err := r.Register(FluidityName, func(env mechanism.Env) (mechanism.Mechanism, error) {
		return newFluidity(c.kc, a, env, c.grace.Unavailable), nil
	}); err != nil {
		return nil, err
	}
	return r.Build(a.opts.EnabledMechanisms(), mechanism.Env{Logger: a.log, Node: a.name, Permissions: mechanism.AllowAll()})
}

func (c *clusterLayer) setup(a *Agent) error {
	messaging.HandleFunc(a.msg, c.handleDescription)
	messaging.HandleFunc(a.msg, c.handleStateSync)
	messaging.HandleFunc(a.msg, c.handleTelemetry)
	messaging.HandleFunc(a.msg, c.handleTelemetryDeploy)
	messaging.HandleFunc(a.msg, c.handlePlan)
	return nil
}

// registered sends a fresh capacity report to the (maybe restarted)
// continuum agent.
func (c *clusterLayer) registered(context.Context) { c.capacity.poke() }

// nodesGoneChanged runs when a node agent passes its grace period or comes
// back: the fluidity controller re-places what ran there.
func (c *clusterLayer) nodesGoneChanged() {
	c.a.log.Info("nodes whose agents are gone changed", "gone", c.grace.goneList())
	c.resyncMu.Lock()
	resync := c.resync
	c.resyncMu.Unlock()
	if resync != nil {
		resync()
	}
}

func (c *clusterLayer) record(name string) *nodeRecord {
	r := c.nodes[name]
	if r == nil {
		r = &nodeRecord{jid: AgentJID(agentconfig.LayerNode, name, c.a.domain), apps: map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec{}}
		c.nodes[name] = r
	}
	return r
}

func (c *clusterLayer) nodeOf(jid string) (string, *nodeRecord) {
	for name, r := range c.nodes {
		if r.jid == jid {
			return name, r
		}
	}
	return "", nil
}

func (c *clusterLayer) childRegistered(_ context.Context, _ string, m *messaging.Subscribe) {
	c.mu.Lock()
	r := c.record(m.Name)
	r.online = true
	r.dirty = r.desc != nil
	c.mu.Unlock()
	c.grace.set(m.Name, true, time.Now())
	c.poke()
}

func (c *clusterLayer) peer(_ context.Context, ev messaging.PeerEvent) {
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
		c.grace.set(name, ev.Online, ev.Time)
	}
	c.poke()
}

func (c *clusterLayer) poke() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

func (c *clusterLayer) ready(ctx context.Context) error {
	return backendsReady(ctx, c.store, c.kcfg, "kubernetes API")
}

func (c *clusterLayer) status() map[string]any {
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
			"interval_seconds": r.interval.Seconds(), "components": apps}
	}
	return map[string]any{"nodes": nodes, "sent_interval_seconds": c.sentInterval.Seconds(),
		"nodes_gone": c.grace.goneList(), "capacity": c.capacity.status()}
}

// handleDescription keeps the node's description for its MLSysOpsNode CR.
func (c *clusterLayer) handleDescription(_ context.Context, env *messaging.Envelope, m *messaging.NodeDescriptionSubmitted) (messaging.Message, error) {
	obj, errs := description.Parse(m.Node+".json", m.Description)
	if len(errs) > 0 {
		c.a.log.Warn("node description rejected", "node", m.Node, "err", errs.ToAggregate())
		return nil, fmt.Errorf("description of %s: %w", m.Node, errs.ToAggregate())
	}
	nd, ok := obj.(*mlsysopsv1.MLSysOpsNode)
	if !ok {
		return nil, fmt.Errorf("description of %s: want an MLSysOpsNode, got %s", m.Node, description.KindOf(obj))
	}
	if nd.Name != m.Node || AgentJID(agentconfig.LayerNode, m.Node, c.a.domain) != env.From {
		c.a.log.Warn("node description rejected: sender and name differ", "node", m.Node, "peer", env.From)
		return nil, fmt.Errorf("description of %s sent by %s", nd.Name, env.From)
	}
	if nd.Spec.ClusterID != c.a.name {
		return nil, fmt.Errorf("node %s belongs to cluster %q, not %s", nd.Name, nd.Spec.ClusterID, c.a.name)
	}
	c.mu.Lock()
	r := c.record(m.Node)
	r.desc, r.dirty, r.online = nd, true, true
	c.mu.Unlock()
	c.a.log.Info("node description received", "node", m.Node)
	c.poke()
	return nil, nil
}

func (c *clusterLayer) handleStateSync(_ context.Context, env *messaging.Envelope, m *messaging.NodeStateSync) (messaging.Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, r := c.nodeOf(env.From)
	if r == nil || name != m.Node {
		return nil, fmt.Errorf("node_state_sync for %s from %s", m.Node, env.From)
	}
	out := &messaging.NodeState{Node: name, Applications: map[string]messaging.NodeApplication{}}
	for app, comps := range r.apps {
		na := messaging.NodeApplication{Name: app, Components: map[string]json.RawMessage{}}
		var merged *mlsysopsv1.MLSysOpsAppSpec
		for _, comp := range slices.Sorted(maps.Keys(comps)) {
			na.Components[comp] = json.RawMessage(`{}`)
			if merged == nil {
				merged = comps[comp].DeepCopy()
				merged.Components = nil
			}
			merged.Components = append(merged.Components, comps[comp].Components...)
		}
		na.Spec = mustJSON(merged)
		out.Applications[app] = na
	}
	return out, nil
}

// handleTelemetry keeps the node's latest sample in Redis, for a few of its
// intervals.
func (c *clusterLayer) handleTelemetry(ctx context.Context, env *messaging.Envelope, m *messaging.TelemetryReport) (messaging.Message, error) {
	c.mu.Lock()
	name, r := c.nodeOf(env.From)
	ttl := 15 * time.Second
	if r != nil && 3*r.interval > ttl {
		ttl = 3 * r.interval
	}
	c.mu.Unlock()
	if r == nil || name != m.Node {
		c.a.log.Warn("telemetry report dropped: sender is not that node", "node", m.Node, "peer", env.From)
		return nil, nil
	}
	if err := c.store.Telemetry().Put(ctx, state.Sample{Node: m.Node, Time: m.Time, Metrics: m.Metrics}, ttl); err != nil {
		c.a.log.Warn("telemetry not stored", "node", m.Node, "err", err)
	}
	return nil, nil
}

// handleTelemetryDeploy records the node's interval; when it differs from
// the cluster's, the node is told the cluster's (upstream otel_deploy).
func (c *clusterLayer) handleTelemetryDeploy(ctx context.Context, env *messaging.Envelope, m *messaging.TelemetryDeploy) (messaging.Message, error) {
	d := time.Duration(m.IntervalSeconds * float64(time.Second))
	c.mu.Lock()
	name, r := c.nodeOf(env.From)
	if r != nil {
		r.interval = d
	}
	own := c.sentInterval
	c.mu.Unlock()
	if r == nil || name != m.Node {
		return nil, fmt.Errorf("otel_deploy for %s from %s", m.Node, env.From)
	}
	c.a.log.Info("node telemetry interval", "node", m.Node, "interval", d.String())
	if own > 0 && own != d {
		if _, err := c.a.msg.SendAsync(ctx, env.From, &messaging.TelemetryIntervalUpdate{Node: m.Node, IntervalSeconds: own.Seconds()}); err != nil {
			c.a.log.Warn("interval update not sent", "node", m.Node, "err", err)
		}
	}
	return nil, nil
}

// handlePlan queues a node's fluidity plan and reports its outcome back.
func (c *clusterLayer) handlePlan(ctx context.Context, env *messaging.Envelope, m *messaging.PlanSubmitted) (messaging.Message, error) {
	reply := func(status, msg string) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.a.msg.Send(sctx, env.From, &messaging.PlanExecuted{PlanUID: m.PlanUID, Status: status, Message: msg}); err != nil {
			c.a.log.Warn("plan result not delivered", "plan", m.PlanUID, "node", m.Node, "err", err)
		}
	}
	var cmd map[string]any
	if err := json.Unmarshal(m.Plan, &cmd); err != nil {
		go reply(messaging.PlanFailed, "plan is not a JSON object: "+err.Error())
		return nil, nil
	}
	mech := m.Mechanism
	if mech == "" {
		mech = FluidityName
	}
	// The plan is queued as a global one (the command names the
	// application): as one of the application's plans the scheduler would
	// discard it while the application is not known here yet or another of
	// its plans is pending, and a node's plan should be tried instead.
	id, err := c.a.engine.Submit("node:"+m.Node, "", false, map[string]any{mech: cmd})
	if err != nil {
		go reply(messaging.PlanFailed, err.Error())
		return nil, nil
	}
	c.a.log.Info("plan from node queued", "plan", id, "node_plan", m.PlanUID, "node", m.Node, "app", m.Application)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rec, ok := c.a.engine.Plan(id)
			if !ok || !rec.State.Final() {
				continue
			}
			switch rec.State {
			case mape.StateCompleted:
				reply(messaging.PlanCompleted, "")
			default:
				reason := rec.Reason
				if o, ok := rec.Mechanisms[mech]; ok && o.Error != "" {
					reason = o.Error
				}
				reply(messaging.PlanFailed, fmt.Sprintf("%s: %s", rec.State, reason))
			}
			return
		}
	}()
	return nil, nil
}

// placed is the fluidity controller's Placed hook: the nodes that now run
// a component are told, and those that no longer do learn it is gone.
func (c *clusterLayer) placed(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, nodes []string) {
	c.tellNodes(ctx, app, comp, nodes, false)
}

// updated is the fluidity controller's Updated hook: the nodes that run a
// component whose spec changed get application_component_updated.
func (c *clusterLayer) updated(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, nodes []string) {
	c.tellNodes(ctx, app, comp, nodes, true)
}

// tellNodes sends the nodes that run the component its spec (placed, or
// updated when update is set) and the nodes that ran it its removal.
func (c *clusterLayer) tellNodes(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, nodes []string, update bool) {
	name := comp.Metadata.Name
	spec := componentSpec(app, comp)
	raw := mustJSON(spec)
	var out []componentMessage
	c.mu.Lock()
	for node, r := range c.nodes {
		_, has := r.apps[app.Name][name]
		want := slices.Contains(nodes, node)
		switch {
		case want:
			if r.apps[app.Name] == nil {
				r.apps[app.Name] = map[string]*mlsysopsv1.MLSysOpsAppSpec{}
			}
			r.apps[app.Name][name] = spec
			placed := messaging.ComponentPlaced{Name: app.Name, ComponentName: name, Node: node, Spec: raw}
			var msg messaging.Message = &placed
			if update {
				msg = (*messaging.ComponentUpdated)(&placed)
			}
			out = append(out, componentMessage{r.jid, name, msg})
		case has:
			delete(r.apps[app.Name], name)
			if len(r.apps[app.Name]) == 0 {
				delete(r.apps, app.Name)
			}
			out = append(out, componentMessage{r.jid, name, &messaging.ComponentRemoved{Name: app.Name, ComponentName: name, Node: node}})
		}
	}
	c.mu.Unlock()
	c.sendComponentMessages(ctx, app.Name, out)
}

// componentMessage is a message about a component for a node agent.
type componentMessage struct {
	jid, comp string
	msg       messaging.Message
}

func (c *clusterLayer) sendComponentMessages(ctx context.Context, app string, out []componentMessage) {
	for _, m := range out {
		c.a.log.Info("telling node about component", "app", app, "component", m.comp, "peer", m.jid, "type", string(m.msg.MessageType()))
		if _, err := c.a.msg.SendAsync(ctx, m.jid, m.msg); err != nil {
			c.a.log.Warn("component message not queued", "app", app, "component", m.comp, "peer", m.jid, "err", err)
		}
	}
}

// appGone tells the nodes that ran components of a deleted application
// that they are gone (upstream sends application_component_removed for
// each).
func (c *clusterLayer) appGone(ctx context.Context, app string) {
	var out []componentMessage
	c.mu.Lock()
	for node, r := range c.nodes {
		for comp := range r.apps[app] {
			out = append(out, componentMessage{r.jid, comp, &messaging.ComponentRemoved{Name: app, ComponentName: comp, Node: node}})
		}
		delete(r.apps, app)
	}
	c.mu.Unlock()
	c.sendComponentMessages(ctx, app, out)
}

// componentSpec is the spec a node agent gets with a component: the
// application's spec filtered to that component, as it runs (upstream
// sends the application spec filtered to the node's components).
func componentSpec(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component) *mlsysopsv1.MLSysOpsAppSpec {
	spec := app.Spec.DeepCopy()
	spec.Name = app.Name
	spec.Components = []mlsysopsv1.Component{*comp.DeepCopy()}
	return spec
}

// mustJSON marshals an application spec (plain API types always marshal).
func mustJSON(spec *mlsysopsv1.MLSysOpsAppSpec) json.RawMessage {
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	return b
}

// run keeps the CRs in step, the controllers running and the nodes'
// telemetry interval in line with the cluster's policies.
func (c *clusterLayer) run(ctx context.Context) error {
	var wg sync.WaitGroup
	if c.a.conn.PlacementControllers {
		wg.Add(1)
		go func() { defer wg.Done(); c.runControllers(ctx) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); c.grace.run(ctx) }()
	go func() { defer wg.Done(); c.capacity.run(ctx) }()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		c.syncCRs(ctx)
		c.syncInterval(ctx)
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-t.C:
		case <-c.trigger:
		}
	}
}

func (c *clusterLayer) runControllers(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		ctrls, err := clusteragent.NewControllers(c.kcfg, c.a.name, c.a.log)
		if err == nil {
			ctrls.Apps.Placed = c.placed
			ctrls.Apps.Updated = c.updated
			ctrls.Apps.PendingSettle = c.a.conn.PendingSettle
			ctrls.Apps.Unavailable = c.grace.Unavailable
			c.resyncMu.Lock()
			c.resync = ctrls.Apps.Resync
			c.resyncMu.Unlock()
			ctrls.Apps.FeedEngine(c.a.engine)
			toEngine := ctrls.Apps.AppGone
			ctrls.Apps.AppGone = func(ctx context.Context, app string) {
				toEngine(ctx, app)
				c.appGone(ctx, app)
			}
			c.a.log.Info("fluidity controllers started")
			err = ctrls.Start(ctx)
			c.resyncMu.Lock()
			c.resync = nil
			c.resyncMu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		c.a.log.Warn("fluidity controllers stopped; restarting", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// syncCRs writes the MLSysOpsCluster CR and the MLSysOpsNode CRs of the
// nodes that changed. The CRDs come from the continuum agent (propagated by
// Karmada), so until they exist every write fails and is retried.
func (c *clusterLayer) syncCRs(ctx context.Context) {
	c.mu.Lock()
	clusterDirty := c.clusterDirty
	type job struct {
		desc   *mlsysopsv1.MLSysOpsNode
		online bool
		name   string
	}
	var jobs []job
	for name, r := range c.nodes {
		if r.dirty && r.desc != nil {
			jobs = append(jobs, job{r.desc.DeepCopy(), r.online, name})
		}
	}
	c.mu.Unlock()
	if !clusterDirty && len(jobs) == 0 {
		return
	}
	if err := kube.EnsureNamespace(ctx, c.cs, Namespace); err != nil {
		c.a.log.Warn("namespace not ready; retrying", "namespace", Namespace, "err", err)
		return
	}
	if clusterDirty {
		if err := c.upsertCluster(ctx); err != nil {
			c.logCRError("MLSysOpsCluster", c.a.name, err)
		} else {
			c.mu.Lock()
			c.clusterDirty = false
			c.mu.Unlock()
			c.a.log.Info("MLSysOpsCluster written", "namespace", Namespace)
		}
	}
	for _, j := range jobs {
		if err := c.upsertNode(ctx, j.desc, j.online); err != nil {
			c.logCRError("MLSysOpsNode", j.name, err)
			continue
		}
		c.mu.Lock()
		if r := c.nodes[j.name]; r != nil && r.online == j.online {
			r.dirty = false
		}
		c.mu.Unlock()
		c.a.log.Info("MLSysOpsNode written", "node", j.name, "online", j.online)
	}
}

func (c *clusterLayer) logCRError(kind, name string, err error) {
	if meta.IsNoMatchError(err) {
		c.a.log.Info("waiting for the MLSysOps CRDs (propagated by the continuum agent)", "kind", kind, "name", name)
		return
	}
	c.a.log.Warn("CR write failed; retrying", "kind", kind, "name", name, "err", err)
}

func readyCondition(online bool, gen int64) ([]metav1.Condition, mlsysopsv1.Phase) {
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AgentOnline", Message: "the agent is registered and alive", ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
	phase := mlsysopsv1.PhaseReady
	if !online {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "AgentOffline", "the agent stopped answering"
		phase = mlsysopsv1.PhaseNotReady
	}
	return []metav1.Condition{cond}, phase
}

func (c *clusterLayer) upsertNode(ctx context.Context, desc *mlsysopsv1.MLSysOpsNode, online bool) error {
	obj := &mlsysopsv1.MLSysOpsNode{ObjectMeta: metav1.ObjectMeta{Name: desc.Name, Namespace: Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.kc, obj, func() error {
		obj.Spec = desc.Spec
		if obj.Labels == nil {
			obj.Labels = map[string]string{}
		}
		obj.Labels[mlsysopsv1.LabelCluster] = c.a.name
		return nil
	}); err != nil {
		return err
	}
	conds, phase := readyCondition(online, obj.Generation)
	for _, cnd := range conds {
		meta.SetStatusCondition(&obj.Status.Conditions, cnd)
	}
	obj.Status.Phase, obj.Status.ObservedGeneration = phase, obj.Generation
	return c.kc.Status().Update(ctx, obj)
}

func (c *clusterLayer) upsertCluster(ctx context.Context) error {
	obj := &mlsysopsv1.MLSysOpsCluster{ObjectMeta: metav1.ObjectMeta{Name: c.desc.Name, Namespace: Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c.kc, obj, func() error {
		obj.Spec = c.desc.Spec
		return nil
	}); err != nil {
		return err
	}
	conds, phase := readyCondition(true, obj.Generation)
	for _, cnd := range conds {
		meta.SetStatusCondition(&obj.Status.Conditions, cnd)
	}
	obj.Status.Phase, obj.Status.ObservedGeneration = phase, obj.Generation
	if err := c.kc.Status().Update(ctx, obj); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// syncInterval sends the cluster's sampling interval (its policies may
// ask for a shorter one) to every online node when it changes.
func (c *clusterLayer) syncInterval(ctx context.Context) {
	cur := c.a.sampler.Interval()
	c.mu.Lock()
	if cur == c.sentInterval {
		c.mu.Unlock()
		return
	}
	first := c.sentInterval == 0
	c.sentInterval = cur
	var targets []string
	var names []string
	for name, r := range c.nodes {
		if r.online {
			targets = append(targets, r.jid)
			names = append(names, name)
		}
	}
	c.mu.Unlock()
	if first {
		return // nodes learn it when they report theirs
	}
	c.a.log.Info("cluster telemetry interval changed; telling the nodes", "interval", cur.String(), "nodes", len(targets))
	for i, j := range targets {
		if _, err := c.a.msg.SendAsync(ctx, j, &messaging.TelemetryIntervalUpdate{Node: names[i], IntervalSeconds: cur.Seconds()}); err != nil {
			c.a.log.Warn("interval update not queued", "node", names[i], "err", err)
		}
	}
}

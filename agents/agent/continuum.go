//go:build !nodeagent

package agent

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

	continuumagent "github.com/mlsysops-go/mlsysops/agents/continuum"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state"
)

// continuumLayer is the continuum agent: the MLSysOps API and placement in
// Karmada, the cluster agents' registration and the registry.
type continuumLayer struct {
	a     *Agent
	desc  *mlsysopsv1.MLSysOpsContinuum
	kcfg  *rest.Config
	kc    client.Client
	store *state.Store

	mu       sync.Mutex
	apiReady bool
	viewDone bool
	trigger  chan struct{}

	// grace says which clusters' agents are gone past the grace period:
	// their applications are placed elsewhere.
	grace *graceTracker
	// reports are the cluster agents' latest capacity reports.
	reports *continuumagent.Reports
	// resync asks the running placement controller to reconcile every
	// application (nil while it is not running).
	resync func()
}

var _ layer = (*continuumLayer)(nil)

func init() { registerLayer(agentconfig.LayerContinuum, newContinuumLayer) }

func newContinuumLayer(_ context.Context, a *Agent, env agentconfig.LookupEnv) (layer, error) {
	desc, err := description.ContinuumFor(a.conn.Descriptions, a.name)
	if err != nil {
		return nil, fmt.Errorf("continuum %s has no valid description in %s (want continuum/%s.yaml with an MLSysOpsContinuum): %w",
			a.name, a.conn.Descriptions, a.name, err)
	}
	kcfg, err := restConfigFrom(a.conn.KarmadaKubeconfig, a.conn.KarmadaContext)
	if err != nil {
		return nil, fmt.Errorf("karmada kubeconfig: %w", err)
	}
	scheme, err := continuumagent.Scheme()
	if err != nil {
		return nil, err
	}
	kc, err := client.New(kcfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("karmada client: %w", err)
	}
	store, err := newStore(a, env)
	if err != nil {
		return nil, err
	}
	a.registry = store.Agents()
	a.known[a.jid] = state.Agent{JID: a.jid, Layer: string(agentconfig.LayerContinuum), Node: a.name, Version: Version}
	c := &continuumLayer{a: a, desc: desc, kcfg: kcfg, kc: kc, store: store, trigger: make(chan struct{}, 1),
		// A report is trusted for three of the cluster agents' intervals.
		reports: continuumagent.NewReports(3 * a.conn.CapacityReportInterval)}
	c.grace = newGraceTracker(a.conn.ChildGracePeriod, desc.Spec.Clusters, c.clustersGoneChanged)
	return c, nil
}

// clustersGoneChanged runs when a cluster agent passes its grace period or
// comes back: the placement controller re-places what ran there.
func (c *continuumLayer) clustersGoneChanged() {
	c.a.log.Info("clusters whose agents are gone changed", "gone", c.grace.goneList())
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
		if AgentJID(agentconfig.LayerCluster, cl, c.a.domain) == jid {
			return cl, true
		}
	}
	return "", false
}

// descriptionChanged restarts the agent: its description names its
// children (and, for a cluster, its parent), which its messaging and
// controllers are built with. It comes back with the new one and rebuilds
// its view from the Kubernetes objects, Redis and its children.
func (c *continuumLayer) descriptionChanged(context.Context) error {
	if _, err := description.ContinuumFor(c.a.conn.Descriptions, c.a.name); err != nil {
		c.a.log.Warn("changed descriptions refused; keeping the loaded one", "err", err)
		return nil
	}
	return restartFor("(continuum description)")
}

func (c *continuumLayer) childLayer() messaging.Layer { return messaging.LayerCluster }

func (c *continuumLayer) children() []string {
	out := make([]string, 0, len(c.desc.Spec.Clusters))
	for _, cl := range c.desc.Spec.Clusters {
		out = append(out, AgentJID(agentconfig.LayerCluster, cl, c.a.domain))
	}
	sort.Strings(out)
	return out
}

func (c *continuumLayer) systemDescription() map[string]any {
	spec := toMap(c.desc.Spec)
	if spec == nil {
		spec = map[string]any{}
	}
	spec["name"] = c.desc.Name
	return map[string]any{mlsysopsv1.KindContinuum: spec}
}

func (c *continuumLayer) mechanisms(a *Agent) (*mechanism.Set, error) {
	r := mechanism.NewRegistry()
	if err := r.Register(ClusterPlacementName, func(env mechanism.Env) (mechanism.Mechanism, error) {
		return newClusterPlacement(c.kcfg, c.kc, a, env, c.reports, c.grace.Unavailable)
	}); err != nil {
		return nil, err
	}
	return r.Build(a.opts.EnabledMechanisms(), mechanism.Env{Logger: a.log, Node: a.name, Permissions: mechanism.AllowAll()})
}

func (c *continuumLayer) setup(a *Agent) error {
	messaging.HandleFunc(a.msg, c.handleCapacity)
	return nil
}

func (c *continuumLayer) registered(context.Context) {}

func (c *continuumLayer) childRegistered(_ context.Context, jid string, _ *messaging.Subscribe) {
	if cl, ok := c.clusterOf(jid); ok {
		c.grace.set(cl, true, time.Now())
	}
}

func (c *continuumLayer) peer(_ context.Context, ev messaging.PeerEvent) {
	if ev.Role != messaging.RoleChild {
		return
	}
	if cl, ok := c.clusterOf(ev.Peer); ok {
		c.grace.set(cl, ev.Online, ev.Time)
	}
}

// handleCapacity keeps a cluster agent's capacity report for placement.
func (c *continuumLayer) handleCapacity(_ context.Context, env *messaging.Envelope, m *messaging.CapacityReport) (messaging.Message, error) {
	cl, ok := c.clusterOf(env.From)
	if !ok || cl != m.Cluster {
		c.a.log.Warn("capacity report rejected: sender is not that cluster's agent", "cluster", m.Cluster, "peer", env.From)
		return nil, fmt.Errorf("capacity report for %s from %s", m.Cluster, env.From)
	}
	if err := c.reports.Put(m); err != nil {
		c.a.log.Warn("capacity report rejected", "cluster", m.Cluster, "err", err)
		return nil, err
	}
	return nil, nil
}

func (c *continuumLayer) ready(ctx context.Context) error {
	return backendsReady(ctx, c.store, c.kcfg, "karmada API")
}

func (c *continuumLayer) status() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	reports := map[string]any{}
	for name, r := range c.reports.Latest() {
		reports[name] = map[string]any{"received": r.Received.UTC().Format(time.RFC3339), "fresh": r.Fresh,
			"ready_nodes": r.Report.ReadyNodes, "nodes_listed": len(r.Report.Nodes), "gpus": r.Report.GPUs}
	}
	return map[string]any{"karmada_api_ready": c.apiReady, "continuum_view_written": c.viewDone, "clusters": c.desc.Spec.Clusters,
		"clusters_gone": c.grace.goneList(), "capacity_reports": reports}
}

// run ensures the MLSysOps API in Karmada, runs the placement controller
// and keeps the MLSysOpsContinuum view, retrying while Karmada is away.
func (c *continuumLayer) run(ctx context.Context) error {
	// The continuum is an agent of the registry too, so that tools can
	// ping it and set its mode.
	if err := c.store.Agents().Register(ctx, c.a.known[c.a.jid]); err == nil {
		_ = c.store.Agents().SetLiveness(ctx, c.a.jid, true, time.Now())
	}
	go c.grace.run(ctx)
	backoff := time.Second
	for ctx.Err() == nil {
		err := c.start(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.a.log.Warn("karmada side stopped; retrying", "err", err, "retry_in", backoff)
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
	var ctrls *continuumagent.Controllers
	var err error
	if c.a.conn.PlacementControllers {
		var capacity *continuumagent.ProxyCapacity
		if capacity, err = continuumagent.NewProxyCapacity(c.kcfg); err == nil {
			capacity.Reports = c.reports
			ctrls, err = continuumagent.NewControllersWith(ctx, c.kcfg, c.a.log,
				continuumagent.ControllersOptions{Capacity: capacity, CheckAPIOnly: !c.a.conn.InstallAPI})
		}
	} else if c.a.conn.InstallAPI {
		err = continuumagent.EnsureAPI(ctx, c.kcfg)
	} else {
		err = continuumagent.CheckAPI(ctx, c.kcfg)
	}
	if err != nil {
		return fmt.Errorf("MLSysOps API in Karmada: %w", err)
	}
	c.mu.Lock()
	c.apiReady = true
	c.mu.Unlock()
	c.a.log.Info("MLSysOps API ready in Karmada", "placement_controllers", ctrls != nil)
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
	ctrls.Apps.Status = continuumagent.RedisStatus{Apps: c.store.Applications(), ML: c.store.MLDeployments()}
	ctrls.Apps.Unavailable = c.grace.Unavailable
	c.mu.Lock()
	c.resync = ctrls.Apps.Resync
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.resync = nil
		c.mu.Unlock()
	}()
	ctrls.Apps.FeedEngine(c.a.engine)
	apps, err := continuumagent.NewIntake(ctx, c.store, ctrls.Client(), c.a.name, c.a.log)
	if err != nil {
		return fmt.Errorf("application submission intake: %w", err)
	}
	ml, err := continuumagent.NewMLIntake(ctx, c.store, ctrls.Client(), c.a.name, c.a.log)
	if err != nil {
		return fmt.Errorf("ML deployment submission intake: %w", err)
	}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, intake := range []*continuumagent.Intake{apps, ml} {
		go func() {
			if err := intake.Run(ictx); err != nil && ictx.Err() == nil {
				c.a.log.Warn("submission intake stopped", "err", err)
			}
		}()
	}
	return ctrls.Start(ctx)
}

// upsertView writes the MLSysOpsContinuum CR in Karmada. It stays in the
// Karmada API: the CRD propagation carries the CRDs, not this object.
func (c *continuumLayer) upsertView(ctx context.Context) error {
	obj := &mlsysopsv1.MLSysOpsContinuum{ObjectMeta: metav1.ObjectMeta{Name: c.desc.Name, Namespace: Namespace}}
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
	if err := c.kc.Status().Update(ctx, obj); err != nil {
		return err
	}
	c.a.log.Info("MLSysOpsContinuum written", "namespace", Namespace, "name", c.desc.Name)
	return nil
}

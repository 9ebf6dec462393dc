// Package node is the node agent's layer: telemetry of its host, the node
// mechanisms (fluidity_proxy, CPU frequency, GPU) and the components placed
// on it. It registers itself with agents/agent and needs none of the
// Kubernetes, Karmada or Redis clients, so the node-only build stays small.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/description/generic"
	"github.com/mlsysops-go/mlsysops/internal/mape"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// nodeMechanisms are enabled on nodes whose configuration names none: the
// proxy always, the hardware ones report themselves unavailable where the
// hardware is missing.
var nodeMechanisms = []string{mechanism.FluidityProxyName, mechanism.CPUFrequencyName, mechanism.GPUName}

// nodeLayer is the node agent: telemetry of its host, node mechanisms and
// the components placed on it.
type nodeLayer struct {
	a *agent.Agent
	// desc is the node's description, checked by the light loader of
	// description/generic: the node agent needs none of the Kubernetes API
	// types that package description decodes into.
	desc      *generic.Description
	cluster   string // desc's cluster_id
	collector *telemetry.NodeCollector

	// changing orders the changes of apps together with their hand-over
	// to the engine, so that the engine ends with the latest description
	// (the state sync's answer and the cluster's messages arrive on
	// different goroutines). It is taken before mu.
	changing sync.Mutex
	mu       sync.Mutex
	apps     map[string]map[string]messaging.ComponentPlaced // app -> component -> placement
	reported time.Duration                                   // interval last told to the cluster
}

var (
	_ agent.Layer         = (*nodeLayer)(nil)
	_ mechanism.Forwarder = (*nodeLayer)(nil)
)

func init() { agent.RegisterLayer(agentconfig.LayerNode, newNodeLayer) }

func newNodeLayer(_ context.Context, a *agent.Agent, _ agentconfig.LookupEnv) (agent.Layer, error) {
	desc, err := generic.LoadOwn(a.Conn.Descriptions, a.Name, generic.KindNode)
	if err != nil {
		return nil, fmt.Errorf("node %s has no valid description in %s (want nodes/%s.yaml with an MLSysOpsNode): %w",
			a.Name, a.Conn.Descriptions, a.Name, err)
	}
	cluster, _ := desc.Spec["cluster_id"].(string)
	if cluster == "" {
		return nil, fmt.Errorf("node description of %s: cluster_id is empty; it names the cluster agent to register with", a.Name)
	}
	if a.Conn.ContinuumName == "" {
		if cn, err := agent.ContinuumName(a.Conn.Descriptions); err == nil {
			a.Conn.ContinuumName = cn
		}
	}
	a.Parent = agent.AgentJID(agentconfig.LayerCluster, cluster, a.Domain)
	a.Cluster = cluster
	n := &nodeLayer{a: a, desc: desc, cluster: cluster, apps: map[string]map[string]messaging.ComponentPlaced{}}
	n.collector = telemetry.NewNodeCollector(telemetry.NodeOptions{ProcRoot: a.Opts.ProcfsRoot, SysRoot: a.Opts.SysfsRoot, NvidiaSMI: a.Opts.NvidiaSMI})
	sampler := telemetry.NewSampler(telemetry.SamplerOptions{Interval: a.Opts.MonitoringInterval, Logger: a.Log})
	sampler.AddSource(n.collector)
	a.Sampler = sampler
	if err := n.collector.Register(a.Metrics); err != nil {
		return nil, err
	}
	return n, nil
}

// DescriptionChanged applies a new description of this node: labels,
// hardware and the other fields go to the policies and, as the node's
// registration, to the cluster agent, which updates the MLSysOpsNode.
// A new cluster_id or new permitted_actions need a restart (a new parent,
// mechanisms built with other permissions). An invalid description is
// refused and the loaded one kept.
func (n *nodeLayer) DescriptionChanged(ctx context.Context) error {
	a := n.a
	desc, err := generic.LoadOwn(a.Conn.Descriptions, a.Name, generic.KindNode)
	if err != nil {
		a.Log.Warn("changed description refused; keeping the loaded one", "err", err)
		return nil
	}
	n.mu.Lock()
	old := n.desc
	n.mu.Unlock()
	if reflect.DeepEqual(old.Spec, desc.Spec) {
		return nil
	}
	if cl, _ := desc.Spec["cluster_id"].(string); cl != n.cluster {
		return agent.RestartFor(fmt.Sprintf("cluster_id from %q to %q", n.cluster, cl))
	}
	if !reflect.DeepEqual(old.Spec["permitted_actions"], desc.Spec["permitted_actions"]) {
		return agent.RestartFor("permitted_actions")
	}
	n.mu.Lock()
	n.desc = desc
	n.mu.Unlock()
	a.Engine.SetSystemDescription(n.SystemDescription())
	a.Log.Info("own description changed; applied", "file", desc.File)
	if a.Registered.Load() {
		n.sendDescription(ctx)
	}
	return nil
}

// sendDescription registers the node's description with its cluster.
func (n *nodeLayer) sendDescription(ctx context.Context) {
	a := n.a
	body, err := json.Marshal(n.SystemDescription())
	if err == nil {
		err = a.Msg.Send(ctx, a.Parent, &messaging.NodeDescriptionSubmitted{Node: a.Name, Description: body})
	}
	if err != nil {
		a.Log.Warn("description not delivered to the cluster", "cluster", n.cluster, "err", err)
	}
}

func (n *nodeLayer) ChildLayer() messaging.Layer { return "" }
func (n *nodeLayer) Children() []string          { return nil }

func (n *nodeLayer) SystemDescription() map[string]any {
	n.mu.Lock()
	desc := n.desc
	n.mu.Unlock()
	return agent.SystemDescription(generic.KindNode, desc.Name, desc.Spec)
}

func (n *nodeLayer) Mechanisms(a *agent.Agent) (*mechanism.Set, error) {
	enabled := a.Opts.Mechanisms
	if enabled == nil {
		enabled = nodeMechanisms
	}
	return mechanism.NewBuiltinRegistry().Build(enabled, mechanism.Env{
		Logger: a.Log, Node: a.Name, Permissions: mechanism.NewPermissions(n.permittedActions()),
		SysfsRoot: a.Opts.SysfsRoot, NvidiaSMI: a.Opts.NvidiaSMI, Forwarder: n,
	})
}

// permittedActions lists the description's permitted_actions.
func (n *nodeLayer) permittedActions() []string {
	list, _ := n.desc.Spec["permitted_actions"].([]interface{})
	out := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (n *nodeLayer) Setup(a *agent.Agent) error {
	messaging.HandleFunc(a.Msg, n.handlePlaced)
	messaging.HandleFunc(a.Msg, n.handleUpdated)
	messaging.HandleFunc(a.Msg, n.handleRemoved)
	messaging.HandleFunc(a.Msg, n.handlePlanExecuted)
	messaging.HandleFunc(a.Msg, n.handleInterval)
	return nil
}

// Forward implements mechanism.Forwarder: the plan goes to the cluster's
// fluidity mechanism; the outcome comes back as message_to_fluidity_proxy.
func (n *nodeLayer) Forward(ctx context.Context, planID string, command map[string]any) error {
	b, err := json.Marshal(command)
	if err != nil {
		return fmt.Errorf("encode plan %s: %w", planID, err)
	}
	app, _ := command["name"].(string)
	n.a.Log.Info("plan forwarded to the cluster", "plan", planID, "app", app, "cluster", n.cluster)
	return n.a.Msg.Send(ctx, n.a.Parent, &messaging.PlanSubmitted{PlanUID: planID, Node: n.a.Name, Application: app, Mechanism: "fluidity", Plan: b})
}

// registered sends the description, asks for the components already placed
// here and tells the cluster the telemetry interval.
func (n *nodeLayer) Registered(ctx context.Context) {
	a := n.a
	n.sendDescription(ctx)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, _, err := a.Msg.Request(rctx, a.Parent, &messaging.NodeStateSync{Node: a.Name})
	cancel()
	if err != nil {
		a.Log.Warn("node state sync failed", "cluster", n.cluster, "err", err)
	} else if st, ok := resp.(*messaging.NodeState); ok {
		for app, na := range st.Applications {
			for comp := range na.Components {
				// A placed or updated message handled while the answer
				// was on its way is at least as new: keep it.
				n.placeIfUnknown(ctx, messaging.ComponentPlaced{Name: app, ComponentName: comp, Node: a.Name, Spec: na.Spec, PodSpec: na.Components[comp]})
			}
		}
	}
	n.reportInterval(ctx, true)
}

func (n *nodeLayer) ChildRegistered(context.Context, string, *messaging.Subscribe) {}
func (n *nodeLayer) Peer(context.Context, messaging.PeerEvent)                     {}
func (n *nodeLayer) Ready(context.Context) error                                   { return nil }

func (n *nodeLayer) Status() map[string]any {
	n.mu.Lock()
	defer n.mu.Unlock()
	comps := map[string][]string{}
	for app, cs := range n.apps {
		for c := range cs {
			comps[app] = append(comps[app], c)
		}
		sort.Strings(comps[app])
	}
	return map[string]any{"cluster": n.cluster, "components": comps, "reported_interval_seconds": n.reported.Seconds()}
}

// run reports the latest telemetry to the cluster at the sampling interval.
func (n *nodeLayer) Run(ctx context.Context) error {
	var last time.Time
	for {
		d := n.a.Sampler.Interval()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		if !n.a.Registered.Load() {
			continue
		}
		n.reportInterval(ctx, false)
		snap := n.collector.Latest()
		if snap.Time.IsZero() || !snap.Time.After(last) {
			continue
		}
		last = snap.Time
		metrics := map[string]float64{}
		for _, r := range snap.Readings() {
			metrics[telemetry.Key(r.Name, r.Labels)] = r.Value
		}
		if err := n.a.Msg.Send(ctx, n.a.Parent, &messaging.TelemetryReport{Node: n.a.Name, Time: snap.Time, Metrics: metrics}); err != nil {
			n.a.Log.Debug("telemetry report not sent", "err", err)
		}
	}
}

// reportInterval tells the cluster the node's sampling interval when it
// changed (or always when force is set): the interval negotiated with the
// policies travels back up.
func (n *nodeLayer) reportInterval(ctx context.Context, force bool) {
	cur := n.a.Sampler.Interval()
	n.mu.Lock()
	changed := cur != n.reported
	n.reported = cur
	n.mu.Unlock()
	if !changed && !force {
		return
	}
	n.a.Log.Info("telemetry interval reported to the cluster", "interval", cur.String(), "cluster", n.cluster)
	if _, err := n.a.Msg.SendAsync(ctx, n.a.Parent, &messaging.TelemetryDeploy{Node: n.a.Name, IntervalSeconds: cur.Seconds()}); err != nil {
		n.a.Log.Warn("telemetry interval not sent", "err", err)
	}
}

func (n *nodeLayer) handlePlaced(ctx context.Context, _ *messaging.Envelope, m *messaging.ComponentPlaced) (messaging.Message, error) {
	n.a.Log.Info("component placed", "app", m.Name, "component", m.ComponentName)
	return nil, n.place(ctx, *m)
}

// handleUpdated takes the new spec of a component running here (after a
// change_spec): the application's policies see it from their next run.
func (n *nodeLayer) handleUpdated(ctx context.Context, _ *messaging.Envelope, m *messaging.ComponentUpdated) (messaging.Message, error) {
	n.a.Log.Info("component updated", "app", m.Name, "component", m.ComponentName)
	return nil, n.place(ctx, messaging.ComponentPlaced(*m))
}

// place records a component and (re)starts the application's policies.
func (n *nodeLayer) place(ctx context.Context, m messaging.ComponentPlaced) error {
	return n.record(ctx, m, true)
}

// placeIfUnknown is place for a component not recorded yet.
func (n *nodeLayer) placeIfUnknown(ctx context.Context, m messaging.ComponentPlaced) error {
	return n.record(ctx, m, false)
}

func (n *nodeLayer) record(ctx context.Context, m messaging.ComponentPlaced, replace bool) error {
	n.changing.Lock()
	defer n.changing.Unlock()
	n.mu.Lock()
	if _, known := n.apps[m.Name][m.ComponentName]; known && !replace {
		n.mu.Unlock()
		return nil
	}
	if n.apps[m.Name] == nil {
		n.apps[m.Name] = map[string]messaging.ComponentPlaced{}
	}
	n.apps[m.Name][m.ComponentName] = m
	desc := AppDescription(m.Name, n.apps[m.Name])
	n.mu.Unlock()
	return n.a.Engine.SetApplication(ctx, mape.Application{ID: m.Name, Description: desc})
}

// AppDescription is the node-layer application description upstream
// policies expect, {name, component_name, spec, pod_spec}, from the
// components of app placed here: every one is listed in components, and
// spec is the application spec with the spec of each of them as its own
// message last gave it. component_name and pod_spec are those of the
// first component by name.
func AppDescription(app string, placed map[string]messaging.ComponentPlaced) map[string]any {
	desc := map[string]any{"name": app}
	names := make([]string, 0, len(placed))
	for c := range placed {
		names = append(names, c)
	}
	sort.Strings(names)
	var spec map[string]any
	var comps []any
	for _, c := range names {
		var s map[string]any
		if len(placed[c].Spec) == 0 || json.Unmarshal(placed[c].Spec, &s) != nil {
			continue
		}
		if spec == nil {
			spec = s
		}
		list, _ := s["components"].([]any)
		for _, x := range list {
			if md, _ := x.(map[string]any)["metadata"].(map[string]any); md != nil && md["name"] == c {
				comps = append(comps, x)
			}
		}
	}
	if spec != nil {
		spec["components"] = comps
		desc["spec"] = spec
	}
	if len(names) > 0 {
		desc["component_name"] = names[0]
		var ps any
		if p := placed[names[0]].PodSpec; len(p) > 0 && json.Unmarshal(p, &ps) == nil {
			desc["pod_spec"] = ps
		}
	}
	list := make([]any, len(names))
	for i, c := range names {
		list[i] = c
	}
	desc["components"] = list
	return desc
}

func (n *nodeLayer) handleRemoved(ctx context.Context, _ *messaging.Envelope, m *messaging.ComponentRemoved) (messaging.Message, error) {
	n.changing.Lock()
	defer n.changing.Unlock()
	n.mu.Lock()
	delete(n.apps[m.Name], m.ComponentName)
	gone := len(n.apps[m.Name]) == 0
	var desc map[string]any
	if gone {
		delete(n.apps, m.Name)
	} else {
		desc = AppDescription(m.Name, n.apps[m.Name])
	}
	n.mu.Unlock()
	n.a.Log.Info("component removed", "app", m.Name, "component", m.ComponentName, "app_gone", gone)
	if gone {
		n.a.Engine.RemoveApplication(m.Name)
		return nil, nil
	}
	// The application's policies see the components left here.
	return nil, n.a.Engine.SetApplication(ctx, mape.Application{ID: m.Name, Description: desc})
}

func (n *nodeLayer) handlePlanExecuted(_ context.Context, _ *messaging.Envelope, m *messaging.PlanExecuted) (messaging.Message, error) {
	mech, ok := n.a.Mechs.Get(mechanism.FluidityProxyName)
	proxy, isProxy := mech.(*mechanism.FluidityProxy)
	if !ok || !isProxy {
		return nil, fmt.Errorf("plan %s executed, but fluidity_proxy is not enabled", m.PlanUID)
	}
	status := mechanism.StatusSuccess
	if m.Status != messaging.PlanCompleted {
		status = mechanism.StatusFailed
	}
	n.a.Log.Info("plan executed by the cluster", "plan", m.PlanUID, "status", m.Status, "message", m.Message)
	if err := proxy.Executed(m.PlanUID, status, m.Message); err != nil {
		n.a.Log.Warn("late or unknown plan result dropped", "plan", m.PlanUID, "err", err)
	}
	return nil, nil
}

// handleInterval takes the cluster's telemetry interval as one more request;
// the node samples at the smallest of its own, its policies' and the
// cluster's.
func (n *nodeLayer) handleInterval(ctx context.Context, env *messaging.Envelope, m *messaging.TelemetryIntervalUpdate) (messaging.Message, error) {
	d := time.Duration(m.IntervalSeconds * float64(time.Second))
	n.a.Log.Info("telemetry interval requested by the cluster", "interval", d.String(), "cluster", n.cluster)
	n.a.Sampler.RequestInterval("parent:"+env.From, d)
	n.reportInterval(ctx, false)
	return nil, nil
}

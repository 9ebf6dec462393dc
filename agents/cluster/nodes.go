package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/mape"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// nodeRecord is what the cluster agent knows of one of its nodes.
type nodeRecord struct {
	jid      string
	desc     *mlsysopsv1.MLSysOpsNode // submitted description; nil until then
	online   bool
	dirty    bool                                              // the CR needs writing
	interval time.Duration                                     // the node's sampling interval
	apps     map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec // app -> component -> the spec it was last sent
	// targets are the metrics endpoints of the pods on the node;
	// targetsSent once the node agent was told them.
	targets     []messaging.ScrapeTarget
	targetsSent bool
}

// reachable reports whether the node has an agent to tell about its
// components: one online now or heard from before (its description). A
// node whose agent never showed up (none runs there) is not sent
// messages that would wait for acknowledgements in vain; an agent that
// comes later asks for its components when it registers
// (node_state_sync), which r.apps answers.
func (r *nodeRecord) reachable() bool { return r.online || r.desc != nil }

func (c *clusterLayer) record(name string) *nodeRecord {
	r := c.nodes[name]
	if r == nil {
		r = &nodeRecord{jid: agent.AgentJID(agentconfig.LayerNode, name, c.a.Domain), apps: map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec{}}
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

// handleDescription keeps the node's description for its MLSysOpsNode CR.
func (c *clusterLayer) handleDescription(_ context.Context, env *messaging.Envelope, m *messaging.NodeDescriptionSubmitted) (messaging.Message, error) {
	obj, errs := description.Parse(m.Node+".json", m.Description)
	if len(errs) > 0 {
		c.a.Log.Warn("node description rejected", "node", m.Node, "err", errs.ToAggregate())
		return nil, fmt.Errorf("description of %s: %w", m.Node, errs.ToAggregate())
	}
	nd, ok := obj.(*mlsysopsv1.MLSysOpsNode)
	if !ok {
		return nil, fmt.Errorf("description of %s: want an MLSysOpsNode, got %s", m.Node, description.KindOf(obj))
	}
	if nd.Name != m.Node || agent.AgentJID(agentconfig.LayerNode, m.Node, c.a.Domain) != env.From {
		c.a.Log.Warn("node description rejected: sender and name differ", "node", m.Node, "peer", env.From)
		return nil, fmt.Errorf("description of %s sent by %s", nd.Name, env.From)
	}
	if nd.Spec.ClusterID != c.a.Name {
		return nil, fmt.Errorf("node %s belongs to cluster %q, not %s", nd.Name, nd.Spec.ClusterID, c.a.Name)
	}
	c.mu.Lock()
	r := c.record(m.Node)
	r.desc, r.dirty, r.online = nd, true, true
	c.mu.Unlock()
	c.a.Log.Info("node description received", "node", m.Node)
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
		c.a.Log.Warn("telemetry report dropped: sender is not that node", "node", m.Node, "peer", env.From)
		return nil, nil
	}
	if err := c.store.Telemetry().Put(ctx, state.Sample{Node: m.Node, Time: m.Time, Metrics: m.Metrics}, ttl); err != nil {
		c.a.Log.Warn("telemetry not stored", "node", m.Node, "err", err)
	}
	readings, apps := nodeReadings(m)
	// The cluster's policies see every node's series, labelled with it.
	c.a.Sampler.Store().Append(m.Time, readings)
	if len(apps) > 0 && c.a.Registered.Load() {
		rep := &messaging.ApplicationMetrics{Cluster: c.a.Name, Node: m.Node, Time: m.Time, Series: apps}
		if err := c.a.Msg.Send(ctx, c.a.Parent, rep); err != nil {
			c.a.Log.Debug("application metrics not forwarded", "node", m.Node, "err", err)
		}
	}
	return nil, nil
}

// nodeReadings turns a node's report into readings labelled with the
// node, and picks out the application series (those with app and
// component labels) for the continuum.
func nodeReadings(m *messaging.TelemetryReport) ([]telemetry.Reading, []messaging.MetricSeries) {
	readings := make([]telemetry.Reading, 0, len(m.Metrics))
	var apps []messaging.MetricSeries
	for _, key := range slices.Sorted(maps.Keys(m.Metrics)) {
		v := m.Metrics[key]
		name, labels, err := telemetry.ParseKey(key)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if labels[telemetry.LabelApp] != "" && labels[telemetry.LabelComponent] != "" {
			apps = append(apps, messaging.MetricSeries{Name: name, Labels: labels, Value: v})
		}
		l := make(telemetry.Labels, len(labels)+1)
		for k, lv := range labels {
			if k == telemetry.LabelNode {
				k = "exported_" + k
			}
			l[k] = lv
		}
		l[telemetry.LabelNode] = m.Node
		readings = append(readings, telemetry.Reading{Name: name, Labels: l, Value: v})
	}
	return readings, apps
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
	c.a.Log.Info("node telemetry interval", "node", m.Node, "interval", d.String())
	if own > 0 && own != d {
		if _, err := c.a.Msg.SendAsync(ctx, env.From, &messaging.TelemetryIntervalUpdate{Node: m.Node, IntervalSeconds: own.Seconds()}); err != nil {
			c.a.Log.Warn("interval update not sent", "node", m.Node, "err", err)
		}
	}
	return nil, nil
}

// syncInterval sends the cluster's sampling interval (its policies may
// ask for a shorter one) to every online node when it changes.
func (c *clusterLayer) syncInterval(ctx context.Context) {
	cur := c.a.Sampler.Interval()
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
	c.a.Log.Info("cluster telemetry interval changed; telling the nodes", "interval", cur.String(), "nodes", len(targets))
	for i, j := range targets {
		if _, err := c.a.Msg.SendAsync(ctx, j, &messaging.TelemetryIntervalUpdate{Node: names[i], IntervalSeconds: cur.Seconds()}); err != nil {
			c.a.Log.Warn("interval update not queued", "node", names[i], "err", err)
		}
	}
}

// handlePlan queues a node's fluidity plan and reports its outcome back.
func (c *clusterLayer) handlePlan(ctx context.Context, env *messaging.Envelope, m *messaging.PlanSubmitted) (messaging.Message, error) {
	reply := func(status, msg string) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := c.a.Msg.Send(sctx, env.From, &messaging.PlanExecuted{PlanUID: m.PlanUID, Status: status, Message: msg}); err != nil {
			c.a.Log.Warn("plan result not delivered", "plan", m.PlanUID, "node", m.Node, "err", err)
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
	id, err := c.a.Engine.Submit("node:"+m.Node, "", false, map[string]any{mech: cmd})
	if err != nil {
		go reply(messaging.PlanFailed, err.Error())
		return nil, nil
	}
	c.a.Log.Info("plan from node queued", "plan", id, "node_plan", m.PlanUID, "node", m.Node, "app", m.Application)
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rec, ok := c.a.Engine.Plan(id)
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

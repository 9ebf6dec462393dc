package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

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
	c.sendComponentMessages(ctx, app.Name, c.componentMessages(app, comp, nodes, update))
}

// componentMessages records that the nodes run the component (and that
// the others do not) and returns the messages that tell them.
func (c *clusterLayer) componentMessages(app *mlsysopsv1.MLSysOpsApp, comp *mlsysopsv1.Component, nodes []string, update bool) []nodeMessage {
	name := comp.Metadata.Name
	spec := componentSpec(app, comp)
	raw := mustJSON(spec)
	var out []nodeMessage
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
			if !r.reachable() {
				continue
			}
			placed := messaging.ComponentPlaced{Name: app.Name, ComponentName: name, Node: node, Spec: raw}
			var msg messaging.Message = &placed
			if update {
				msg = (*messaging.ComponentUpdated)(&placed)
			}
			out = append(out, nodeMessage{r.jid, name, msg})
		case has:
			delete(r.apps[app.Name], name)
			if len(r.apps[app.Name]) == 0 {
				delete(r.apps, app.Name)
			}
			if r.reachable() {
				out = append(out, nodeMessage{r.jid, name, &messaging.ComponentRemoved{Name: app.Name, ComponentName: name, Node: node}})
			}
		}
	}
	c.mu.Unlock()
	return out
}

// nodeMessage is a message about a component for a node agent.
type nodeMessage struct {
	jid, comp string
	msg       messaging.Message
}

func (c *clusterLayer) sendComponentMessages(ctx context.Context, app string, out []nodeMessage) {
	for _, m := range out {
		c.a.Log.Info("telling node about component", "app", app, "component", m.comp, "peer", m.jid, "type", string(m.msg.MessageType()))
		if _, err := c.a.Msg.SendAsync(ctx, m.jid, m.msg); err != nil {
			c.a.Log.Warn("component message not queued", "app", app, "component", m.comp, "peer", m.jid, "err", err)
		}
	}
}

// appGone tells the nodes that ran components of a deleted application
// that they are gone (upstream sends application_component_removed for
// each).
func (c *clusterLayer) appGone(ctx context.Context, app string) {
	var out []nodeMessage
	c.mu.Lock()
	for node, r := range c.nodes {
		for comp := range r.apps[app] {
			if r.reachable() {
				out = append(out, nodeMessage{r.jid, comp, &messaging.ComponentRemoved{Name: app, ComponentName: comp, Node: node}})
			}
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

// statusWritten is the fluidity controller's StatusWritten hook: the
// continuum agent gets the status at once (application_status_report),
// ahead of Karmada's way back through the Work and the ResourceBinding.
func (c *clusterLayer) statusWritten(ctx context.Context, app *mlsysopsv1.MLSysOpsApp) {
	if !c.a.Registered.Load() {
		return
	}
	if _, err := c.a.Msg.SendAsync(ctx, c.a.Parent, StatusReport(c.a.Name, app, time.Now())); err != nil {
		c.a.Log.Warn("application status report not queued", "app", app.Name, "err", err)
	}
}

// StatusReport is the report of an application's status in cluster, as
// its cluster agent wrote it in the member.
func StatusReport(cluster string, app *mlsysopsv1.MLSysOpsApp, at time.Time) *messaging.ApplicationStatusReport {
	m := &messaging.ApplicationStatusReport{Application: app.Name, Cluster: cluster, Phase: string(app.Status.Phase),
		Message: app.Status.Message, Time: at, Components: make(map[string]messaging.ComponentStatus, len(app.Status.Components))}
	for _, st := range app.Status.Components {
		phase := "Ready"
		if st.ReadyReplicas < st.Replicas {
			phase = "NotReady"
		}
		m.Components[st.Name] = messaging.ComponentStatus{Phase: phase, Message: st.Message, Nodes: st.Nodes,
			Replicas: st.Replicas, ReadyReplicas: st.ReadyReplicas}
	}
	return m
}

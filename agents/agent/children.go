package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state/record"
)

// AcceptChildren makes a an agent with children, as the continuum and
// cluster layers are (their constructors call it): it accepts the
// subscriptions of its children, records them and their liveness in reg,
// and rewrites reg periodically. also are agents reg keeps besides the
// children (the continuum lists itself, so that tools can ping it). Only
// this function refers to the code for children, so that the node-only
// build links none of it.
func AcceptChildren(a *Agent, reg Registry, also ...record.Agent) {
	a.registry = reg
	for _, ag := range also {
		a.known[ag.JID] = ag
	}
	a.acceptChildren = func() { messaging.HandleFunc(a.Msg, a.handleSubscribe) }
	a.keepRegistry = a.syncRegistry
}

// syncRegistry rewrites the registry entries of the accepted children
// periodically, so a Redis restart or a failed write heals by itself.
func (a *Agent) syncRegistry(ctx context.Context) error {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		online := map[string]messaging.PeerState{}
		for _, p := range a.Msg.PeerStates() {
			online[p.Peer] = p
		}
		a.mu.Lock()
		agents := make([]record.Agent, 0, len(a.known))
		for _, ag := range a.known {
			agents = append(agents, ag)
		}
		a.mu.Unlock()
		for _, ag := range agents {
			p := online[ag.JID]
			if ag.JID == a.JID {
				p = messaging.PeerState{Online: true, LastSeen: time.Now()}
			}
			if err := a.registry.Register(ctx, ag); err != nil {
				a.Log.Debug("registry write", "peer", ag.JID, "err", err)
				continue
			}
			_ = a.registry.SetLiveness(ctx, ag.JID, p.Online, p.LastSeen)
		}
	}
}

// handleSubscribe accepts a child of the right layer whose JID matches its
// name, records it and acknowledges.
func (a *Agent) handleSubscribe(ctx context.Context, env *messaging.Envelope, m *messaging.Subscribe) (messaging.Message, error) {
	want := a.layer.ChildLayer()
	refuse := func(reason string) (messaging.Message, error) {
		a.Log.Warn("subscription refused", "peer", env.From, "reason", reason)
		return &messaging.SubscribeAck{Accepted: false, Reason: reason}, nil
	}
	if m.Layer != want {
		return refuse(fmt.Sprintf("a %s agent accepts %s agents, not %s", a.Opts.Layer, want, m.Layer))
	}
	if exp := AgentJID(agentconfig.Layer(m.Layer), m.Name, a.Domain); exp != env.From {
		return refuse(fmt.Sprintf("agent %s must use the account %s", m.Name, exp))
	}
	if want == messaging.LayerNode && m.Cluster != a.Name {
		return refuse(fmt.Sprintf("node %s belongs to cluster %q, not %s", m.Name, m.Cluster, a.Name))
	}
	if _, err := a.Msg.AddChild(env.From); err != nil {
		return nil, fmt.Errorf("add child %s: %w", env.From, err)
	}
	ag := record.Agent{JID: env.From, Layer: string(m.Layer), Version: m.Version}
	if want == messaging.LayerNode {
		ag.Node, ag.Cluster = m.Name, a.Name
	} else {
		ag.Cluster = m.Name
	}
	a.mu.Lock()
	_, again := a.known[env.From]
	a.known[env.From] = ag
	a.mu.Unlock()
	if a.registry != nil {
		if err := a.registry.Register(ctx, ag); err != nil {
			a.Log.Warn("registry write failed; retried in the background", "peer", env.From, "err", err)
		} else {
			_ = a.registry.SetLiveness(ctx, env.From, true, time.Now())
		}
	}
	a.Log.Info("child registered", "peer", env.From, "child_layer", string(m.Layer), "again", again, "version", m.Version)
	a.layer.ChildRegistered(ctx, env.From, m)
	return &messaging.SubscribeAck{Accepted: true, HeartbeatIntervalMillis: a.Conn.HeartbeatInterval.Milliseconds()}, nil
}

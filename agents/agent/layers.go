package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state/record"
)

// Layer is what differs between the continuum, cluster and node agents.
// Each layer lives in its own package (agents/continuum, agents/cluster,
// agents/node) and registers its constructor with RegisterLayer.
type Layer interface {
	// ChildLayer is the layer of the agents that subscribe to this one;
	// empty for nodes.
	ChildLayer() messaging.Layer
	// Children are the JIDs the description lists.
	Children() []string
	// SystemDescription is the agent's own description in the upstream
	// form, for policies.
	SystemDescription() map[string]any
	// Mechanisms builds the layer's enabled mechanisms.
	Mechanisms(a *Agent) (*mechanism.Set, error)
	// Setup registers the layer's message handlers; the engine exists.
	Setup(a *Agent) error
	// Registered runs after every accepted subscribe to the parent.
	Registered(ctx context.Context)
	// ChildRegistered runs when a child's subscribe is accepted.
	ChildRegistered(ctx context.Context, jid string, m *messaging.Subscribe)
	// Peer sees every liveness change.
	Peer(ctx context.Context, ev messaging.PeerEvent)
	// Run runs the layer's loops until ctx ends.
	Run(ctx context.Context) error
	// Ready checks the layer's dependencies for /readyz.
	Ready(ctx context.Context) error
	// Status adds the layer's view to /status.
	Status() map[string]any
	// DescriptionChanged runs when the agent's own description file
	// changed: the layer applies what it can while running, and returns
	// an error wrapping ErrRestart (RestartFor) for what needs a new start.
	DescriptionChanged(ctx context.Context) error
}

// Registry records a parent agent's accepted children and their liveness
// where the other components read them: the Redis registry of
// internal/state (state.Registry), kept by the continuum and cluster
// layers. Nodes have no children and no registry.
type Registry interface {
	Register(ctx context.Context, a record.Agent) error
	SetLiveness(ctx context.Context, jid string, online bool, at time.Time) error
	List(ctx context.Context) ([]record.Agent, error)
}

// NewLayerFunc builds the layer of a new agent. It runs first in New:
// messaging, the sampler and the engine do not exist yet, and the layer may
// set the agent's parent, sampler and cluster and call AcceptChildren.
type NewLayerFunc func(ctx context.Context, a *Agent, env agentconfig.LookupEnv) (Layer, error)

// layers are the layers compiled into this binary; each layer's package
// registers its constructor in an init function, and the command's main
// package imports the layers it runs. The node-only build (go build -tags
// nodeagent) leaves out the cluster and continuum layers and with them the
// Kubernetes, controller-runtime, Karmada and Redis clients, so that a node
// agent maps and touches far less code.
var layers = map[agentconfig.Layer]NewLayerFunc{}

// RegisterLayer makes a layer available to --layer. It is called from
// init functions; registering a layer twice panics.
func RegisterLayer(l agentconfig.Layer, fn NewLayerFunc) {
	if _, dup := layers[l]; dup {
		panic(fmt.Sprintf("agent: layer %s registered twice", l))
	}
	layers[l] = fn
}

// newLayer builds the agent's layer, or says why this binary cannot.
func newLayer(ctx context.Context, a *Agent, env agentconfig.LookupEnv) (Layer, error) {
	if fn, ok := layers[a.Opts.Layer]; ok {
		return fn(ctx, a, env)
	}
	switch a.Opts.Layer {
	case agentconfig.LayerNode, agentconfig.LayerCluster, agentconfig.LayerContinuum:
		return nil, fmt.Errorf("the %s layer is not in this binary, the node-only build (-tags nodeagent, %s): run the full agent (go build ./agents, bin/mlsysops-agent) for the cluster and continuum layers",
			a.Opts.Layer, LayersBuilt())
	}
	return nil, fmt.Errorf("unknown layer %q: want continuum, cluster or node", a.Opts.Layer)
}

// HasLayer reports whether this binary runs layer l.
func HasLayer(l agentconfig.Layer) bool {
	_, ok := layers[l]
	return ok
}

// LayersBuilt names the layers this binary runs, e.g. "layers: node".
func LayersBuilt() string {
	names := make([]string, 0, len(layers))
	for l := range layers {
		names = append(names, string(l))
	}
	sort.Strings(names)
	return "layers: " + strings.Join(names, ", ")
}

// SystemDescription is an agent's own description in the upstream form
// policies see, {kind: spec with its name}, from its typed or generic spec.
func SystemDescription(kind, name string, spec any) map[string]any {
	m := toMap(spec)
	if m == nil {
		m = map[string]any{}
	}
	m["name"] = name
	return map[string]any{kind: m}
}

// toMap converts a typed value to upstream-style data through JSON.
func toMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

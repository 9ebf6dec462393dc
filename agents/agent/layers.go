package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// newLayerFunc builds the layer of a new agent.
type newLayerFunc func(ctx context.Context, a *Agent, env agentconfig.LookupEnv) (layer, error)

// layers are the layers compiled into this binary; each layer's file
// registers its constructor in an init function. The node-only build
// (go build -tags nodeagent) leaves out the cluster and continuum layers
// and with them the Kubernetes, controller-runtime, Karmada and Redis
// clients, so that a node agent maps and touches far less code.
var layers = map[agentconfig.Layer]newLayerFunc{}

// registerLayer makes a layer available to --layer.
func registerLayer(l agentconfig.Layer, fn newLayerFunc) {
	if _, dup := layers[l]; dup {
		panic(fmt.Sprintf("agent: layer %s registered twice", l))
	}
	layers[l] = fn
}

// newLayer builds the agent's layer, or says why this binary cannot.
func newLayer(ctx context.Context, a *Agent, env agentconfig.LookupEnv) (layer, error) {
	if fn, ok := layers[a.opts.Layer]; ok {
		return fn(ctx, a, env)
	}
	switch a.opts.Layer {
	case agentconfig.LayerNode, agentconfig.LayerCluster, agentconfig.LayerContinuum:
		return nil, fmt.Errorf("the %s layer is not in this binary, the node-only build (-tags nodeagent, %s): run the full agent (go build ./agents, bin/mlsysops-agent) for the cluster and continuum layers",
			a.opts.Layer, LayersBuilt())
	}
	return nil, fmt.Errorf("unknown layer %q: want continuum, cluster or node", a.opts.Layer)
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

package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

func TestLayersRegistered(t *testing.T) {
	if _, ok := layers[agentconfig.LayerNode]; !ok {
		t.Fatalf("the node layer is not registered (%s)", LayersBuilt())
	}
	_, cluster := layers[agentconfig.LayerCluster]
	_, continuum := layers[agentconfig.LayerContinuum]
	if cluster != continuum {
		t.Errorf("cluster registered %v, continuum %v: a build has both or neither", cluster, continuum)
	}
}

func TestNewLayerMissing(t *testing.T) {
	saved := layers
	t.Cleanup(func() { layers = saved })
	layers = map[agentconfig.Layer]newLayerFunc{agentconfig.LayerNode: saved[agentconfig.LayerNode]}

	for layer, want := range map[agentconfig.Layer]string{
		agentconfig.LayerCluster:   "the cluster layer is not in this binary, the node-only build (-tags nodeagent, layers: node)",
		agentconfig.LayerContinuum: "the continuum layer is not in this binary",
		"edge":                     `unknown layer "edge"`,
	} {
		a := &Agent{opts: &agentconfig.Options{Layer: layer}}
		_, err := newLayer(context.Background(), a, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("layer %s: err = %v, want %q", layer, err, want)
		}
	}
}

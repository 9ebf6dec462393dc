package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

func TestNewLayerMissing(t *testing.T) {
	saved := layers
	t.Cleanup(func() { layers = saved })
	layers = map[agentconfig.Layer]NewLayerFunc{agentconfig.LayerNode: saved[agentconfig.LayerNode]}

	for layer, want := range map[agentconfig.Layer]string{
		agentconfig.LayerCluster:   "the cluster layer is not in this binary, the node-only build (-tags nodeagent, layers: node)",
		agentconfig.LayerContinuum: "the continuum layer is not in this binary",
		"edge":                     `unknown layer "edge"`,
	} {
		a := &Agent{Opts: &agentconfig.Options{Layer: layer}}
		_, err := newLayer(context.Background(), a, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("layer %s: err = %v, want %q", layer, err, want)
		}
	}
}

package main

import (
	"testing"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// The layers register themselves when this package imports them.
func TestLayersRegistered(t *testing.T) {
	if !agent.HasLayer(agentconfig.LayerNode) {
		t.Fatalf("the node layer is not registered (%s)", agent.LayersBuilt())
	}
	cluster := agent.HasLayer(agentconfig.LayerCluster)
	continuum := agent.HasLayer(agentconfig.LayerContinuum)
	if cluster != continuum {
		t.Errorf("cluster registered %v, continuum %v: a build has both or neither", cluster, continuum)
	}
}

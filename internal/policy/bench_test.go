package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// benchInputs is a cluster of nodes and an application of components,
// none placed yet, as the cluster agent would pass them to the core
// placement policies.
func benchInputs(nodes, components int) *Inputs {
	nodeNames := make([]any, nodes)
	nodeInfo := map[string]any{}
	for i := range nodeNames {
		name := fmt.Sprintf("node-%02d", i)
		nodeNames[i] = name
		layer := "edge"
		if i%4 == 0 {
			layer = "cloud"
		}
		nodeInfo[name] = map[string]any{
			"spec": map[string]any{
				"name": name, "continuum_layer": layer, "labels": []any{"gpu", "ssd"},
				"hardware": map[string]any{"cpu": map[string]any{"architecture": "amd64", "cores": 8}, "memory": 16},
			},
			"components": []any{},
		}
	}
	comps := make([]any, components)
	states := map[string]any{}
	for i := range comps {
		name := fmt.Sprintf("comp-%02d", i)
		comps[i] = map[string]any{
			"metadata":       map[string]any{"name": name, "uid": name},
			"node_placement": map[string]any{"continuum_layer": []any{"edge"}, "labels": []any{"gpu"}},
			"containers": []any{map[string]any{
				"image": "registry.example/app:1.0", "command": []any{"serve", "--port", "8080"},
				"platform_requirements": map[string]any{"cpu": map[string]any{"requests": "250m", "limits": "500m"}, "memory": map[string]any{"requests": "256Mi"}},
				"ports":                 []any{map[string]any{"container_port": 8080, "protocol": "TCP"}},
			}},
			"qos_metrics": []any{map[string]any{"application_metric_id": "latency_ms", "target": 50, "relation": "lower_or_equal"}},
		}
		states[name] = map[string]any{"node_placed": nil}
	}
	store := telemetry.NewStore(time.Minute, 0)
	store.Append(time.Now(), []telemetry.Reading{{Name: "node_load1", Value: 1.5}, {Name: "latency_ms", Value: 42}})
	return &Inputs{
		Applications: []map[string]any{{"name": "bench", "spec": map[string]any{"components": comps}}},
		System:       map[string]any{"MLSysOpsCluster": map[string]any{"cluster_id": "c1", "nodes": nodeNames}},
		Mechanisms: map[string]MechanismView{"fluidity": {State: map[string]any{
			"applications": map[string]any{"bench": map[string]any{"components": states}},
			"nodes":        nodeInfo,
		}, Options: map[string]any{}}},
		Telemetry: store,
	}
}

// BenchmarkAnalyzePlan measures analyze+plan of the built-in
// dynamicPlacement policy (the busiest core policy) for an application of
// 10 components on a cluster of 20 nodes: the inputs' conversion to
// Starlark, the policy's filtering and scoring, and the plan's conversion
// back.
func BenchmarkAnalyzePlan(b *testing.B) {
	for _, size := range []struct{ nodes, comps int }{{5, 3}, {20, 10}, {100, 30}} {
		b.Run(fmt.Sprintf("nodes=%d/components=%d", size.nodes, size.comps), func(b *testing.B) {
			// The components have been unplaced for longer than the
			// policy's settle_seconds: the first analysis sees them at
			// start, every later one an hour on.
			clock := time.Now()
			ts, err := Builtins(context.Background(), "cluster", Runtime{Logger: quiet(), Now: func() time.Time { return clock }})
			if err != nil {
				b.Fatal(err)
			}
			var dyn Template
			for _, t := range ts {
				if t.Name() == "dynamicPlacement" {
					dyn = t
				}
			}
			inst, err := dyn.NewInstance(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			in := benchInputs(size.nodes, size.comps)
			ctx := context.Background()
			if _, err := inst.Analyze(ctx, in); err != nil {
				b.Fatal(err)
			}
			clock = clock.Add(time.Hour)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ok, err := inst.Analyze(ctx, in)
				if err != nil || !ok {
					b.Fatalf("analyze = %v, %v", ok, err)
				}
				p, err := inst.Plan(ctx, in)
				if err != nil || len(p) == 0 {
					b.Fatalf("plan = %v, %v", p, err)
				}
			}
			b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

// BenchmarkAnalyzeTrivial measures the fixed cost of one call: a policy
// whose analyze only reads one metric, with small inputs.
func BenchmarkAnalyzeTrivial(b *testing.B) {
	s, err := Compile(context.Background(), "t", "policy-t.star", []byte(header+`
def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return telemetry.latest("node_load1", 0) > 4, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {}, context
`), Runtime{Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	inst, _ := s.NewInstance(context.Background())
	in := benchInputs(1, 1)
	in.Mechanisms = nil
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := inst.Analyze(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

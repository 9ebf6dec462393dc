package mape

import (
	"context"
	"fmt"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/policy"
)

// BenchmarkTick measures one MAPE round for an agent with many
// applications: every application-scope policy instance analyzes and
// plans, the scheduler resolves the plans and the mechanism applies the
// ones that win. The policy is deliberately small, so the figure is the
// engine's own overhead per instance (input assembly, Starlark call
// setup, plan bookkeeping, scheduling, execution, logging); see the
// policy package's BenchmarkAnalyzePlan for the cost of real policies.
func BenchmarkTick(b *testing.B) {
	for _, apps := range []int{10, 100} {
		b.Run(fmt.Sprintf("apps=%d", apps), func(b *testing.B) {
			s := &scripted{}
			set := mechanism.NewSet(map[string]mechanism.Mechanism{"sync": s})
			e, err := New(Config{Mechanisms: set, Logger: quiet(), PlanLogSize: 1000})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			tmpl, err := policy.Compile(ctx, "bench", "policy-bench.star", []byte(`
def initialize():
    return {"scope": "application", "configuration": {"analyze_interval": "1s"}, "n": 0}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    context["n"] += 1
    return telemetry.latest("node_load1", 0) >= 0, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {"sync": {"app": application_description[0]["name"], "n": context["n"]}}, context
`), policy.Runtime{Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			e.SetPolicy(ctx, tmpl)
			e.SetSystemDescription(map[string]any{"MLSysOpsCluster": map[string]any{"cluster_id": "c", "nodes": []any{"n1", "n2"}}})
			for i := 0; i < apps; i++ {
				id := fmt.Sprintf("app-%03d", i)
				_ = e.SetApplication(ctx, Application{ID: id, Description: map[string]any{"name": id, "spec": map[string]any{"components": []any{map[string]any{"metadata": map[string]any{"name": "c"}}}}}})
			}
			var instances []*instance
			e.mu.Lock()
			for _, pe := range e.policies {
				for _, in := range pe.instances {
					instances = append(instances, in)
				}
			}
			e.mu.Unlock()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, in := range instances {
					if err := e.cycle(ctx, in); err != nil {
						b.Fatal(err)
					}
				}
				tick(e)
			}
			b.StopTimer()
			// All plans want the one mechanism: one wins per tick.
			if got := len(e.Plans(Query{State: StateCompleted})); got == 0 {
				b.Fatal("no plan completed")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*apps), "ns/instance")
		})
	}
}

// BenchmarkSchedule measures the scheduler alone: one tick resolving 100
// queued plans for 100 applications on distinct mechanisms... of which
// 10 are enabled, then executing the winners.
func BenchmarkSchedule(b *testing.B) {
	s := &scripted{}
	mechs := map[string]mechanism.Mechanism{}
	for i := 0; i < 10; i++ {
		mechs[fmt.Sprintf("m%d", i)] = s
	}
	e, err := New(Config{Mechanisms: mechanism.NewSet(mechs), Logger: quiet(), PlanLogSize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("app-%03d", i)
		_ = e.SetApplication(ctx, Application{ID: id, Description: map[string]any{"name": id}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := 0; j < 100; j++ {
			if _, err := e.Submit("bench", fmt.Sprintf("app-%03d", j), j%10 == 0, map[string]any{fmt.Sprintf("m%d", j%10): map[string]any{"j": j}}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		tick(e)
	}
}

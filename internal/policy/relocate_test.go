package policy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// relocateApp is the demo application as the cluster layer sees it: a
// server whose latency must stay at or under 50 ms, and a client pinned
// to its node.
func relocateApp() map[string]any {
	return map[string]any{"name": "demo", "spec": map[string]any{"components": []any{
		map[string]any{
			"metadata":    map[string]any{"name": "server"},
			"qos_metrics": []any{map[string]any{"application_metric_id": "demo_server_latency_seconds", "target": 0.05, "relation": "lower_or_equal"}},
		},
		map[string]any{
			"metadata":       map[string]any{"name": "client"},
			"node_placement": map[string]any{"node": "w1"},
			"qos_metrics":    []any{map[string]any{"application_metric_id": "demo_client_error_ratio", "target": 0.1, "relation": "lower_or_equal"}},
		},
	}}}
}

// relocateState is the fluidity state with the server on node, ready or
// not, and the candidates placement gives it.
func relocateState(node string, ready bool, candidates ...any) map[string]MechanismView {
	readyReplicas := int64(1)
	if !ready {
		readyReplicas = 0
	}
	return map[string]MechanismView{"fluidity": {State: map[string]any{"applications": map[string]any{"demo": map[string]any{"components": map[string]any{
		"server": map[string]any{"node_placed": node, "replicas": int64(1), "ready_replicas": readyReplicas, "candidates": candidates},
		"client": map[string]any{"node_placed": "w1", "replicas": int64(1), "ready_replicas": int64(1), "candidates": []any{"w1"}},
	}}}}}}
}

func move(src, target, reason string) map[string]any {
	return map[string]any{"fluidity": map[string]any{"name": "demo", "reason": reason, "deployment_plan": map[string]any{
		"server": []any{map[string]any{"action": "move", "src_host": src, "target_host": target}}, "initial_plan": false,
	}}}
}

// TestRelocateComponents follows the relocation policy through a
// violation, a move, a recovery, a second violation on the new node and a
// client that misses its target but is pinned.
func TestRelocateComponents(t *testing.T) {
	const file = "cluster/policy-relocateComponents.star"
	src, err := os.ReadFile(filepath.Join(examplesDir, file))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_700_000_000, 0)
	clock := start
	rt := Runtime{Now: func() time.Time { return clock }, Logger: quiet()}
	s, err := Compile(context.Background(), "relocateComponents", file, src, rt)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := s.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	store := telemetry.NewStore(time.Hour, 0)
	in := &Inputs{Applications: []map[string]any{relocateApp()}, Mechanisms: relocateState("w1", true, "w1", "w2", "w3"), Telemetry: store}
	sample := func(node, pod string, server, clientErrors float64) {
		store.Append(clock, []telemetry.Reading{
			{Name: "demo_server_latency_seconds", Labels: telemetry.Labels{"app": "demo", "component": "server", "node": node, "pod": pod}, Value: server},
			{Name: "demo_client_error_ratio", Labels: telemetry.Labels{"app": "demo", "component": "client", "node": "w1", "pod": "client-1"}, Value: clientErrors},
		})
	}
	type step struct {
		name   string
		after  time.Duration
		change func()
		plan   map[string]any // nil: analyze says no
	}
	steps := []step{
		{name: "healthy", after: 2 * time.Second, change: func() { sample("w1", "server-1", 0.004, 0) }},
		{name: "first miss", after: 2 * time.Second, change: func() { sample("w1", "server-1", 0.2, 0.5) }},
		{name: "second miss", after: 2 * time.Second, change: func() { sample("w1", "server-1", 0.2, 0.5) }},
		{name: "within the margin resets", after: 2 * time.Second, change: func() { sample("w1", "server-1", 0.054, 0.5) }},
		{name: "miss 1", after: 2 * time.Second, change: func() { sample("w1", "server-1", 0.21, 0.5) }},
		{name: "miss 2", after: 2 * time.Second, change: func() { sample("w1", "server-1", 0.22, 0.5) }},
		{name: "miss 3: move to the best other candidate", after: 2 * time.Second, change: func() { sample("w1", "server-1", 0.23, 0.5) },
			plan: move("w1", "w2", "server: demo_server_latency_seconds 0.23 misses lower_or_equal 0.05 on w1 for 3 samples")},
		{name: "rolling out", after: 2 * time.Second, change: func() { in.Mechanisms = relocateState("w2", false, "w1", "w2", "w3") }},
		{name: "old pod's values are not the new node's", after: 2 * time.Second, change: func() {
			in.Mechanisms = relocateState("w2", true, "w1", "w2", "w3")
			sample("w1", "server-1", 0.3, 0.5)
		}},
		{name: "recovered", after: 2 * time.Second, change: func() { sample("w2", "server-2", 0.003, 0) }},
		{name: "w2 degrades within the cool-down", after: 2 * time.Second, change: func() {
			for i := 0; i < 3; i++ {
				sample("w2", "server-2", 0.4, 0)
				clock = clock.Add(2 * time.Second)
			}
		}},
		{name: "after the cool-down: w3, not w1 it left", after: 60 * time.Second, change: func() {
			for i := 0; i < 3; i++ {
				sample("w2", "server-2", 0.4, 0)
				clock = clock.Add(2 * time.Second)
			}
		}, plan: move("w2", "w3", "server: demo_server_latency_seconds 0.4 misses lower_or_equal 0.05 on w2 for 3 samples")},
		{name: "w3 too, after the cool-down: nowhere left to go", after: 70 * time.Second, change: func() {
			in.Mechanisms = relocateState("w3", true, "w1", "w2", "w3")
			for i := 0; i < 3; i++ {
				sample("w3", "server-3", 0.4, 0)
				clock = clock.Add(2 * time.Second)
			}
		}},
		{name: "stale values are no measurement", after: 11 * time.Minute, change: func() { in.Mechanisms = relocateState("w3", true, "w1", "w3") }},
		{name: "after the memory of w1 fades, it is a target again", after: 2 * time.Second, change: func() {
			for i := 0; i < 3; i++ {
				sample("w3", "server-3", 0.4, 0)
				clock = clock.Add(2 * time.Second)
			}
		}, plan: move("w3", "w1", "server: demo_server_latency_seconds 0.4 misses lower_or_equal 0.05 on w3 for 3 samples")},
	}
	for _, st := range steps {
		clock = clock.Add(st.after)
		if st.change != nil {
			st.change()
		}
		ok, err := inst.Analyze(context.Background(), in)
		if err != nil {
			t.Fatalf("%s: analyze: %v", st.name, err)
		}
		if ok != (st.plan != nil) {
			t.Fatalf("%s: analyze = %v, want %v", st.name, ok, st.plan != nil)
		}
		if !ok {
			continue
		}
		plan, err := inst.Plan(context.Background(), in)
		if err != nil {
			t.Fatalf("%s: plan: %v", st.name, err)
		}
		if diff := cmp.Diff(st.plan, plan); diff != "" {
			t.Errorf("%s: plan (-want +got):\n%s", st.name, diff)
		}
	}
}

// Every relation misses its target only beyond the margin.
func TestRelocateRelations(t *testing.T) {
	const file = "cluster/policy-relocateComponents.star"
	src, err := os.ReadFile(filepath.Join(examplesDir, file))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		relation string
		value    float64
		move     bool
	}{
		"lower_or_equal over the band":    {"lower_or_equal", 0.056, true},
		"lower_or_equal within the band":  {"lower_or_equal", 0.055, false},
		"greater_or_equal under the band": {"greater_or_equal", 0.044, true},
		"greater_or_equal within":         {"greater_or_equal", 0.046, false},
		"greater_than at the target":      {"greater_than", 0.05, false},
		"equal far off":                   {"equal", 0.04, true},
		"equal close":                     {"equal", 0.0501, false},
		"unknown relation":                {"about", 9, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clock := time.Unix(1_700_000_000, 0)
			rt := Runtime{Now: func() time.Time { return clock }, Logger: quiet()}
			s, err := Compile(context.Background(), "relocateComponents", file, src, rt)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := s.NewInstance(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			app := relocateApp()
			comp := app["spec"].(map[string]any)["components"].([]any)[0].(map[string]any)
			comp["qos_metrics"].([]any)[0].(map[string]any)["relation"] = tc.relation
			store := telemetry.NewStore(time.Hour, 0)
			for i := 0; i < 3; i++ {
				store.Append(clock, []telemetry.Reading{{Name: "demo_server_latency_seconds", Labels: telemetry.Labels{"app": "demo", "component": "server", "node": "w1", "pod": "s"}, Value: tc.value}})
				clock = clock.Add(2 * time.Second)
			}
			ok, err := inst.Analyze(context.Background(), &Inputs{Applications: []map[string]any{app}, Mechanisms: relocateState("w1", true, "w1", "w2"), Telemetry: store})
			if err != nil || ok != tc.move {
				t.Errorf("analyze = %v, %v; want %v", ok, err, tc.move)
			}
		})
	}
}

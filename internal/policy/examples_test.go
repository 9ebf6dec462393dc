package policy

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// examplesDir is the repository's folder of example policies.
const examplesDir = "../../policies"

// clusterApp is a cluster-layer application description: a server pinned
// to edge-1 and a client for any edge node, with a QoS target.
func clusterApp() map[string]any {
	return map[string]any{
		"name": "demo",
		"spec": map[string]any{
			"components": []any{
				map[string]any{
					"metadata":       map[string]any{"name": "server"},
					"node_placement": map[string]any{"node": "edge-1"},
					"containers":     []any{map[string]any{"image": "srv:1", "platform_requirements": map[string]any{"cpu": map[string]any{"requests": "50m"}}}},
				},
				map[string]any{
					"metadata":       map[string]any{"name": "client"},
					"node_placement": map[string]any{"continuum_layer": []any{"edge"}},
					"containers":     []any{map[string]any{"image": "cli:1"}},
					"qos_metrics": []any{map[string]any{
						"application_metric_id": "test_received_success_counter_total", "target": 10, "relation": "greater_or_equal",
					}},
				},
			},
		},
	}
}

func clusterSystem() map[string]any {
	return map[string]any{"MLSysOpsCluster": map[string]any{"name": "uth-prod-cluster", "cluster_id": "uth-prod-cluster", "nodes": []any{"edge-1", "edge-2", "cloud-1"}}}
}

// fluidity returns the fluidity mechanism's state with components placed
// as given.
func fluidity(placed map[string]any) map[string]MechanismView {
	comps := map[string]any{}
	for _, c := range []string{"server", "client"} {
		comps[c] = map[string]any{"node_placed": placed[c]}
	}
	return map[string]MechanismView{"fluidity": {State: map[string]any{
		"applications": map[string]any{"demo": map[string]any{"components": comps}},
		"nodes": map[string]any{
			"edge-1":  map[string]any{"spec": map[string]any{"continuum_layer": "edge"}, "components": []any{"server"}},
			"edge-2":  map[string]any{"spec": map[string]any{"continuum_layer": "edge"}, "components": []any{}},
			"cloud-1": map[string]any{"spec": map[string]any{"continuum_layer": "cloud"}},
		},
	}}}
}

// placedOn returns the clusterPlacement mechanism's state with the
// application demo running in the clusters given.
func placedOn(clusters ...any) map[string]MechanismView {
	return map[string]MechanismView{"clusterPlacement": {State: map[string]any{
		"applications": map[string]any{"demo": map[string]any{"clusters": append([]any{}, clusters...)}},
	}}}
}

// step is one analyze (and plan, when analyze says so) at a time offset.
type step struct {
	at      time.Duration
	analyze bool
	plan    map[string]any
	change  func(in *Inputs)
}

func TestExamplePolicies(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	changedResources := func(cpuReq, cpuLim, memReq, memLim string) map[string]any {
		return map[string]any{
			"metadata":       map[string]any{"name": "server"},
			"node_placement": map[string]any{"node": "edge-1"},
			"containers": []any{map[string]any{"image": "srv:1", "platform_requirements": map[string]any{
				"cpu":    map[string]any{"requests": cpuReq, "limits": cpuLim},
				"memory": map[string]any{"requests": memReq, "limits": memLim},
			}}},
		}
	}
	cases := map[string]struct {
		file     string
		in       *Inputs
		readings []telemetry.Reading
		wantCfg  Config
		steps    []step
	}{
		"cluster/policy-staticPlacement.star": {
			in:      &Inputs{Applications: []map[string]any{clusterApp()}, System: clusterSystem(), Mechanisms: fluidity(map[string]any{})},
			wantCfg: Config{Scope: ScopeApplication, Core: true, Mechanisms: []string{"fluidity"}, AnalyzeInterval: 10 * time.Second, ScrapeInterval: 5 * time.Second},
			steps: []step{
				{at: 0, analyze: true, plan: map[string]any{"fluidity": map[string]any{"name": "demo", "deployment_plan": map[string]any{
					"server": []any{map[string]any{"action": "deploy", "host": "edge-1"}}, "initial_plan": true,
				}}}},
				{at: 2 * time.Second, analyze: false},
				{at: 62 * time.Second, analyze: true, plan: map[string]any{"fluidity": map[string]any{"name": "demo", "deployment_plan": map[string]any{
					"server": []any{map[string]any{"action": "deploy", "host": "edge-1"}}, "initial_plan": true,
				}}}},
				{at: 64 * time.Second, analyze: false, change: func(in *Inputs) { in.Mechanisms = fluidity(map[string]any{"server": "edge-1"}) }},
			},
		},
		"cluster/policy-dynamicPlacement.star": {
			in:      &Inputs{Applications: []map[string]any{clusterApp()}, System: clusterSystem(), Mechanisms: fluidity(map[string]any{"server": "edge-1"})},
			wantCfg: Config{Scope: ScopeApplication, Core: true, Mechanisms: []string{"fluidity"}, AnalyzeInterval: 2 * time.Second, ScrapeInterval: 5 * time.Second},
			steps: []step{
				// client is unplaced: the placement controller has
				// settle_seconds to place it.
				{at: 0, analyze: false},
				{at: 2 * time.Second, analyze: false},
				// Placed by the controller meanwhile: nothing to plan, and
				// the wait starts again if it is ever unplaced.
				{at: 4 * time.Second, analyze: false, change: func(in *Inputs) { in.Mechanisms = fluidity(map[string]any{"server": "edge-1", "client": "edge-2"}) }},
				{at: 14 * time.Second, analyze: false, change: func(in *Inputs) { in.Mechanisms = fluidity(map[string]any{"server": "edge-1"}) }},
				{at: 20 * time.Second, analyze: false},
				// Unplaced for 10 s: edge-2 is the least loaded edge node.
				{at: 24 * time.Second, analyze: true, plan: map[string]any{"fluidity": map[string]any{"name": "demo", "deployment_plan": map[string]any{
					"client": []any{map[string]any{"action": "deploy", "host": "edge-2"}}, "initial_plan": true,
				}}}},
				{at: 54 * time.Second, analyze: false, change: func(in *Inputs) { in.Mechanisms = fluidity(map[string]any{"server": "edge-1", "client": "edge-2"}) }},
			},
		},
		// The decisions over time are in TestRelocateComponents.
		"cluster/policy-relocateComponents.star": {
			in:       &Inputs{Applications: []map[string]any{clusterApp()}, System: clusterSystem(), Mechanisms: fluidity(map[string]any{"server": "edge-1", "client": "edge-2"})},
			readings: []telemetry.Reading{{Name: "test_received_success_counter_total", Labels: telemetry.Labels{"app": "demo", "component": "client", "node": "edge-2", "pod": "c"}, Value: 5}},
			wantCfg:  Config{Scope: ScopeApplication, Mechanisms: []string{"fluidity"}, AnalyzeInterval: 2 * time.Second, ScrapeInterval: 2 * time.Second},
			steps:    []step{{at: 0, analyze: false}},
		},
		"cluster/policy-changeCompSpec.star": {
			in:      &Inputs{Applications: []map[string]any{clusterApp()}, System: clusterSystem(), Mechanisms: fluidity(map[string]any{"server": "edge-1"})},
			wantCfg: Config{Scope: ScopeApplication, Mechanisms: []string{"fluidity"}, AnalyzeInterval: 30 * time.Second, ScrapeInterval: 5 * time.Second},
			steps: []step{
				{at: 0, analyze: true, plan: map[string]any{"fluidity": map[string]any{"name": "demo", "deployment_plan": map[string]any{
					"server":       []any{map[string]any{"action": "change_spec", "host": "edge-1", "new_spec": changedResources("100m", "200m", "128Mi", "256Mi")}},
					"initial_plan": false,
				}}}},
				{at: 30 * time.Second, analyze: false},
				{at: 300 * time.Second, analyze: true, plan: map[string]any{"fluidity": map[string]any{"name": "demo", "deployment_plan": map[string]any{
					"server":       []any{map[string]any{"action": "change_spec", "host": "edge-1", "new_spec": changedResources("250m", "400m", "256Mi", "384Mi")}},
					"initial_plan": false,
				}}}},
			},
		},
		"continuum/policy-clusterPlacement.star": {
			in: &Inputs{
				Applications: []map[string]any{{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c2", "c1"}}, "components": []any{}}},
				System:       map[string]any{"MLSysOpsContinuum": map[string]any{"continuum_id": "k", "clusters": []any{"c1", "c2"}}},
				Mechanisms:   placedOn(),
			},
			wantCfg: Config{Scope: ScopeApplication, Core: true, Mechanisms: []string{"clusterPlacement"}, AnalyzeInterval: 10 * time.Second, ScrapeInterval: 5 * time.Second},
			steps: []step{
				// Not placed yet: the placement controller is choosing.
				{at: 0, analyze: false},
				// Placed on c1, which the user's list allows: confirmed.
				{at: 2 * time.Second, analyze: true, change: func(in *Inputs) { in.Mechanisms = placedOn("c1") }, plan: map[string]any{"clusterPlacement": map[string]any{
					"action": map[string]any{"component": "c1"},
					"app":    []any{map[string]any{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c2", "c1"}}, "components": []any{}}},
				}}},
				{at: 4 * time.Second, analyze: false},
				// The user's list no longer has c1: wait for the controller
				// to move the application, then confirm.
				{at: 6 * time.Second, analyze: false, change: func(in *Inputs) {
					in.Applications = []map[string]any{{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c2"}}}}
				}},
				{at: 8 * time.Second, analyze: true, change: func(in *Inputs) { in.Mechanisms = placedOn("c2") }, plan: map[string]any{"clusterPlacement": map[string]any{
					"action": map[string]any{"component": "c2"},
					"app":    []any{map[string]any{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c2"}}}},
				}}},
				// Two instances, only c1's copy written so far: a placement
				// under way, nothing confirmed (confirming c1 alone would
				// move the application off c2).
				{at: 14 * time.Second, analyze: false, change: func(in *Inputs) {
					in.Applications = []map[string]any{{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c1", "c2"}, "instances": int64(2)}}}
					in.Mechanisms = placedOn("c1")
				}},
				// Two instances, on c1 and c2 (the user's list has both):
				// both confirmed, neither dropped.
				{at: 20 * time.Second, analyze: true, change: func(in *Inputs) {
					in.Applications = []map[string]any{{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c1", "c2"}, "instances": int64(2)}}}
					in.Mechanisms = placedOn("c1", "c2")
				}, plan: map[string]any{"clusterPlacement": map[string]any{
					"action": map[string]any{"component": []any{"c1", "c2"}},
					"app":    []any{map[string]any{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c1", "c2"}, "instances": int64(2)}}},
				}}},
				// One of them leaves the user's list: the controller moves
				// the application; nothing is confirmed until it has.
				{at: 40 * time.Second, analyze: false, change: func(in *Inputs) {
					in.Applications = []map[string]any{{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c2"}}}}
				}},
				// One copy, seen on two clusters while it moves: nothing
				// confirmed until it runs on one.
				{at: 50 * time.Second, analyze: false, change: func(in *Inputs) {
					in.Applications = []map[string]any{{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c1", "c2"}}}}
				}},
				{at: 60 * time.Second, analyze: true, change: func(in *Inputs) { in.Mechanisms = placedOn("c2") }, plan: map[string]any{"clusterPlacement": map[string]any{
					"action": map[string]any{"component": "c2"},
					"app":    []any{map[string]any{"name": "demo", "cluster_placement": map[string]any{"cluster_id": []any{"c1", "c2"}}}},
				}}},
			},
		},
		"node/policy-CPUFrequencyConfigurator.star": {
			in:      &Inputs{System: map[string]any{"MLSysOpsNode": map[string]any{"name": "edge-1"}}},
			wantCfg: Config{Scope: ScopeGlobal, Mechanisms: []string{"CPUFrequencyConfigurator"}, Metrics: []string{"node_load1"}, AnalyzeInterval: time.Minute, ScrapeInterval: 5 * time.Second},
			steps: []step{
				{at: 0, analyze: false},
				{at: time.Minute, analyze: true, plan: map[string]any{"CPUFrequencyConfigurator": map[string]any{"command": "set", "cpu": "all", "frequency": "max"}}},
				{at: 2 * time.Minute, analyze: true, plan: map[string]any{"CPUFrequencyConfigurator": map[string]any{"command": "set", "cpu": "all", "frequency": "min"}}},
			},
		},
		"node/policy-cpuFrequencyByLoad.star": {
			in:       &Inputs{},
			readings: []telemetry.Reading{{Name: "node_load1", Value: 7}, {Name: "node_cpu_cores", Value: 4}},
			wantCfg:  Config{Scope: ScopeGlobal, Mechanisms: []string{"CPUFrequencyConfigurator"}, Metrics: []string{"node_cpu_cores", "node_load1"}, AnalyzeInterval: 15 * time.Second, ScrapeInterval: 5 * time.Second},
			steps: []step{
				{at: 0, analyze: true, plan: map[string]any{"CPUFrequencyConfigurator": map[string]any{"command": "set", "cpu": "all", "frequency": "max"}}},
				{at: 15 * time.Second, analyze: false},
			},
		},
		"node/policy-gpuPowerCap.star": {
			in: &Inputs{Mechanisms: map[string]MechanismView{"GPUConfigurator": {State: map[string]any{"gpus": []any{
				map[string]any{"index": 0, "power_limit_w": 250.0, "power_min_limit_w": 150.0, "power_default_limit_w": 250.0},
				map[string]any{"index": 1, "power_limit_w": 70.0, "power_min_limit_w": 60.0, "power_default_limit_w": 70.0},
			}}}}},
			readings: []telemetry.Reading{
				{Name: "node_gpu_utilisation_ratio", Labels: telemetry.Labels{"gpu": "0", "name": "A100"}, Value: 0.9},
				{Name: "node_gpu_utilisation_ratio", Labels: telemetry.Labels{"gpu": "1", "name": "T4"}, Value: 0.02},
			},
			wantCfg: Config{Scope: ScopeGlobal, Mechanisms: []string{"GPUConfigurator"}, Metrics: []string{"node_gpu_utilisation_ratio"}, AnalyzeInterval: 30 * time.Second, ScrapeInterval: 5 * time.Second},
			steps: []step{
				{at: 0, analyze: true, plan: map[string]any{"GPUConfigurator": map[string]any{"command": "set", "gpu": int64(1), "power_limit": 60.0}}},
			},
		},
		"node/policy-changeCompSpec.star": {
			in: &Inputs{
				Applications: []map[string]any{{"name": "demo", "component_name": "server", "spec": clusterApp()["spec"], "pod_spec": map[string]any{}}},
				System:       map[string]any{"MLSysOpsNode": map[string]any{"name": "edge-1"}},
			},
			wantCfg: Config{Scope: ScopeApplication, Mechanisms: []string{"fluidity_proxy"}, Metrics: []string{"node_load1"}, AnalyzeInterval: 30 * time.Second, ScrapeInterval: 5 * time.Second},
			steps: []step{
				{at: 0, analyze: true, plan: map[string]any{"fluidity_proxy": map[string]any{"name": "demo", "deployment_plan": map[string]any{
					"server":       []any{map[string]any{"action": "change_spec", "host": "edge-1", "new_spec": changedResources("100m", "200m", "128Mi", "256Mi")}},
					"initial_plan": false,
				}}}},
				{at: time.Minute, analyze: false},
			},
		},
	}

	// Every example is covered.
	files, _ := filepath.Glob(filepath.Join(examplesDir, "*", "policy-*.star"))
	var found []string
	for _, f := range files {
		rel, _ := filepath.Rel(examplesDir, f)
		found = append(found, rel)
	}
	var tested []string
	for f := range cases {
		tested = append(tested, f)
	}
	sort.Strings(tested)
	if diff := cmp.Diff(tested, found); diff != "" {
		t.Errorf("examples without a test or tests without an example (-tested +found):\n%s", diff)
	}

	for file, tc := range cases {
		t.Run(file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(examplesDir, file))
			if err != nil {
				t.Fatal(err)
			}
			clock := start
			rt := Runtime{Now: func() time.Time { return clock }, Logger: quiet()}
			name, _ := NameFromFile(file)
			s, err := Compile(context.Background(), name, file, src, rt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCfg, s.Config()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			inst, err := s.NewInstance(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			store := telemetry.NewStore(time.Hour, 0)
			store.Append(start, tc.readings)
			tc.in.Telemetry = store
			for i, st := range tc.steps {
				clock = start.Add(st.at)
				if st.change != nil {
					st.change(tc.in)
				}
				ok, err := inst.Analyze(context.Background(), tc.in)
				if err != nil {
					t.Fatalf("step %d: analyze: %v", i, err)
				}
				if ok != st.analyze {
					t.Fatalf("step %d: analyze = %v, want %v", i, ok, st.analyze)
				}
				if !ok {
					continue
				}
				plan, err := inst.Plan(context.Background(), tc.in)
				if err != nil {
					t.Fatalf("step %d: plan: %v", i, err)
				}
				if diff := cmp.Diff(st.plan, plan); diff != "" {
					t.Errorf("step %d: plan (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// The core policies in the examples folder are the built-in ones, so the
// two cannot drift apart.
func TestBuiltinsMatchExamples(t *testing.T) {
	for _, layer := range []string{"continuum", "cluster", "node"} {
		srcs, err := BuiltinSources(layer)
		if err != nil {
			t.Fatal(err)
		}
		for file, src := range srcs {
			example, err := os.ReadFile(filepath.Join(examplesDir, layer, file))
			if err != nil {
				t.Errorf("built-in %s/%s has no copy in policies/: %v", layer, file, err)
				continue
			}
			if string(example) != string(src) {
				t.Errorf("policies/%s/%s differs from the built-in policy; copy internal/policy/builtin/%s/%s over it", layer, file, layer, file)
			}
		}
	}
	got := map[string][]string{}
	for _, layer := range []string{"continuum", "cluster", "node"} {
		ts, err := Builtins(context.Background(), layer, Runtime{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		for _, tmpl := range ts {
			got[layer] = append(got[layer], tmpl.Name()+" "+tmpl.Origin())
		}
	}
	want := map[string][]string{
		"cluster":   {"dynamicPlacement builtin:cluster/policy-dynamicPlacement.star", "staticPlacement builtin:cluster/policy-staticPlacement.star"},
		"continuum": {"clusterPlacement builtin:continuum/policy-clusterPlacement.star"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("built-in policies (-want +got):\n%s", diff)
	}
}

package policy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A shared mechanism view reads as the per-call one, from several
// instances at once, and refuses a write with Starlark's frozen error.
func TestSharedMechanismView(t *testing.T) {
	s := mustCompile(t, header+`
def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    st = mechanisms["fluidity"]["state"]
    nodes = sorted(st["nodes"])
    copy = dict(st["apps"]["demo"])
    copy["seen"] = True
    return {"fluidity": {"node": st["apps"]["demo"]["node"], "nodes": nodes, "copy": copy,
                         "retries": mechanisms["fluidity"]["options"]["retries"]}}, context
`, Runtime{Logger: quiet()})
	view := MechanismView{
		State:   map[string]any{"apps": map[string]any{"demo": map[string]any{"node": "n2"}}, "nodes": []any{"n2", "n1"}},
		Options: map[string]any{"retries": 3},
	}
	shared, err := view.Shared()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"fluidity": map[string]any{"node": "n2", "nodes": []any{"n1", "n2"},
		"copy": map[string]any{"node": "n2", "seen": true}, "retries": int64(3)}}
	for _, v := range []MechanismView{view, shared} {
		inst, err := s.NewInstance(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, err := inst.Plan(context.Background(), &Inputs{Mechanisms: map[string]MechanismView{"fluidity": v}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("plan, shared=%v (-want +got):\n%s", v.shared != nil, diff)
		}
	}

	// Eight instances read the one shared value at once (go test -race).
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, err := s.NewInstance(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				if _, err := inst.Plan(context.Background(), &Inputs{Mechanisms: map[string]MechanismView{"fluidity": shared}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()

	// A policy that writes into the shared state fails, and says why;
	// the per-call view lets it.
	w := mustCompile(t, `
def initialize():
    return {"scope": "application", "configuration": {"analyze_interval": "10s"}}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    mechanisms["fluidity"]["state"]["apps"]["demo"]["node"] = "elsewhere"
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {}, context
`, Runtime{Logger: quiet()})
	for _, c := range []struct {
		v      MechanismView
		frozen bool
	}{{view, false}, {shared, true}} {
		inst, err := w.NewInstance(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, err = inst.Analyze(context.Background(), &Inputs{Mechanisms: map[string]MechanismView{"fluidity": c.v}})
		if got := err != nil && strings.Contains(err.Error(), "frozen"); got != c.frozen {
			t.Errorf("write into the state, shared=%v: err = %v, want a frozen error %v", c.frozen, err, c.frozen)
		}
	}
	if view.State["apps"].(map[string]any)["demo"].(map[string]any)["node"] != "n2" {
		t.Error("a policy's write reached the Go state")
	}
}

// BenchmarkMechanismState measures the conversion of a cluster's fluidity
// state for one call of an application's policy instance: per call (as
// before) against a view shared by every instance.
func BenchmarkMechanismState(b *testing.B) {
	for _, apps := range []int{50, 200, 500} {
		in := benchInputs(60, 1)
		st := in.Mechanisms["fluidity"].State
		all := map[string]any{}
		for i := range apps {
			all[fmt.Sprintf("app-%03d", i)] = st["applications"].(map[string]any)["bench"]
		}
		st["applications"] = all
		for _, mode := range []string{"per-call", "shared"} {
			b.Run(fmt.Sprintf("apps=%d/%s", apps, mode), func(b *testing.B) {
				view := in.Mechanisms["fluidity"]
				if mode == "shared" {
					var err error
					if view, err = view.Shared(); err != nil {
						b.Fatal(err)
					}
				}
				one := &Inputs{Mechanisms: map[string]MechanismView{"fluidity": view}}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := one.args(nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package mape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/policy"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// scripted is a mechanism for pure-logic tests of the engine: each
// command's "outcome" ("success", "pending", "fail", "early") says what
// Apply does, and every command is recorded.
type scripted struct {
	set *mechanism.Set // for "early": completes before Apply returns
	mu  sync.Mutex
	got []map[string]any
}

func (s *scripted) Apply(_ context.Context, cmd map[string]any) (mechanism.Result, error) {
	s.mu.Lock()
	s.got = append(s.got, cmd)
	s.mu.Unlock()
	switch cmd["outcome"] {
	case "pending":
		return mechanism.Result{Status: mechanism.StatusPending}, nil
	case "early":
		s.set.Complete(mechanism.Completion{PlanID: cmd[mechanism.PlanIDKey].(string), Mechanism: "async", Status: mechanism.StatusSuccess, Detail: map[string]any{"early": true}})
		return mechanism.Result{Status: mechanism.StatusPending}, nil
	case "fail":
		return mechanism.Result{}, errors.New("device busy")
	}
	return mechanism.Result{Status: mechanism.StatusSuccess, Detail: map[string]any{"done": true}}, nil
}
func (s *scripted) State(context.Context) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{"applied": len(s.got)}, nil
}
func (s *scripted) Options() map[string]any { return map[string]any{} }

func (s *scripted) commands() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.got...)
}

// newTestEngine returns an engine with the scripted mechanisms "sync" and
// "async" and a settable clock.
func newTestEngine(t *testing.T, tweak func(*Config)) (*Engine, *scripted, *clock) {
	t.Helper()
	s := &scripted{}
	set := mechanism.NewSet(map[string]mechanism.Mechanism{"sync": s, "async": s})
	s.set = set
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	cfg := Config{Mechanisms: set, Logger: quiet(), Now: c.Now, PlanLogSize: 100}
	if tweak != nil {
		tweak(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, s, c
}

// tick runs one scheduler tick and waits for the executions it started.
func tick(e *Engine) {
	e.schedule(context.Background())
	e.execWG.Wait()
}

func statuses(r PlanRecord) map[string]mechanism.Status {
	out := map[string]mechanism.Status{}
	for n, o := range r.Mechanisms {
		out[n] = o.Status
	}
	return out
}

func TestPlanOutcomes(t *testing.T) {
	type check struct {
		state    PlanState
		statuses map[string]mechanism.Status
		reason   string
	}
	cases := map[string]struct {
		plan        map[string]any
		afterApply  check
		complete    []mechanism.Completion // reported after Apply
		advance     time.Duration          // then the clock moves and a tick runs
		final       check
		completeErr string
	}{
		"success": {
			plan:       map[string]any{"sync": map[string]any{"outcome": "success"}},
			afterApply: check{state: StateCompleted, statuses: map[string]mechanism.Status{"sync": "Success"}},
			final:      check{state: StateCompleted, statuses: map[string]mechanism.Status{"sync": "Success"}},
		},
		"pending then success": {
			plan:       map[string]any{"async": map[string]any{"outcome": "pending"}},
			afterApply: check{state: StatePending, statuses: map[string]mechanism.Status{"async": "Pending"}},
			complete:   []mechanism.Completion{{Mechanism: "async", Status: mechanism.StatusSuccess}},
			final:      check{state: StateCompleted, statuses: map[string]mechanism.Status{"async": "Success"}},
		},
		"pending then failure": {
			plan:       map[string]any{"async": map[string]any{"outcome": "pending"}},
			afterApply: check{state: StatePending, statuses: map[string]mechanism.Status{"async": "Pending"}},
			complete:   []mechanism.Completion{{Mechanism: "async", Status: mechanism.StatusFailed, Err: errors.New("no node fits")}},
			final:      check{state: StateFailed, statuses: map[string]mechanism.Status{"async": "Failed"}, reason: "async: no node fits"},
		},
		"a failed mechanism fails the plan even if another succeeded": {
			plan:       map[string]any{"sync": map[string]any{"outcome": "fail"}, "async": map[string]any{"outcome": "success"}},
			afterApply: check{state: StateFailed, statuses: map[string]mechanism.Status{"sync": "Failed", "async": "Success"}, reason: "sync: device busy"},
			final:      check{state: StateFailed, statuses: map[string]mechanism.Status{"sync": "Failed", "async": "Success"}, reason: "sync: device busy"},
		},
		"success and pending, then the pending one fails": {
			plan:       map[string]any{"sync": map[string]any{"outcome": "success"}, "async": map[string]any{"outcome": "pending"}},
			afterApply: check{state: StatePending, statuses: map[string]mechanism.Status{"sync": "Success", "async": "Pending"}},
			complete:   []mechanism.Completion{{Mechanism: "async", Status: mechanism.StatusFailed, Err: errors.New("lost")}},
			final:      check{state: StateFailed, statuses: map[string]mechanism.Status{"sync": "Success", "async": "Failed"}, reason: "async: lost"},
		},
		"pending plans time out": {
			plan:       map[string]any{"async": map[string]any{"outcome": "pending"}},
			afterApply: check{state: StatePending, statuses: map[string]mechanism.Status{"async": "Pending"}},
			advance:    6 * time.Minute,
			final:      check{state: StateFailed, statuses: map[string]mechanism.Status{"async": "Failed"}, reason: "async: no result within 5m0s"},
		},
		"a result that arrives before Apply returns": {
			plan:       map[string]any{"async": map[string]any{"outcome": "early"}},
			afterApply: check{state: StateCompleted, statuses: map[string]mechanism.Status{"async": "Success"}},
			final:      check{state: StateCompleted, statuses: map[string]mechanism.Status{"async": "Success"}},
		},
		"a second result is refused": {
			plan:        map[string]any{"async": map[string]any{"outcome": "pending"}},
			afterApply:  check{state: StatePending, statuses: map[string]mechanism.Status{"async": "Pending"}},
			complete:    []mechanism.Completion{{Mechanism: "async", Status: mechanism.StatusSuccess}, {Mechanism: "async", Status: mechanism.StatusFailed}},
			final:       check{state: StateCompleted, statuses: map[string]mechanism.Status{"async": "Success"}},
			completeErr: "is not executing (unknown, finished or timed out)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, s, c := newTestEngine(t, nil)
			id, err := e.Submit("test", "", false, tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			verify := func(when string, want check) {
				t.Helper()
				r, ok := e.Plan(id)
				if !ok {
					t.Fatalf("%s: plan %s not found", when, id)
				}
				got := check{state: r.State, statuses: statuses(r), reason: r.Reason}
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(check{})); diff != "" {
					t.Errorf("%s (-want +got):\n%s", when, diff)
				}
			}
			tick(e)
			verify("after apply", tc.afterApply)
			var errs []string
			for _, comp := range tc.complete {
				comp.PlanID = id
				if err := e.Complete(comp); err != nil {
					errs = append(errs, err.Error())
				}
			}
			if tc.advance > 0 {
				c.Add(tc.advance)
				tick(e)
			}
			verify("at the end", tc.final)
			if tc.completeErr == "" && errs != nil || tc.completeErr != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.completeErr)) {
				t.Errorf("Complete errors = %q, want %q", errs, tc.completeErr)
			}
			// Every command carried the plan's id.
			for _, cmd := range s.commands() {
				if cmd[mechanism.PlanIDKey] != id {
					t.Errorf("command %v lacks plan_uid %s", cmd, id)
				}
			}
		})
	}
}

func TestSubmitRefusals(t *testing.T) {
	e, _, _ := newTestEngine(t, nil)
	cases := map[string]struct {
		plan map[string]any
		want string
	}{
		"unknown mechanism":  {plan: map[string]any{"teleporter": map[string]any{}}, want: "mechanism teleporter is not enabled on this agent (enabled: async, sync)"},
		"command not a dict": {plan: map[string]any{"sync": "go"}, want: "the command for mechanism sync is a string, want a dict"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id, err := e.Submit("test", "", false, tc.plan)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			r, _ := e.Plan(id)
			if r.State != StateDiscarded || r.Reason != tc.want {
				t.Errorf("plan = %s %q", r.State, r.Reason)
			}
		})
	}
}

func TestPlanLogIsBounded(t *testing.T) {
	e, _, _ := newTestEngine(t, func(c *Config) { c.PlanLogSize = 3 })
	var ids []string
	for i := 0; i < 5; i++ {
		id, err := e.Submit(fmt.Sprintf("p%d", i), "", false, map[string]any{"sync": map[string]any{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var got []string
	for _, r := range e.Plans(Query{}) {
		got = append(got, r.ID)
	}
	if diff := cmp.Diff([]string{ids[4], ids[3], ids[2]}, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if _, ok := e.Plan(ids[0]); ok {
		t.Error("an evicted plan is still found")
	}
	if got := e.Plans(Query{Policy: "p3"}); len(got) != 1 || got[0].ID != ids[3] {
		t.Errorf("query by policy = %v", got)
	}
	if got := e.Plans(Query{Limit: 1}); len(got) != 1 || got[0].ID != ids[4] {
		t.Errorf("query with limit = %v", got)
	}

	// A pending plan evicted from the log still completes.
	e2, _, _ := newTestEngine(t, func(c *Config) { c.PlanLogSize = 1 })
	pending, _ := e2.Submit("a", "", false, map[string]any{"async": map[string]any{"outcome": "pending"}})
	tick(e2)
	if _, err := e2.Submit("b", "", false, map[string]any{"sync": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if r, ok := e2.Plan(pending); !ok || r.State != StatePending {
		t.Fatalf("evicted pending plan = %v %v", r.State, ok)
	}
	if err := e2.Complete(mechanism.Completion{PlanID: pending, Mechanism: "async", Status: mechanism.StatusSuccess}); err != nil {
		t.Errorf("Complete: %v", err)
	}
}

func TestSchedulerThroughEngine(t *testing.T) {
	e, s, _ := newTestEngine(t, nil)
	ctx := context.Background()
	if err := e.SetApplication(ctx, Application{ID: "x", Description: map[string]any{"name": "x"}}); err != nil {
		t.Fatal(err)
	}
	first, _ := e.Submit("relocate", "x", false, map[string]any{"async": map[string]any{"outcome": "pending"}})
	second, _ := e.Submit("change", "x", false, map[string]any{"async": map[string]any{"outcome": "success"}})
	tick(e)
	// While the first is pending, plans for the same application and
	// mechanism are discarded, core ones wait.
	third, _ := e.Submit("relocate", "x", false, map[string]any{"async": map[string]any{}})
	core, _ := e.Submit("placement", "x", true, map[string]any{"async": map[string]any{"outcome": "success"}})
	tick(e)
	if err := e.Complete(mechanism.Completion{PlanID: first, Mechanism: "async", Status: mechanism.StatusSuccess}); err != nil {
		t.Fatal(err)
	}
	tick(e)
	e.RemoveApplication("x")
	gone, _ := e.Submit("relocate", "x", false, map[string]any{"async": map[string]any{}})
	tick(e)

	want := map[string]string{
		first:  "Completed ",
		second: "Discarded mechanism async is already taken in this tick by plan " + first + " of policy relocate",
		third:  "Discarded mechanism async is still executing plan " + first + " for application x",
		core:   "Completed ",
		gone:   "Discarded application x is no longer managed by this agent",
	}
	got := map[string]string{}
	for id := range want {
		r, _ := e.Plan(id)
		got[id] = string(r.State) + " " + r.Reason
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plans (-want +got):\n%s", diff)
	}
	if n := len(s.commands()); n != 2 {
		t.Errorf("%d commands applied, want 2", n)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	e, _, _ := newTestEngine(t, func(c *Config) { c.Registerer = reg })
	_, _ = e.Submit("a", "", false, map[string]any{"sync": map[string]any{}})
	_, _ = e.Submit("b", "", false, map[string]any{"sync": map[string]any{}})
	_, _ = e.Submit("c", "", false, map[string]any{"nope": map[string]any{}})
	tick(e)
	expected := `
# HELP mlsysops_mape_plan_discards_total Plans discarded by the scheduler, by reason.
# TYPE mlsysops_mape_plan_discards_total counter
mlsysops_mape_plan_discards_total{reason="conflict"} 1
mlsysops_mape_plan_discards_total{reason="unknown_mechanism"} 1
# HELP mlsysops_mape_plan_log_plans Plans in the plan log, by state.
# TYPE mlsysops_mape_plan_log_plans gauge
mlsysops_mape_plan_log_plans{state="Completed"} 1
mlsysops_mape_plan_log_plans{state="Discarded"} 2
mlsysops_mape_plan_log_plans{state="Executing"} 0
mlsysops_mape_plan_log_plans{state="Failed"} 0
mlsysops_mape_plan_log_plans{state="Pending"} 0
mlsysops_mape_plan_log_plans{state="Queued"} 0
# HELP mlsysops_mape_plans_total Plans that reached a state, by state (Queued when a policy produced them; Discarded, Completed or Failed at the end).
# TYPE mlsysops_mape_plans_total counter
mlsysops_mape_plans_total{state="Completed"} 1
mlsysops_mape_plans_total{state="Discarded"} 2
mlsysops_mape_plans_total{state="Executing"} 1
mlsysops_mape_plans_total{state="Queued"} 3
# HELP mlsysops_mape_mechanism_results_total Outcomes of mechanisms' parts of plans, by mechanism and status (Success, Pending, Failed).
# TYPE mlsysops_mape_mechanism_results_total counter
mlsysops_mape_mechanism_results_total{mechanism="sync",status="Success"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"mlsysops_mape_plan_discards_total", "mlsysops_mape_plan_log_plans", "mlsysops_mape_plans_total", "mlsysops_mape_mechanism_results_total"); err != nil {
		t.Error(err)
	}
}

func TestQoSMetrics(t *testing.T) {
	qos := func(ids ...string) []any {
		var out []any
		for _, id := range ids {
			out = append(out, map[string]any{"application_metric_id": id, "target": 1})
		}
		return out
	}
	cases := map[string]struct {
		desc map[string]any
		want []string
	}{
		"flat (continuum)": {desc: map[string]any{"components": []any{map[string]any{"qos_metrics": qos("b", "a")}}}, want: []string{"a", "b"}},
		"with a spec (cluster, node)": {desc: map[string]any{"name": "x", "spec": map[string]any{"components": []any{
			map[string]any{"qos_metrics": qos("a")}, map[string]any{"qos_metrics": qos("a", "c")}, map[string]any{},
		}}}, want: []string{"a", "c"}},
		"none": {desc: map[string]any{"name": "x"}, want: []string{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, QoSMetrics(tc.desc)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

// compileTemplate compiles a policy for engine tests.
func compileTemplate(t *testing.T, name, src string, limits policy.Limits) policy.Template {
	t.Helper()
	s, err := policy.Compile(context.Background(), name, "policy-"+name+".star", []byte(src), policy.Runtime{Limits: limits, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTelemetryRequests(t *testing.T) {
	e, _, _ := newTestEngine(t, func(c *Config) { c.MonitoringInterval = 5 * time.Second; c.DefaultMetrics = []string{"node_load5"} })
	ctx := context.Background()
	fast := compileTemplate(t, "fast", `
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "1m"},
            "telemetry": {"metrics": ["node_load1"], "system_scrape_interval": "1s"}}
def analyze(c, a, s, m, t, ml):
    return False, c
def plan(c, a, s, m, t, ml):
    return {}, c
`, policy.Limits{})
	e.SetPolicy(ctx, fast)
	_ = e.SetApplication(ctx, Application{ID: "app", Description: map[string]any{"components": []any{map[string]any{"qos_metrics": []any{map[string]any{"application_metric_id": "latency"}}}}}})
	if got := e.Sampler().Interval(); got != time.Second {
		t.Errorf("interval = %s, want the policy's 1s", got)
	}
	if diff := cmp.Diff([]string{"latency", "node_load1", "node_load5"}, e.Sampler().Wanted()); diff != "" {
		t.Errorf("wanted: %s", diff)
	}
	e.RemovePolicy("fast")
	e.RemovePolicy("fast") // harmless
	e.RemoveApplication("app")
	if got := e.Sampler().Interval(); got != 5*time.Second {
		t.Errorf("interval after removal = %s, want the monitoring interval", got)
	}
	if diff := cmp.Diff([]string{"node_load5"}, e.Sampler().Wanted()); diff != "" {
		t.Errorf("wanted after removal: %s", diff)
	}
}

// A plan for an action the node does not permit is refused by the real
// CPU mechanism, and the plan fails with the reason.
func TestForbiddenActionFailsThePlan(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "devices", "system", "cpu", "cpu0", "cpufreq")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"scaling_governor": "powersave", "scaling_available_governors": "performance powersave",
		"scaling_min_freq": "800000", "scaling_max_freq": "3000000", "cpuinfo_min_freq": "800000", "cpuinfo_max_freq": "3000000"} {
		if err := os.WriteFile(filepath.Join(d, f), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := mechanism.NewBuiltinRegistry().Build([]string{mechanism.CPUFrequencyName}, mechanism.Env{
		SysfsRoot: root, Permissions: mechanism.NewPermissions([]string{"gpu_frequency"}), Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Mechanisms: set, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.Submit("cpu", "", false, map[string]any{mechanism.CPUFrequencyName: map[string]any{"command": "set", "cpu": "all", "frequency": "min"}})
	if err != nil {
		t.Fatal(err)
	}
	tick(e)
	r, _ := e.Plan(id)
	if r.State != StateFailed || !strings.Contains(r.Reason, "action cpu_frequency is not permitted on this node") {
		t.Errorf("plan = %s %q", r.State, r.Reason)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "scaling_max_freq")); string(b) != "3000000\n" {
		t.Errorf("scaling_max_freq changed to %q", b)
	}
}

// recorded returns the values of key in the commands the scripted
// mechanism received.
func recorded(s *scripted, key string) []any {
	var out []any
	for _, c := range s.commands() {
		out = append(out, c[key])
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Controllers set an application at every pass: unchanged, it is not
// updated again (and not logged); changed, its description is replaced.
func TestSetApplicationUnchangedIsQuiet(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	e, _, _ := newTestEngine(t, func(c *Config) { c.Logger = log })
	ctx := context.Background()
	desc := func(image string) map[string]any {
		return map[string]any{"name": "a", "spec": map[string]any{"components": []any{map[string]any{"image": image}}}}
	}
	for range 3 {
		if err := e.SetApplication(ctx, Application{ID: "a", Description: desc("x:1")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.SetApplication(ctx, Application{ID: "a", Description: desc("x:2")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if n := strings.Count(out, "application added"); n != 1 {
		t.Errorf("%d additions logged, want 1:\n%s", n, out)
	}
	if n := strings.Count(out, "application updated"); n != 1 {
		t.Errorf("%d updates logged, want 1 (only the change):\n%s", n, out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

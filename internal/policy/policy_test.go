package policy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// header is a valid initialize for test policies.
const header = `
def initialize():
    return {"scope": "application", "configuration": {"analyze_interval": "10s"}, "count": 0}
`

const passAnalyzePlan = `
def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return False, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {}, context
`

func compile(t *testing.T, src string, rt Runtime) (*Script, error) {
	t.Helper()
	return Compile(context.Background(), "test", "policy-test.star", []byte(src), rt)
}

func mustCompile(t *testing.T, src string, rt Runtime) *Script {
	t.Helper()
	s, err := compile(t, src, rt)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return s
}

func TestCompileErrors(t *testing.T) {
	cases := map[string]struct {
		src     string
		limits  Limits
		want    string
		wantErr error
	}{
		"syntax error": {
			src:  header + "def analyze(context\n",
			want: "policy-test.star:5:1: load: got end of file, want ')'",
		},
		"undefined name": {
			src:  header + passAnalyzePlan + "x = undefined_thing\n",
			want: "policy-test.star:10:5: load: undefined: undefined_thing",
		},
		"load is not available": {
			src:  `load("other.star", "x")` + "\n" + header + passAnalyzePlan,
			want: "policy-test.star:1:1: load: cannot load other.star: load() is not available in policies; put everything in the policy file",
		},
		"analyze missing": {
			src:  header + "def plan(context, a, s, m, t, ml):\n    return {}, context\n",
			want: "policy-test.star: load: analyze is not defined; a policy defines " + contract,
		},
		"plan is not a function": {
			src:  header + passAnalyzePlan + "plan = 3\n",
			want: "policy-test.star: load: plan is a int, not a function",
		},
		"analyze takes too few parameters": {
			src:  header + "def analyze(context, app):\n    return False, context\n" + "def plan(c, a, s, m, t, ml):\n    return {}, c\n",
			want: "policy-test.star:4:1: load: analyze: takes 2 positional parameters (2 required), it is called with 6; a policy defines " + contract,
		},
		"extra upstream parameter without a default": {
			src:  header + passAnalyzePlan + "def plan(c, a, s, m, t, ml, available_assets):\n    return {}, c\n",
			want: "policy-test.star:10:1: load: plan: takes 7 positional parameters (7 required), it is called with 6; a policy defines " + contract,
		},
		"initialize fails at run time": {
			src:  "def initialize():\n    x = {}\n    return x['scope']\n" + passAnalyzePlan,
			want: `policy-test.star:3:13: initialize: key "scope" not in dict`,
		},
		"initialize returns a bad configuration": {
			src:  "def initialize():\n    return {'scope': 'app', 'telemetry': {'metrics': [1], 'system_scrape_interval': 'soon'}, 'core': 'yes'}\n" + passAnalyzePlan,
			want: `policy-test.star:1:1: initialize: returned a bad configuration: scope: want "application" or "global", got "app"; configuration.analyze_interval: required, e.g. "10s" ("0" runs analyze once); telemetry.metrics: [0]: want a string, got 1; telemetry.system_scrape_interval: interval "soon": want a duration such as 5s, 10m, 2h or 1d; core: want True or False, got "yes"`,
		},
		"initialize returns a list": {
			src:  "def initialize():\n    return []\n" + passAnalyzePlan,
			want: "policy-test.star:1:1: initialize: returned list, want a dict with at least scope and configuration.analyze_interval",
		},
		"endless top level": {
			src:     header + passAnalyzePlan + "n = 0\nwhile True:\n    n += 1\n",
			limits:  Limits{MaxSteps: 10000, Timeout: time.Minute},
			want:    "policy-test.star:12:7: load: stopped: policy exceeded its execution step limit (an endless loop?)",
			wantErr: ErrStepLimit,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := compile(t, tc.src, Runtime{Limits: tc.limits})
			if err == nil {
				t.Fatal("compiled")
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is a %T, want *Error", err, err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error does not wrap %v", tc.wantErr)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	cases := map[string]struct {
		init string
		want Config
	}{
		"upstream shape": {
			init: `{"scope": "global", "core": True, "mechanisms": ["CPUFrequencyConfigurator"], "packages": [],
			        "telemetry": {"metrics": ["node_load1"], "system_scrape_interval": "1s"},
			        "configuration": {"analyze_interval": "4s"}, "latest_timestamp": None}`,
			want: Config{Scope: ScopeGlobal, Core: true, Mechanisms: []string{"CPUFrequencyConfigurator"}, Metrics: []string{"node_load1"}, ScrapeInterval: time.Second, AnalyzeInterval: 4 * time.Second},
		},
		"top-level interval, run once": {
			init: `{"scope": "application", "analyze_interval": "0"}`,
			want: Config{Scope: ScopeApplication},
		},
		"minutes and days": {
			init: `{"scope": "application", "configuration": {"analyze_interval": "1d"}, "telemetry": {"system_scrape_interval": "2m"}}`,
			want: Config{Scope: ScopeApplication, AnalyzeInterval: 24 * time.Hour, ScrapeInterval: 2 * time.Minute},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := mustCompile(t, "def initialize():\n    return "+strings.ReplaceAll(tc.init, "\n", " ")+"\n"+passAnalyzePlan, Runtime{})
			if diff := cmp.Diff(tc.want, s.Config()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// store returns a telemetry store with node_load1 = 2.5 now and 1.5 ten
// seconds ago, and per-CPU utilisation.
func store(now time.Time) *telemetry.Store {
	s := telemetry.NewStore(time.Hour, 0)
	s.Append(now.Add(-10*time.Second), []telemetry.Reading{{Name: "node_load1", Value: 1.5}})
	s.Append(now, []telemetry.Reading{
		{Name: "node_load1", Value: 2.5},
		{Name: "node_cpu_core_utilisation_ratio", Labels: telemetry.Labels{"cpu": "0"}, Value: 0.25},
		{Name: "node_cpu_core_utilisation_ratio", Labels: telemetry.Labels{"cpu": "1"}, Value: 0.75},
	})
	return s
}

func TestInstance(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var logs bytes.Buffer
	rt := Runtime{Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	s := mustCompile(t, header+`
def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    context["count"] += 1
    if context["count"] == 2:
        context["configuration"]["analyze_interval"] = "1m"
    app = application_description[0]
    log("analyzing", app = app["name"], count = context["count"], level = "debug")
    print("printed", ml_connector)
    return telemetry.latest("node_load1") > 2, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    app = application_description[0]
    return {
        "CPUFrequencyConfigurator": {"command": "set", "cpu": "all", "frequency": "max"},
        "report": {
            "app": app["name"],
            "node": system_description["MLSysOpsNode"]["name"],
            "cores": mechanisms["CPUFrequencyConfigurator"]["state"]["cores"],
            "load": telemetry["node_load1"],
            "missing": telemetry["no_such_metric"],
            "cpu1": metric(telemetry, "node_cpu_core_utilisation_ratio", cpu = "1"),
            "any_cpu": telemetry.latest("node_cpu_core_utilisation_ratio"),
            "default": metric(telemetry, "nope", -1),
            "history": telemetry.query("node_load1", seconds = 60),
            "recent": telemetry.query("node_load1", 5),
            "series": telemetry.select("node_cpu_core_utilisation_ratio", labels = {"cpu": "0"}),
            "names": telemetry.metrics(),
            "now": now(),
            "interval": parse_duration("2m"),
            "json": json.decode(json.encode({"a": [1, 2.5, None]})),
            "ml": ml_connector,
        },
    }, context
`, rt)
	inst, err := s.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	in := &Inputs{
		Applications: []map[string]any{{"name": "app-1"}},
		System:       map[string]any{"MLSysOpsNode": map[string]any{"name": "edge-1"}},
		Mechanisms:   map[string]MechanismView{"CPUFrequencyConfigurator": {State: map[string]any{"cores": 4}, Options: map[string]any{}}},
		Telemetry:    store(now),
		MLConnector:  "http://mlconnector:8090",
	}
	for i, want := range []time.Duration{10 * time.Second, time.Minute} {
		ok, err := inst.Analyze(context.Background(), in)
		if err != nil || !ok {
			t.Fatalf("analyze %d = %v, %v", i, ok, err)
		}
		if got := inst.Config().AnalyzeInterval; got != want {
			t.Errorf("interval after analyze %d = %s, want %s", i, got, want)
		}
	}
	got, err := inst.Plan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	ts := float64(now.Unix())
	want := map[string]any{
		"CPUFrequencyConfigurator": map[string]any{"command": "set", "cpu": "all", "frequency": "max"},
		"report": map[string]any{
			"app": "app-1", "node": "edge-1", "cores": int64(4),
			"load": 2.5, "missing": nil, "cpu1": 0.75, "any_cpu": 0.25, "default": int64(-1),
			"history": []any{[]any{ts - 10, 1.5}, []any{ts, 2.5}},
			"recent":  []any{[]any{ts, 2.5}},
			"series":  []any{map[string]any{"labels": map[string]any{"cpu": "0"}, "time": ts, "value": 0.25}},
			"names":   []any{"node_cpu_core_utilisation_ratio", "node_load1"},
			"now":     ts, "interval": 120.0,
			"json": map[string]any{"a": []any{int64(1), 2.5, nil}},
			"ml":   "http://mlconnector:8090",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	ctxData, err := inst.Context()
	if err != nil {
		t.Fatal(err)
	}
	if ctxData["count"] != int64(2) {
		t.Errorf("context count = %v, want 2", ctxData["count"])
	}
	// A second instance has its own context.
	other, _ := s.NewInstance(context.Background())
	if c, _ := other.Context(); c["count"] != int64(0) {
		t.Errorf("new instance count = %v", c["count"])
	}
	for _, w := range []string{`level=DEBUG msg=analyzing policy=test app=app-1 count=1 line=`, `msg="printed http://mlconnector:8090" policy=test`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("logs lack %q:\n%s", w, logs.String())
		}
	}
}

func TestInstanceErrors(t *testing.T) {
	in := &Inputs{Applications: []map[string]any{{"name": "a"}}}
	cases := map[string]struct {
		body    string
		phase   string
		limits  Limits
		want    string
		wantErr error
	}{
		"analyze returns a bool only": {
			body:  "def analyze(c, a, s, m, t, ml):\n    return True\n",
			phase: "analyze",
			want:  "policy-test.star:4:1: analyze: returned bool, want a pair (bool, context)",
		},
		"analyze returns a string decision": {
			body:  "def analyze(c, a, s, m, t, ml):\n    return 'yes', c\n",
			phase: "analyze",
			want:  "policy-test.star:4:1: analyze: returned string as the decision, want True or False",
		},
		"context replaced by a list": {
			body:  "def analyze(c, a, s, m, t, ml):\n    return False, []\n",
			phase: "analyze",
			want:  "policy-test.star:4:1: analyze: returned a list as the context, want the context dict",
		},
		"bad interval in context": {
			body:  "def analyze(c, a, s, m, t, ml):\n    c['configuration']['analyze_interval'] = 'often'\n    return False, c\n",
			phase: "analyze",
			want:  `policy-test.star:4:1: analyze: context: configuration.analyze_interval: interval "often": want a duration such as 5s, 10m, 2h or 1d`,
		},
		"runtime error deep in a helper": {
			body:  "def helper(x):\n    return x['missing']\n\ndef analyze(c, a, s, m, t, ml):\n    return helper({}), c\n",
			phase: "analyze",
			want:  `policy-test.star:5:13: analyze: key "missing" not in dict`,
		},
		"plan with a function in it": {
			body:  "def plan(c, a, s, m, t, ml):\n    return {'x': {'f': len}}, c\n",
			phase: "plan",
			want:  "policy-test.star:6:1: plan: the plan is not data: plan.x.f: a builtin_function_or_method is not data; use dicts, lists, strings, numbers, booleans and None",
		},
		"plan with an int key": {
			body:  "def plan(c, a, s, m, t, ml):\n    return {'fluidity': {1: 'a'}}, c\n",
			phase: "plan",
			want:  "policy-test.star:6:1: plan: the plan is not data: plan.fluidity: key 1 is a int; keys must be strings",
		},
		"plan that is a list": {
			body:  "def plan(c, a, s, m, t, ml):\n    return [1], c\n",
			phase: "plan",
			want:  "policy-test.star:6:1: plan: returned a list as the plan, want a dict from mechanism name to command",
		},
		"a policy that loops forever is stopped by the step limit": {
			body:    "def analyze(c, a, s, m, t, ml):\n    n = 0\n    while True:\n        n += 1\n    return False, c\n",
			phase:   "analyze",
			limits:  Limits{MaxSteps: 100000, Timeout: time.Minute},
			want:    "policy-test.star:7:11: analyze: stopped: policy exceeded its execution step limit (an endless loop?)",
			wantErr: ErrStepLimit,
		},
		"a policy that loops forever is stopped by the time limit": {
			body:    "def analyze(c, a, s, m, t, ml):\n    for i in range(1 << 60):\n        pass\n    return False, c\n",
			phase:   "analyze",
			limits:  Limits{MaxSteps: 1 << 62, Timeout: 50 * time.Millisecond},
			want:    "policy-test.star:5:5: analyze: stopped: policy exceeded its time limit",
			wantErr: ErrTimeout,
		},
		"deep recursion is stopped": {
			body:    "def f(n):\n    return f(n + 1)\n\ndef analyze(c, a, s, m, t, ml):\n    return f(0), c\n",
			phase:   "analyze",
			limits:  Limits{MaxSteps: 200000, Timeout: time.Minute},
			want:    "policy-test.star:4:1: analyze: stopped: policy exceeded its call depth limit: f nested 201 calls deep, the limit is 200 (endless recursion?)",
			wantErr: ErrDepthLimit,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := header
			if tc.phase == "analyze" {
				src += tc.body + "def plan(c, a, s, m, t, ml):\n    return {}, c\n"
			} else {
				src += "def analyze(c, a, s, m, t, ml):\n    return True, c\n" + tc.body
			}
			s := mustCompile(t, src, Runtime{Limits: tc.limits})
			inst, err := s.NewInstance(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tc.phase == "analyze" {
				_, err = inst.Analyze(context.Background(), in)
			} else {
				_, err = inst.Plan(context.Background(), in)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error does not wrap %v", tc.wantErr)
			}
		})
	}
}

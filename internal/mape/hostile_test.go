package mape

import (
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/policy"
)

// Hostile policies (testdata/hostile, each file says what it tries) are
// loaded by the real watcher and run by the engine beside a good one:
// every hostile call is stopped with an error that says why, the agent's
// process survives (endless recursion used to overflow the Go stack),
// and the good policy keeps planning.
func TestHostilePolicies(t *testing.T) {
	rt := policy.Runtime{Logger: quiet(), Limits: policy.Limits{
		// Steps and time are not what stops these: the sandbox is.
		MaxSteps:  1 << 40,
		Timeout:   time.Minute,
		MaxMemory: 64 << 20,
	}}
	watcher := policy.NewWatcher(policy.WatcherOptions{Dir: "testdata/hostile", Runtime: rt, PollInterval: time.Hour, Logger: quiet()})
	e, s, _ := newTestEngine(t, func(c *Config) {
		c.Policies = watcher
		c.TickInterval = 10 * time.Millisecond
		c.Now = time.Now
		c.Workers = 2
	})
	startEngine(t, e)

	running := map[string]string{
		"recurse":       "stopped: policy exceeded its call depth limit: deeper nested",
		"mutual":        "stopped: policy exceeded its call depth limit:",
		"repeat":        "stopped: policy exceeded its memory limit: list * 8589934592 would take 131072 MiB or more",
		"repeat-assign": "stopped: policy exceeded its memory limit: string * 1099511627776 would take 1048576 MiB or more",
		"materialise":   "stopped: policy exceeded its memory limit:",
		"extend":        "stopped: policy exceeded its memory limit: extend to 17179869184 elements",
		"amplify":       "stopped: policy exceeded its memory limit:",
		"grow":          "stopped: policy exceeded its memory limit:",
	}
	notLoaded := map[string]string{
		"load-time":  "policy-load-time.star:2:18: load: stopped: policy exceeded its memory limit: list() of 68719476736 elements",
		"loads-file": "load() is not available in policies",
		"shadow":     "policy-shadow.star:2:5: load: __sandbox_mul: names starting with __sandbox_ are reserved",
	}
	status := func() map[string]PolicyStatus {
		out := map[string]PolicyStatus{}
		for _, p := range e.Policies() {
			out[p.Name] = p
		}
		return out
	}
	// Each hostile policy fails at least once per attack it alternates
	// between.
	attacks := map[string]int{"materialise": 2, "amplify": 4, "grow": 2}
	t.Cleanup(func() {
		if t.Failed() {
			for name, p := range status() {
				t.Logf("%s: errors %d, instances %d, last error %q", name, p.Errors, p.Instances, p.LastError)
			}
		}
	})
	waitFor(t, "every hostile policy to fail each of its attacks", func() bool {
		st := status()
		for name := range running {
			if st[name].Errors < max(1, attacks[name]) {
				return false
			}
		}
		return true
	})
	st := status()
	for name, want := range running {
		if !strings.Contains(st[name].LastError, want) {
			t.Errorf("%s: last error = %q, want one containing %q", name, st[name].LastError, want)
		}
		if !strings.HasPrefix(st[name].LastError, "testdata/hostile/policy-"+name+".star:") {
			t.Errorf("%s: last error = %q, want it located in policy-%s.star", name, st[name].LastError, name)
		}
	}
	for name, want := range notLoaded {
		if got := st[name].LastError; !strings.HasPrefix(got, "not loaded: ") || !strings.Contains(got, want) {
			t.Errorf("%s: last error = %q, want \"not loaded: ...%s...\"", name, got, want)
		}
		if st[name].Instances != 0 {
			t.Errorf("%s: %d instances, want none", name, st[name].Instances)
		}
	}
	// The good policy planned before and keeps planning after.
	if st["good"].Errors != 0 {
		t.Errorf("good policy: %d errors (last %q), want none", st["good"].Errors, st["good"].LastError)
	}
	before, _ := lastVersion(s).(int64)
	if before == 0 {
		t.Fatal("the good policy made no plan while the hostile ones ran")
	}
	waitFor(t, "the good policy's next plans", func() bool {
		v, _ := lastVersion(s).(int64)
		return v >= before+3
	})
}

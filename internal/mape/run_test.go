package mape

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/policy"
)

// recorderPolicy plans {"sync": {"version": version, "apps": [names]}}
// at every analyze.
func recorderPolicy(version int, scope string) string {
	return fmt.Sprintf(`
def initialize():
    return {"scope": %q, "configuration": {"analyze_interval": "20ms"}, "version": %d}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {"sync": {"version": context["version"], "apps": [a["name"] + ":" + a.get("tag", "") for a in application_description]}}, context
`, scope, version)
}

func startEngine(t *testing.T, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// lastVersion is the version of the latest command the recorder got.
func lastVersion(s *scripted) any {
	v := recorded(s, "version")
	if len(v) == 0 {
		return nil
	}
	return v[len(v)-1]
}

// A policy added, edited (in place and through a ConfigMap ..data swap)
// and removed while the engine runs takes effect each time; a broken edit
// keeps the previous version running and is reported with file:line.
func TestHotReload(t *testing.T) {
	dir := t.TempDir()
	watcher := policy.NewWatcher(policy.WatcherOptions{Dir: dir, PollInterval: 100 * time.Millisecond, Debounce: 10 * time.Millisecond, Logger: quiet()})
	e, s, _ := newTestEngine(t, func(c *Config) {
		c.Policies = watcher
		c.TickInterval = 10 * time.Millisecond
		c.Now = time.Now
	})
	startEngine(t, e)

	// Added: a plain file.
	file := filepath.Join(dir, "policy-rec.star")
	if err := os.WriteFile(file, []byte(recorderPolicy(1, "global")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "version 1 plans", func() bool { return lastVersion(s) == int64(1) })

	// Edited in place.
	if err := os.WriteFile(file, []byte(recorderPolicy(2, "global")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "version 2 plans", func() bool { return lastVersion(s) == int64(2) })

	// Edited through the ConfigMap layout: the file becomes a symlink
	// through ..data, which is then swapped.
	swap := func(gen, version int, content string) {
		t.Helper()
		ts := fmt.Sprintf("..2025_%d", gen)
		if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ts, "policy-rec.star"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap(1, 3, recorderPolicy(3, "global"))
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "policy-rec.star"), file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "version 3 plans", func() bool { return lastVersion(s) == int64(3) })
	swap(2, 4, recorderPolicy(4, "global"))
	waitFor(t, "version 4 plans after the ..data swap", func() bool { return lastVersion(s) == int64(4) })

	// A broken edit: reported with file:line, version 4 keeps running.
	swap(3, 0, "def initialize():\n    return {\"scope\": \"global\"\n")
	waitFor(t, "the load error", func() bool {
		for _, p := range e.Policies() {
			if p.Name == "rec" && strings.Contains(p.LastError, file+":") {
				return true
			}
		}
		return false
	})
	before := len(s.commands())
	waitFor(t, "more version 4 plans", func() bool { return len(s.commands()) > before+2 && lastVersion(s) == int64(4) })

	// Removed: no plans from it afterwards.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removal", func() bool { return len(e.Policies()) == 0 })
	removedAt := time.Now()
	// Another policy shows the engine still runs; the removed one made
	// no plan since.
	if err := os.WriteFile(filepath.Join(dir, "policy-other.star"), []byte(recorderPolicy(5, "global")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other policy's plans", func() bool { return lastVersion(s) == int64(5) })
	for _, r := range e.Plans(Query{Policy: "rec"}) {
		if r.Created.After(removedAt) {
			t.Errorf("plan %s of the removed policy created after its removal", r.ID)
		}
	}
}

// A policy that loops forever is stopped at every call and reported; the
// engine and the other policies go on.
func TestLoopingPolicyIsStopped(t *testing.T) {
	e, s, _ := newTestEngine(t, func(c *Config) { c.TickInterval = 10 * time.Millisecond; c.Now = time.Now })
	ctx := context.Background()
	spin := compileTemplate(t, "spin", `
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "10ms"}}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    n = 0
    while True:
        n += 1
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {"sync": {}}, context
`, policy.Limits{MaxSteps: 200000, Timeout: time.Minute})
	e.SetPolicy(ctx, spin)
	e.SetPolicy(ctx, compileTemplate(t, "ok", recorderPolicy(7, "global"), policy.Limits{}))
	startEngine(t, e)
	waitFor(t, "the spinning policy's error", func() bool {
		for _, p := range e.Policies() {
			if p.Name == "spin" && p.Errors >= 2 {
				return true
			}
		}
		return false
	})
	waitFor(t, "the other policy's plans", func() bool { return lastVersion(s) == int64(7) })
	for _, p := range e.Policies() {
		if p.Name == "spin" {
			// The line of the loop's body, and why it stopped.
			if !strings.HasPrefix(p.LastError, "policy-spin.star:8:") || !strings.HasSuffix(p.LastError, ": analyze: stopped: policy exceeded its execution step limit (an endless loop?)") {
				t.Errorf("last error = %q, want one at policy-spin.star:8 saying the step limit stopped it", p.LastError)
			}
		}
	}
}

// Application-scope policies get an instance per application, see
// updates, and stop with the application; global ones see all.
func TestApplicationsAtRunTime(t *testing.T) {
	e, s, _ := newTestEngine(t, func(c *Config) { c.TickInterval = 10 * time.Millisecond; c.Now = time.Now })
	ctx := context.Background()
	e.SetPolicy(ctx, compileTemplate(t, "per-app", recorderPolicy(1, "application"), policy.Limits{}))
	startEngine(t, e)

	seen := func(want string) func() bool {
		return func() bool {
			for _, c := range s.commands() {
				apps, _ := c["apps"].([]any)
				if len(apps) == 1 && apps[0] == want {
					return true
				}
			}
			return false
		}
	}
	_ = e.SetApplication(ctx, Application{ID: "a", Description: map[string]any{"name": "a", "tag": "v1"}})
	_ = e.SetApplication(ctx, Application{ID: "b", Description: map[string]any{"name": "b", "tag": "v1"}})
	waitFor(t, "plans for a", seen("a:v1"))
	waitFor(t, "plans for b", seen("b:v1"))
	_ = e.SetApplication(ctx, Application{ID: "a", Description: map[string]any{"name": "a", "tag": "v2"}})
	waitFor(t, "plans for a's new description", seen("a:v2"))

	e.RemoveApplication("b")
	if got := e.Policies()[0].Instances; got != 1 {
		t.Errorf("instances after removing b = %d, want 1", got)
	}
	removedAt := time.Now()

	// A global policy added now sees the remaining application.
	e.SetPolicy(ctx, compileTemplate(t, "global", recorderPolicy(2, "global"), policy.Limits{}))
	waitFor(t, "the global policy's plans", seen("a:v2"))
	waitFor(t, "a global plan", func() bool { return len(e.Plans(Query{Policy: "global", State: StateCompleted})) > 0 })
	for _, r := range e.Plans(Query{App: "b"}) {
		if r.Created.After(removedAt) && r.State != StateDiscarded {
			t.Errorf("plan %s for removed application b is %s", r.ID, r.State)
		}
	}
}

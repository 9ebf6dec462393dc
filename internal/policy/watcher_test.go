package policy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// quiet is a logger for tests whose logs are expected noise.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// versioned is a policy whose context carries its version.
func versioned(version int) string {
	return fmt.Sprintf(`
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "1s"}, "version": %d}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {"recorder": {"version": context["version"]}}, context
`, version)
}

const broken = `
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "1s"}}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector)
    return True, context
`

// versionOf returns the version a loaded template declares.
func versionOf(t *testing.T, tmpl Template) int64 {
	t.Helper()
	inst, err := tmpl.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := inst.Context()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := c["version"].(int64)
	return v
}

// summary renders events as "kind name vN" (or the error) for cmp.
func summary(t *testing.T, events []Event) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		switch e.Kind {
		case Added, Updated:
			out = append(out, fmt.Sprintf("%s %s v%d", e.Kind, e.Name, versionOf(t, e.Template)))
		case Failed:
			out = append(out, fmt.Sprintf("%s %s: %v", e.Kind, e.Name, e.Err))
		default:
			out = append(out, fmt.Sprintf("%s %s", e.Kind, e.Name))
		}
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherPlainFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	builtin, err := Compile(ctx, "core", "builtin/cluster/policy-core.star", []byte(versioned(100)), Runtime{})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(WatcherOptions{Dir: dir, Builtins: []Template{builtin}, Logger: quiet()})
	a := filepath.Join(dir, "policy-a.star")

	steps := []struct {
		name   string
		change func()
		want   []string
		loaded map[string]int64
	}{
		{
			name: "built-in policies load with an empty folder",
			want: []string{"added core v100"}, loaded: map[string]int64{"core": 100},
		},
		{
			name:   "a new file",
			change: func() { write(t, a, versioned(1)) },
			want:   []string{"added a v1"}, loaded: map[string]int64{"a": 1, "core": 100},
		},
		{
			name:   "nothing changed",
			change: func() {},
			loaded: map[string]int64{"a": 1, "core": 100},
		},
		{
			name:   "an edit",
			change: func() { write(t, a, versioned(2)) },
			want:   []string{"updated a v2"}, loaded: map[string]int64{"a": 2, "core": 100},
		},
		{
			name:   "a broken edit keeps version 2 running and says where",
			change: func() { write(t, a, broken) },
			want:   []string{"failed a: " + a + ":5: load: got newline, want ':'"}, loaded: map[string]int64{"a": 2, "core": 100},
		},
		{
			name:   "the same broken file is reported once",
			change: func() {},
			loaded: map[string]int64{"a": 2, "core": 100},
		},
		{
			name:   "the fix",
			change: func() { write(t, a, versioned(3)) },
			want:   []string{"updated a v3"}, loaded: map[string]int64{"a": 3, "core": 100},
		},
		{
			name: "files that are not policies are ignored",
			change: func() {
				write(t, filepath.Join(dir, "policy-old.py"), "def initialize(): pass\n")
				write(t, filepath.Join(dir, "_policy-disabled.star"), versioned(9))
				write(t, filepath.Join(dir, "README.md"), "notes\n")
			},
			loaded: map[string]int64{"a": 3, "core": 100},
		},
		{
			name:   "a file replaces the built-in policy of its name",
			change: func() { write(t, filepath.Join(dir, "policy-core.star"), versioned(4)) },
			want:   []string{"updated core v4"}, loaded: map[string]int64{"a": 3, "core": 4},
		},
		{
			name: "removals; the built-in policy comes back",
			change: func() {
				for _, f := range []string{a, filepath.Join(dir, "policy-core.star")} {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []string{"removed a", "updated core v100"}, loaded: map[string]int64{"core": 100},
		},
	}
	for _, step := range steps {
		if step.change != nil {
			step.change()
		}
		events, err := w.Scan(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if diff := cmp.Diff(step.want, summary(t, events)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", step.name, diff)
		}
		loaded := map[string]int64{}
		for _, p := range w.Policies() {
			loaded[p.Name()] = versionOf(t, p)
		}
		if diff := cmp.Diff(step.loaded, loaded); diff != "" {
			t.Errorf("%s: loaded (-want +got):\n%s", step.name, diff)
		}
	}
}

func TestWatcherBrokenNewFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "policy-bad.star"), broken)
	w := NewWatcher(WatcherOptions{Dir: dir, Logger: quiet()})
	events, err := w.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Kind != Failed {
		t.Fatalf("events = %v", summary(t, events))
	}
	var pe *Error
	if !errors.As(events[0].Err, &pe) || pe.Line != 5 || pe.Location() != filepath.Join(dir, "policy-bad.star")+":5" || pe.File != filepath.Join(dir, "policy-bad.star") {
		t.Errorf("error = %#v, want one at line 5 of the file", events[0].Err)
	}
	if len(w.Policies()) != 0 {
		t.Errorf("a broken policy was loaded")
	}
	if _, ok := w.Errors()["bad"]; !ok {
		t.Errorf("Errors() = %v", w.Errors())
	}
	if err := os.Remove(filepath.Join(dir, "policy-bad.star")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.Errors()) != 0 {
		t.Errorf("the error of a removed file is still reported: %v", w.Errors())
	}
}

// configMap lays out a folder the way the kubelet does for a ConfigMap
// volume: the files live in a timestamped folder, ..data points at it,
// and each key is a symlink through ..data. update swaps ..data
// atomically, exactly as the kubelet's atomic writer does.
type configMap struct {
	t   *testing.T
	dir string
	gen int
}

func (c *configMap) update(files map[string]string) {
	c.t.Helper()
	c.gen++
	ts := fmt.Sprintf("..2025_01_01_00_00_%02d.%d", c.gen, c.gen)
	if err := os.Mkdir(filepath.Join(c.dir, ts), 0o755); err != nil {
		c.t.Fatal(err)
	}
	for name, content := range files {
		write(c.t, filepath.Join(c.dir, ts, name), content)
	}
	old, _ := os.Readlink(filepath.Join(c.dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(c.dir, "..data_tmp")); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(c.dir, "..data_tmp"), filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		if _, keep := files[e.Name()]; !keep {
			if err := os.Remove(filepath.Join(c.dir, e.Name())); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	for name := range files {
		link := filepath.Join(c.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			c.t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(c.dir, old)); err != nil {
			c.t.Fatal(err)
		}
	}
}

func TestWatcherConfigMapLayout(t *testing.T) {
	cm := &configMap{t: t, dir: t.TempDir()}
	w := NewWatcher(WatcherOptions{Dir: cm.dir, Logger: quiet()})
	ctx := context.Background()
	steps := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{name: "initial", files: map[string]string{"policy-a.star": versioned(1)}, want: []string{"added a v1"}},
		{name: "edit and add through a ..data swap", files: map[string]string{"policy-a.star": versioned(2), "policy-b.star": versioned(1)}, want: []string{"updated a v2", "added b v1"}},
		{name: "broken edit through a ..data swap", files: map[string]string{"policy-a.star": broken, "policy-b.star": versioned(1)}, want: []string{"failed a: " + filepath.Join(cm.dir, "policy-a.star") + ":5: load: got newline, want ':'"}},
		{name: "fix and remove through a ..data swap", files: map[string]string{"policy-a.star": versioned(3)}, want: []string{"updated a v3", "removed b"}},
	}
	for _, step := range steps {
		cm.update(step.files)
		events, err := w.Scan(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if diff := cmp.Diff(step.want, summary(t, events)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", step.name, diff)
		}
	}
}

// Run sees changes through notifications (or its polling) without Scan
// being called, including a ConfigMap ..data swap and a folder that
// appears after the agent started.
func TestWatcherRun(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "policies")
	w := NewWatcher(WatcherOptions{Dir: dir, PollInterval: 200 * time.Millisecond, Debounce: 10 * time.Millisecond, Logger: quiet()})
	events := make(chan Event, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx, func(e Event) { events <- e }) }()

	next := func(what string) string {
		t.Helper()
		select {
		case e := <-events:
			return summary(t, []Event{e})[0]
		case <-time.After(20 * time.Second):
			t.Fatalf("no event for %s", what)
			return ""
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cm := &configMap{t: t, dir: dir}
	cm.update(map[string]string{"policy-a.star": versioned(1)})
	if got := next("the first version"); got != "added a v1" {
		t.Errorf("event = %q", got)
	}
	cm.update(map[string]string{"policy-a.star": versioned(2)})
	if got := next("the ..data swap"); got != "updated a v2" {
		t.Errorf("event = %q", got)
	}
	cm.update(map[string]string{})
	if got := next("the removal"); got != "removed a" {
		t.Errorf("event = %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

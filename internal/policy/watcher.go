package policy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// EventKind is what happened to a policy.
type EventKind int

// Kinds of policy events.
const (
	// Added: a policy is available for the first time.
	Added EventKind = iota + 1
	// Updated: a policy's new version replaces the running one (also when
	// a user file replaces a built-in policy, or its removal brings the
	// built-in one back).
	Updated
	// Removed: a policy is gone.
	Removed
	// Failed: a file does not load; the previous version, if any, keeps
	// running.
	Failed
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Removed:
		return "removed"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is a change to the set of policies.
type Event struct {
	Kind EventKind // what happened
	// Name is the policy's name.
	Name string
	// Template is the policy to run (Added, Updated).
	Template Template
	// Err is why the file does not load (Failed); an *Error with the file
	// and line.
	Err error
	// File is the policy file concerned.
	File string
}

// WatcherOptions configure a Watcher.
type WatcherOptions struct {
	// Dir is the policy folder. It may not exist yet; empty means only
	// built-in policies.
	Dir string
	// Builtins are the policies that run unless a file of the same name
	// replaces them.
	Builtins []Template
	// Runtime compiles and runs the policies.
	Runtime Runtime
	// PollInterval is how often the folder is rescanned besides
	// file-system notifications (which can be missed, e.g. on network
	// file systems). Default 10s.
	PollInterval time.Duration
	// Debounce groups the notifications of one change (an editor's
	// write-rename, a ConfigMap update's several symlink operations).
	// Default 100ms.
	Debounce time.Duration
	// Logger receives load errors and changes. Default slog.Default().
	Logger *slog.Logger
}

// Watcher keeps the policies of a folder loaded: Scan compares the folder
// with what is loaded, and Run rescans on every change.
//
// Files are policy-<name>.star; names starting with "." or "_" are
// ignored, which covers the ..data and ..<timestamp> entries of ConfigMap
// volumes and the upstream way of disabling a policy (_policy-x.py).
// Files are read through symlinks and compared by content, so the
// ConfigMap ..data swap, which changes no visible file name, is seen as
// the edit it is.
type Watcher struct {
	opts WatcherOptions
	log  *slog.Logger

	scanMu   sync.Mutex // one Scan at a time
	mu       sync.Mutex
	builtins map[string]Template
	current  map[string]*loadedPolicy
	failed   map[string]*failedFile
	warned   map[string]bool
	started  bool
}

type loadedPolicy struct {
	tmpl    Template
	file    string
	sum     [32]byte
	builtin bool
}

type failedFile struct {
	file string
	sum  [32]byte
	err  error
}

// NewWatcher returns a Watcher; nothing is loaded before the first Scan.
func NewWatcher(opts WatcherOptions) *Watcher {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 10 * time.Second
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Runtime.Logger = opts.Logger
	w := &Watcher{
		opts:     opts,
		log:      opts.Logger,
		builtins: map[string]Template{},
		current:  map[string]*loadedPolicy{},
		failed:   map[string]*failedFile{},
		warned:   map[string]bool{},
	}
	for _, b := range opts.Builtins {
		w.builtins[b.Name()] = b
	}
	return w
}

// Policies returns the loaded policies, sorted by name.
func (w *Watcher) Policies() []Template {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Template, 0, len(w.current))
	for _, p := range w.current {
		out = append(out, p.tmpl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Errors returns the files that do not load, by policy name.
func (w *Watcher) Errors() map[string]error {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]error, len(w.failed))
	for n, f := range w.failed {
		out[n] = f.err
	}
	return out
}

// policyFile is a policy file found in the folder.
type policyFile struct {
	name string
	path string
	src  []byte
	sum  [32]byte
}

// list reads the policy files of the folder.
func (w *Watcher) list() ([]policyFile, error) {
	if w.opts.Dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(w.opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy folder: %w", err)
	}
	var files []policyFile
	for _, e := range entries {
		base := e.Name()
		if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
			continue
		}
		path := filepath.Join(w.opts.Dir, base)
		name, ok := NameFromFile(base)
		if !ok {
			if strings.HasSuffix(base, ".py") && !w.warned[path] {
				w.warned[path] = true
				w.log.Warn("ignoring a Python policy: policies are Starlark files named policy-<name>.star; see policies/README.md to port it", "file", path)
			}
			continue
		}
		// Stat follows the ConfigMap symlinks to the real file.
		info, err := os.Stat(path)
		if err != nil || info.IsDir() {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			w.log.Warn("cannot read policy file", "file", path, "err", err)
			continue
		}
		files = append(files, policyFile{name: name, path: path, src: src, sum: sha256.Sum256(src)})
	}
	return files, nil
}

// Scan brings the loaded policies in line with the folder and returns what
// changed, sorted by policy name. The first Scan also loads the built-in
// policies that no file replaces.
func (w *Watcher) Scan(ctx context.Context) ([]Event, error) {
	w.scanMu.Lock()
	defer w.scanMu.Unlock()

	files, listErr := w.list()
	if listErr != nil {
		// Keep what runs: an unreadable folder is not an empty one.
		return nil, listErr
	}
	var events []Event
	seen := map[string]bool{}

	w.mu.Lock()
	first := !w.started
	w.started = true
	w.mu.Unlock()

	for _, f := range files {
		seen[f.name] = true
		w.mu.Lock()
		cur := w.current[f.name]
		fail := w.failed[f.name]
		w.mu.Unlock()
		if cur != nil && !cur.builtin && cur.sum == f.sum && cur.file == f.path {
			continue
		}
		if fail != nil && fail.sum == f.sum && fail.file == f.path {
			continue // already reported
		}
		s, err := Compile(ctx, f.name, f.path, f.src, w.opts.Runtime)
		if err != nil {
			if ctx.Err() != nil {
				return events, ctx.Err()
			}
			w.mu.Lock()
			w.failed[f.name] = &failedFile{file: f.path, sum: f.sum, err: err}
			w.mu.Unlock()
			w.log.Error("policy does not load; the previous version keeps running", "policy", f.name, "file", f.path, "err", err)
			events = append(events, Event{Kind: Failed, Name: f.name, Err: err, File: f.path})
			continue
		}
		kind := Added
		if cur != nil {
			kind = Updated
		}
		w.mu.Lock()
		delete(w.failed, f.name)
		w.current[f.name] = &loadedPolicy{tmpl: s, file: f.path, sum: f.sum}
		w.mu.Unlock()
		w.log.Info("policy loaded", "policy", f.name, "file", f.path, "version", s.Version(), "change", kind.String())
		events = append(events, Event{Kind: kind, Name: f.name, Template: s, File: f.path})
	}

	w.mu.Lock()
	for name, f := range w.failed {
		if !seen[name] {
			delete(w.failed, name)
			_ = f
		}
	}
	for name, cur := range w.current {
		if cur.builtin || seen[name] {
			continue
		}
		if b, ok := w.builtins[name]; ok {
			w.current[name] = &loadedPolicy{tmpl: b, file: b.Origin(), builtin: true}
			events = append(events, Event{Kind: Updated, Name: name, Template: b, File: b.Origin()})
			w.log.Info("policy file removed; the built-in policy runs again", "policy", name, "file", cur.file)
			continue
		}
		delete(w.current, name)
		events = append(events, Event{Kind: Removed, Name: name, File: cur.file})
		w.log.Info("policy removed", "policy", name, "file", cur.file)
	}
	if first {
		for name, b := range w.builtins {
			if _, ok := w.current[name]; ok {
				continue
			}
			w.current[name] = &loadedPolicy{tmpl: b, file: b.Origin(), builtin: true}
			events = append(events, Event{Kind: Added, Name: name, Template: b, File: b.Origin()})
		}
	}
	w.mu.Unlock()

	sort.SliceStable(events, func(i, j int) bool { return events[i].Name < events[j].Name })
	return events, nil
}

// Run scans the folder, hands every event to handle, and rescans whenever
// the folder changes (file-system notifications, debounced) and every
// PollInterval, until ctx is done. handle is called from Run's goroutine
// only.
func (w *Watcher) Run(ctx context.Context, handle func(Event)) error {
	scan := func() {
		events, err := w.Scan(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("policy folder scan failed", "dir", w.opts.Dir, "err", err)
		}
		for _, e := range events {
			handle(e)
		}
	}
	scan()

	var notify <-chan fsnotify.Event
	var notifyErr <-chan error
	// The notifier is made once the folder exists: each takes one of the
	// user's inotify instances (128 on many systems), which a thousand
	// agents of one test process, all without a policy folder, would
	// exhaust for every other process of the user.
	var fw *fsnotify.Watcher
	defer func() {
		if fw != nil {
			fw.Close()
		}
	}()
	watching, warned := false, false
	watch := func() {
		if watching || w.opts.Dir == "" {
			return
		}
		if _, err := os.Stat(w.opts.Dir); err != nil {
			return
		}
		if fw == nil {
			var err error
			if fw, err = fsnotify.NewWatcher(); err != nil {
				fw = nil
				if !warned {
					warned = true
					w.log.Warn("file-system notifications unavailable; polling the policy folder", "err", err, "interval", w.opts.PollInterval)
				}
				return
			}
			notify, notifyErr = fw.Events, fw.Errors
		}
		if err := fw.Add(w.opts.Dir); err == nil {
			watching = true
		}
	}
	watch()

	poll := time.NewTicker(w.opts.PollInterval)
	defer poll.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-notify:
			if !ok {
				notify = nil
				continue
			}
			if ev.Name == w.opts.Dir && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				watching = false
			}
			debounce.Reset(w.opts.Debounce)
		case err, ok := <-notifyErr:
			if !ok {
				notifyErr = nil
				continue
			}
			w.log.Warn("policy folder notification error", "err", err)
		case <-debounce.C:
			scan()
		case <-poll.C:
			// The folder may have appeared, or been replaced, since.
			watch()
			scan()
		}
	}
}

package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Template is a loaded policy from which the engine makes instances: one
// per application for application-scope policies, one for global ones.
// Script is the Starlark implementation; Go code may provide others.
type Template interface {
	// Name is the policy's name, from its file name.
	Name() string
	// Origin says where it came from: a file path or builtin:<path>.
	Origin() string
	// Version identifies the source (a content hash), for reports.
	Version() string
	// Config is what initialize() declared when the policy was loaded.
	Config() Config
	// NewInstance runs initialize() for a fresh context.
	NewInstance(ctx context.Context) (Instance, error)
}

// Instance is a policy with its own context. Calls on one instance must
// not overlap; the engine runs analyze and then plan from one goroutine.
type Instance interface {
	// Config is the current configuration: the analyze interval follows
	// the context, which analyze and plan may change.
	Config() Config
	// Analyze runs analyze(); true means a plan is needed.
	Analyze(ctx context.Context, in *Inputs) (bool, error)
	// Plan runs plan() and returns the plan as Go data: mechanism name to
	// command. An empty plan means nothing to do.
	Plan(ctx context.Context, in *Inputs) (map[string]any, error)
	// Context returns the instance's context as Go data, for reports.
	Context() (map[string]any, error)
}

// MechanismView is what a policy sees of one mechanism.
type MechanismView struct {
	State   map[string]any // what State returned (or {"error": ...})
	Options map[string]any // what Options returned

	// shared is the view's Starlark form, converted once and frozen (see
	// Shared); nil converts State and Options at each call.
	shared starlark.Value
}

// Shared returns v with its Starlark form made once and frozen, for every
// policy instance and call that gets v: an agent runs an instance of an
// application-scoped policy per application, and each call converted the
// whole mechanism state (every application's components and every node)
// again — work that grew with the square of the applications. Policies
// read it as before; one that writes into it fails with Starlark's
// "frozen" error (the bundled policies only read it; write into copies,
// or into context). Frozen Starlark values may be read from several
// goroutines at once.
func (v MechanismView) Shared() (MechanismView, error) {
	d, err := v.starlarkValue(root("mechanisms"))
	if err != nil {
		return v, err
	}
	d.Freeze()
	v.shared = d
	return v, nil
}

// starlarkValue converts the view to {"state": ..., "options": ...}.
func (v MechanismView) starlarkValue(path *pathElem) (*starlark.Dict, error) {
	state, err := toStarlark(v.State, path.field("state"), 0)
	if err != nil {
		return nil, err
	}
	opts, err := toStarlark(v.Options, path.field("options"), 0)
	if err != nil {
		return nil, err
	}
	d := starlark.NewDict(2)
	_ = d.SetKey(starlark.String("state"), state)
	_ = d.SetKey(starlark.String("options"), opts)
	return d, nil
}

// Inputs are the arguments of analyze and plan.
type Inputs struct {
	// Applications is application_description: the instance's
	// application for application scope, all of them for global scope.
	Applications []map[string]any
	// System is system_description: the agent's own description, as
	// data in the upstream form ({"MLSysOpsNode": {...}}).
	System map[string]any
	// Mechanisms are the enabled mechanisms by name.
	Mechanisms map[string]MechanismView
	// Telemetry is what the monitor collected; nil for none.
	Telemetry TelemetryView
	// MLConnector is the ML connector's URL; empty for None.
	MLConnector string
}

// args converts the inputs to the five arguments after the context.
func (in *Inputs) args(now func() time.Time) (starlark.Tuple, error) {
	apps := make([]starlark.Value, len(in.Applications))
	for i, a := range in.Applications {
		v, err := toStarlark(a, root("application_description").elem(i), 0)
		if err != nil {
			return nil, err
		}
		apps[i] = v
	}
	sys, err := toStarlark(in.System, root("system_description"), 0)
	if err != nil {
		return nil, err
	}
	mechs := starlark.NewDict(len(in.Mechanisms))
	for _, name := range sortedNames(in.Mechanisms) {
		m := in.Mechanisms[name]
		if m.shared != nil {
			_ = mechs.SetKey(starlark.String(name), m.shared)
			continue
		}
		d, err := m.starlarkValue(root("mechanisms").field(name))
		if err != nil {
			return nil, err
		}
		_ = mechs.SetKey(starlark.String(name), d)
	}
	var ml starlark.Value = starlark.None
	if in.MLConnector != "" {
		ml = starlark.String(in.MLConnector)
	}
	return starlark.Tuple{starlark.NewList(apps), sys, mechs, &telemetryValue{view: in.Telemetry, now: now}, ml}, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

// namePattern is what a policy name may contain.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// NameFromFile returns the policy name of a file name: policy-<name>.star
// gives <name> (hyphens included, unlike upstream, which kept only the
// part up to the next hyphen).
func NameFromFile(file string) (string, bool) {
	base := filepath.Base(file)
	if !strings.HasPrefix(base, "policy-") || !strings.HasSuffix(base, ".star") {
		return "", false
	}
	name := strings.TrimSuffix(strings.TrimPrefix(base, "policy-"), ".star")
	if !namePattern.MatchString(name) {
		return "", false
	}
	return name, true
}

// Script is a compiled Starlark policy.
type Script struct {
	name    string
	file    string
	origin  string
	version string
	rt      Runtime
	log     *slog.Logger

	initialize, analyze, plan *starlark.Function
	config                    Config
}

var _ Template = (*Script)(nil)

// Compile loads a policy: it compiles src (reported as file in errors),
// runs its top level and initialize() under the runtime's limits and
// checks the configuration initialize() returns. Every failure is an
// *Error with the file and line.
func Compile(ctx context.Context, name, file string, src []byte, rt Runtime) (*Script, error) {
	rt = rt.withDefaults()
	sum := sha256.Sum256(src)
	s := &Script{
		name:    name,
		file:    file,
		origin:  file,
		version: hex.EncodeToString(sum[:6]),
		rt:      rt,
		log:     rt.Logger.With("policy", name),
	}
	predeclared := rt.predeclared()
	f, err := syntax.Parse(file, src, 0)
	if err == nil {
		err = rewrite(f)
	}
	if err != nil {
		return nil, compileError(name, file, err)
	}
	prog, err := starlark.FileProgram(f, predeclared.Has)
	if err != nil {
		return nil, compileError(name, file, err)
	}
	thread := &starlark.Thread{
		Name:  name + ".load",
		Print: func(_ *starlark.Thread, msg string) { s.log.Info(msg) },
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, fmt.Errorf("load() is not available in policies; put everything in the policy file")
		},
	}
	thread.SetLocal(threadLogger, s.log)
	var globals starlark.StringDict
	if _, err := rt.run(ctx, thread, name, file, "load", func() (starlark.Value, error) {
		g, err := prog.Init(thread, predeclared)
		globals = g
		return starlark.None, err
	}); err != nil {
		return nil, err
	}
	globals.Freeze()

	for _, f := range []struct {
		name   string
		dst    **starlark.Function
		params int
	}{
		{"initialize", &s.initialize, 0},
		{"analyze", &s.analyze, 6},
		{"plan", &s.plan, 6},
	} {
		v, ok := globals[f.name]
		if !ok {
			return nil, &Error{Policy: name, Phase: "load", File: file, Msg: fmt.Sprintf("%s is not defined; a policy defines %s", f.name, contract)}
		}
		fn, ok := v.(*starlark.Function)
		if !ok {
			return nil, &Error{Policy: name, Phase: "load", File: file, Msg: fmt.Sprintf("%s is a %s, not a function", f.name, v.Type())}
		}
		if err := checkParams(fn, f.params); err != nil {
			return nil, (&Error{Policy: name, Phase: "load", File: file, Msg: fmt.Sprintf("%s: %v; a policy defines %s", f.name, err, contract)}).at(fn.Position())
		}
		*f.dst = fn
	}
	_, cfg, err := s.initializeInstance(ctx)
	if err != nil {
		return nil, err
	}
	s.config = cfg
	return s, nil
}

const contract = "initialize(), analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector) and plan(...same arguments)"

// checkParams tells whether fn can be called with n positional arguments.
// Parameters are ordered: positional, keyword-only, *args, **kwargs.
func checkParams(fn *starlark.Function, n int) error {
	total := fn.NumParams()
	if fn.HasVarargs() {
		total--
	}
	if fn.HasKwargs() {
		total--
	}
	positional := total - fn.NumKwonlyParams()
	required := 0
	for i := 0; i < total; i++ {
		if fn.ParamDefault(i) != nil {
			continue
		}
		if i >= positional {
			name, _ := fn.Param(i)
			return fmt.Errorf("has a required keyword-only parameter %s", name)
		}
		required++
	}
	if required > n || (positional < n && !fn.HasVarargs()) {
		return fmt.Errorf("takes %d positional parameters (%d required), it is called with %d", positional, required, n)
	}
	return nil
}

// Name implements Template.
func (s *Script) Name() string { return s.name }

// Origin implements Template.
func (s *Script) Origin() string { return s.origin }

// Version implements Template.
func (s *Script) Version() string { return s.version }

// Config implements Template.
func (s *Script) Config() Config { return s.config }

// NewInstance implements Template.
func (s *Script) NewInstance(ctx context.Context) (Instance, error) {
	d, cfg, err := s.initializeInstance(ctx)
	if err != nil {
		return nil, err
	}
	return &instance{s: s, ctx: d, cfg: cfg}, nil
}

func (s *Script) initializeInstance(ctx context.Context) (*starlark.Dict, Config, error) {
	v, err := s.rt.call(ctx, s.name, s.file, "initialize", s.log, s.initialize, nil)
	if err != nil {
		return nil, Config{}, err
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, Config{}, (&Error{Policy: s.name, Phase: "initialize", File: s.file, Msg: fmt.Sprintf("returned %s, want a dict with at least scope and configuration.analyze_interval", v.Type())}).at(s.initialize.Position())
	}
	cfg, problems := parseConfig(d)
	if len(problems) > 0 {
		return nil, Config{}, (&Error{Policy: s.name, Phase: "initialize", File: s.file, Msg: "returned a bad configuration: " + strings.Join(problems, "; ")}).at(s.initialize.Position())
	}
	return d, cfg, nil
}

// instance is a Script with its context.
type instance struct {
	s   *Script
	mu  sync.Mutex
	ctx *starlark.Dict
	cfg Config
}

func (i *instance) Config() Config {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cfg
}

// invoke calls analyze or plan and takes the new context from the result.
func (i *instance) invoke(ctx context.Context, phase string, fn *starlark.Function, in *Inputs) (starlark.Value, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	rest, err := in.args(i.s.rt.Now)
	if err != nil {
		return nil, &Error{Policy: i.s.name, Phase: phase, File: i.s.file, Msg: "cannot pass the inputs: " + err.Error()}
	}
	args := append(starlark.Tuple{i.ctx}, rest...)
	v, err := i.s.rt.call(ctx, i.s.name, i.s.file, phase, i.s.log, fn, args)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return (&Error{Policy: i.s.name, Phase: phase, File: i.s.file, Msg: fmt.Sprintf(format, a...)}).at(fn.Position())
	}
	pair, ok := v.(starlark.Tuple)
	if !ok {
		if l, isList := v.(*starlark.List); isList && l.Len() == 2 {
			pair = starlark.Tuple{l.Index(0), l.Index(1)}
		} else {
			return nil, bad("returned %s, want a pair (%s, context)", v.Type(), map[string]string{"analyze": "bool", "plan": "plan dict"}[phase])
		}
	}
	if len(pair) != 2 {
		return nil, bad("returned %d values, want 2: (%s, context)", len(pair), map[string]string{"analyze": "bool", "plan": "plan dict"}[phase])
	}
	newCtx, ok := pair[1].(*starlark.Dict)
	if !ok {
		return nil, bad("returned a %s as the context, want the context dict", pair[1].Type())
	}
	i.ctx = newCtx
	if iv, found, err := analyzeInterval(newCtx); err != nil {
		return nil, bad("context: %v", err)
	} else if found {
		i.cfg.AnalyzeInterval = iv
	}
	return pair[0], nil
}

func (i *instance) Analyze(ctx context.Context, in *Inputs) (bool, error) {
	v, err := i.invoke(ctx, "analyze", i.s.analyze, in)
	if err != nil {
		return false, err
	}
	b, ok := v.(starlark.Bool)
	if !ok {
		return false, (&Error{Policy: i.s.name, Phase: "analyze", File: i.s.file, Msg: fmt.Sprintf("returned %s as the decision, want True or False", v.Type())}).at(i.s.analyze.Position())
	}
	return bool(b), nil
}

func (i *instance) Plan(ctx context.Context, in *Inputs) (map[string]any, error) {
	v, err := i.invoke(ctx, "plan", i.s.plan, in)
	if err != nil {
		return nil, err
	}
	if v == starlark.None {
		return nil, nil
	}
	if _, ok := v.(*starlark.Dict); !ok {
		return nil, (&Error{Policy: i.s.name, Phase: "plan", File: i.s.file, Msg: fmt.Sprintf("returned a %s as the plan, want a dict from mechanism name to command", v.Type())}).at(i.s.plan.Position())
	}
	g, err := fromStarlark(v, root("plan"), 0)
	if err != nil {
		return nil, (&Error{Policy: i.s.name, Phase: "plan", File: i.s.file, Msg: "the plan is not data: " + err.Error()}).at(i.s.plan.Position())
	}
	return g.(map[string]any), nil
}

func (i *instance) Context() (map[string]any, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	g, err := fromStarlark(i.ctx, root("context"), 0)
	if err != nil {
		return nil, err
	}
	return g.(map[string]any), nil
}

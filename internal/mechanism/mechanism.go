package mechanism

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
)

// Status is the outcome of a mechanism's part of a plan.
type Status string

// Outcomes of Apply and of a later completion.
const (
	// StatusSuccess: the mechanism did what the command asked.
	StatusSuccess Status = "Success"
	// StatusPending: the work was started and its outcome will be reported
	// through Env.Complete.
	StatusPending Status = "Pending"
	// StatusFailed: the mechanism could not do it.
	StatusFailed Status = "Failed"
)

// PlanIDKey is the key under which the MAPE engine puts the plan's id into
// every command it hands to Apply (upstream plan_uid), so that
// asynchronous mechanisms can report the outcome of that plan.
const PlanIDKey = "plan_uid"

// PolicyKey is the key under which the MAPE engine puts the name of the
// policy that made the plan into every command, so that a mechanism can
// say in its events and logs who asked for what it does.
const PolicyKey = "plan_policy"

// ErrUnavailable is wrapped by errors of mechanisms whose hardware or tool
// is missing on this node (no cpufreq driver, no nvidia-smi).
var ErrUnavailable = errors.New("mechanism unavailable on this node")

// Result is what Apply returns when it does not fail.
type Result struct {
	// Status is StatusSuccess or StatusPending; empty means success.
	Status Status
	// Detail says what was done, for the plan log.
	Detail map[string]any
}

// Completion is the late outcome of a command whose Apply returned
// StatusPending.
type Completion struct {
	// PlanID is the plan the command belonged to (the command's PlanIDKey).
	PlanID string
	// Mechanism is the mechanism's name; the Set fills it in.
	Mechanism string
	// Status is StatusSuccess or StatusFailed.
	Status Status
	// Err says why it failed.
	Err error
	// Detail says what was done, for the plan log.
	Detail map[string]any
}

// Mechanism carries out one kind of command. Implementations must be safe
// for concurrent use: plans from different ticks may overlap.
type Mechanism interface {
	// Apply carries out the command (the plan's value for this
	// mechanism's name, plus PlanIDKey and PolicyKey).
	Apply(ctx context.Context, command map[string]any) (Result, error)
	// State reports what the mechanism manages now, for policies
	// (mechanisms[name]["state"]).
	State(ctx context.Context) (map[string]any, error)
	// Options reports what commands and values the mechanism accepts, for
	// policies (mechanisms[name]["options"]).
	Options() map[string]any
}

// Closer is implemented by mechanisms that hold resources (timers,
// connections) to release when the agent stops.
type Closer interface {
	Close() error
}

// Forwarder sends a node's plan to its cluster agent. The agent implements
// it over XMPP (message_to_fluidity); fluidity_proxy uses it.
type Forwarder interface {
	Forward(ctx context.Context, planID string, command map[string]any) error
}

// Env is what a factory may use to build its mechanism.
type Env struct {
	// Logger is the agent's logger; the Registry adds the mechanism key.
	Logger *slog.Logger
	// Node is the agent's host name.
	Node string
	// Permissions are the node's permitted_actions.
	Permissions Permissions
	// SysfsRoot is where sysfs is mounted (default /sys).
	SysfsRoot string
	// NvidiaSMI is the nvidia-smi binary; empty means look it up in PATH.
	NvidiaSMI string
	// Forwarder sends plans to the parent agent (node agents).
	Forwarder Forwarder
	// Configs holds per-mechanism settings by name; Build passes a
	// mechanism its own as Config.
	Configs map[string]map[string]any
	// Config is this mechanism's settings (set by Build).
	Config map[string]any
	// Complete reports the outcome of a pending command (set by Build).
	Complete func(Completion)
}

// Factory builds a mechanism. It should not fail because hardware is
// missing (the mechanism then reports ErrUnavailable from State and
// Apply), only because it is misconfigured.
type Factory func(env Env) (Mechanism, error)

// Registry maps mechanism names, as plans use them, to factories. It is
// safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{factories: map[string]Factory{}}
}

// NewBuiltinRegistry returns a registry with this package's mechanisms:
// CPUFrequencyConfigurator, GPUConfigurator and fluidity_proxy. The agent
// registers its layer's other mechanisms (clusterPlacement, fluidity) on
// top.
func NewBuiltinRegistry() *Registry {
	r := NewRegistry()
	for name, f := range map[string]Factory{
		CPUFrequencyName: NewCPUFrequencyConfigurator,
		GPUName:          NewGPUConfigurator,
		FluidityProxyName: func(env Env) (Mechanism, error) {
			return NewFluidityProxy(env)
		},
	} {
		if err := r.Register(name, f); err != nil {
			panic(err)
		}
	}
	return r
}

// Register adds a factory under name. Registering a name twice is an
// error.
func (r *Registry) Register(name string, f Factory) error {
	if name == "" || f == nil {
		return fmt.Errorf("register mechanism %q: empty name or nil factory", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.factories[name]; ok {
		return fmt.Errorf("register mechanism %q: already registered", name)
	}
	r.factories[name] = f
	return nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.factories))
	for n := range r.factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Build makes the mechanisms named in enabled. Unknown names and factory
// errors are reported together.
func (r *Registry) Build(enabled []string, env Env) (*Set, error) {
	if env.Logger == nil {
		env.Logger = slog.Default()
	}
	s := &Set{byName: map[string]Mechanism{}}
	var errs []error
	for _, name := range enabled {
		r.mu.RLock()
		f, ok := r.factories[name]
		r.mu.RUnlock()
		if !ok {
			errs = append(errs, fmt.Errorf("mechanism %q is not known; known mechanisms: %s", name, strings.Join(r.Names(), ", ")))
			continue
		}
		if _, dup := s.byName[name]; dup {
			continue
		}
		e := env
		e.Logger = env.Logger.With("mechanism", name)
		e.Config = env.Configs[name]
		e.Complete = func(c Completion) {
			c.Mechanism = name
			s.complete(c)
		}
		m, err := f(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("mechanism %s: %w", name, err))
			continue
		}
		s.byName[name] = m
		s.names = append(s.names, name)
	}
	if len(errs) > 0 {
		_ = s.Close()
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// Set is the agent's enabled mechanisms by name.
type Set struct {
	byName map[string]Mechanism
	names  []string

	mu      sync.Mutex
	handler func(Completion)
	early   []Completion
}

// NewSet makes a Set of ready mechanisms, for tests and for agents that
// build mechanisms themselves. Their Complete functions should call
// Set.Complete.
func NewSet(mechanisms map[string]Mechanism) *Set {
	s := &Set{byName: map[string]Mechanism{}}
	for n, m := range mechanisms {
		s.byName[n] = m
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	return s
}

// Get returns the mechanism of that name.
func (s *Set) Get(name string) (Mechanism, bool) {
	m, ok := s.byName[name]
	return m, ok
}

// Names returns the enabled names in configuration order.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// OnComplete sets the function that receives completions of pending
// commands. Completions reported before it is set are delivered to it
// then.
func (s *Set) OnComplete(fn func(Completion)) {
	s.mu.Lock()
	s.handler = fn
	early := s.early
	s.early = nil
	s.mu.Unlock()
	for _, c := range early {
		fn(c)
	}
}

// Complete delivers a completion to the OnComplete function.
func (s *Set) Complete(c Completion) { s.complete(c) }

func (s *Set) complete(c Completion) {
	s.mu.Lock()
	h := s.handler
	if h == nil {
		s.early = append(s.early, c)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	h(c)
}

// Close closes the mechanisms that hold resources.
func (s *Set) Close() error {
	var errs []error
	for _, n := range s.names {
		if c, ok := s.byName[n].(Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close mechanism %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}

package mape

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/policy"
	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// Config configures an Engine.
type Config struct {
	// Layer is the agent's layer, for logs.
	Layer string
	// Logger is the agent's logger. Default slog.Default().
	Logger *slog.Logger
	// Mechanisms are the enabled mechanisms. Their completions are routed
	// to the engine. Required.
	Mechanisms *mechanism.Set
	// Sampler is the agent's monitor loop, with its sources added (the
	// caller registers its metrics). Nil means a new sampler without
	// sources, whose metrics go to Registerer; add sources through
	// Sampler().AddSource. Either way the engine runs it.
	Sampler *telemetry.Sampler
	// MonitoringInterval is the agent's default sampling interval
	// (requester "default"). Default 5s.
	MonitoringInterval time.Duration
	// DefaultMetrics are always sampled (default_telemetry_metrics).
	DefaultMetrics []string
	// Policies, when set, is run by Run and its events applied.
	Policies *policy.Watcher
	// MLConnector is the ML connector's URL passed to policies.
	MLConnector string
	// PlanLogSize is the number of plans kept for queries. Default 1000.
	PlanLogSize int
	// PendingTimeout is how long a plan may wait for asynchronous results.
	// Default 5m.
	PendingTimeout time.Duration
	// ApplyTimeout bounds one mechanism's Apply. Default 1m.
	ApplyTimeout time.Duration
	// TickInterval is the scheduler's tick. Default 1s.
	TickInterval time.Duration
	// Workers is the number of policy calls run at once. Default
	// GOMAXPROCS.
	Workers int
	// Registerer receives the engine's metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Application is an application the agent manages, as policies see it.
type Application struct {
	// ID is the application's name.
	ID string
	// Description is passed to policies as the application_description
	// element, in the layer's shape. The engine keeps a copy.
	Description map[string]any
	// QoSMetrics are sampled for the application; nil means the
	// application_metric_id of every qos_metrics entry in the description
	// (see QoSMetrics).
	QoSMetrics []string
}

// PolicyStatus reports a policy for status pages.
type PolicyStatus struct {
	Name    string       // the policy's name
	Origin  string       // file path or builtin:<path>
	Version string       // content hash of the running version
	Scope   policy.Scope // application or global
	Core    bool         // the scheduler never discards its plans
	// Instances is the number of live instances (applications for
	// application scope, one for global).
	Instances int
	// LastError is the latest failure of a call or of loading a new
	// version, with file and line; empty when the latest call worked.
	LastError string
	// Errors counts failed calls.
	Errors int
}

// Engine is an agent's MAPE loop. Its methods are safe for concurrent use.
type Engine struct {
	log          *slog.Logger
	mechs        *mechanism.Set
	sampler      *telemetry.Sampler
	watcher      *policy.Watcher
	mlConnector  string
	pendingLimit time.Duration
	applyTimeout time.Duration
	tick         time.Duration
	workers      int
	now          func() time.Time
	metrics      *metrics
	running      atomic.Bool

	// ctl serialises changes of applications and policies, which run
	// initialize() and so must not hold mu.
	ctl sync.Mutex

	mu         sync.Mutex
	apps       map[string]*appEntry
	policies   map[string]*policyEntry
	loadErrors map[string]error
	system     map[string]any
	due        dueHeap
	queue      []*plan
	inflight   map[string]*plan
	plans      *planLog
	states     map[string]stateCache

	wakeAnalyzer chan struct{}
	work         chan *instance
	execWG       sync.WaitGroup
}

type appEntry struct {
	app     Application
	metrics []string
}

type policyEntry struct {
	tmpl      policy.Template
	cfg       policy.Config
	instances map[string]*instance // by application ID; "" for global
	lastErr   error
	errors    int
}

// instance is one policy instance and its place in the analyze schedule.
type instance struct {
	policy  string
	app     string // "" for global
	entry   *policyEntry
	inst    policy.Instance
	next    time.Time
	index   int // in the heap; -1 when not queued
	removed bool
}

type stateCache struct {
	at   time.Time
	view policy.MechanismView
}

// New returns an engine; Run starts it.
func New(cfg Config) (*Engine, error) {
	if cfg.Mechanisms == nil {
		return nil, errors.New("mape: Config.Mechanisms is required (mechanism.NewSet(nil) for none)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MonitoringInterval <= 0 {
		cfg.MonitoringInterval = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ownSampler := cfg.Sampler == nil
	if ownSampler {
		cfg.Sampler = telemetry.NewSampler(telemetry.SamplerOptions{Interval: cfg.MonitoringInterval, Logger: cfg.Logger, Now: cfg.Now})
	}
	if cfg.PlanLogSize <= 0 {
		cfg.PlanLogSize = 1000
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = 5 * time.Minute
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = time.Minute
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	log := cfg.Logger
	if cfg.Layer != "" {
		log = log.With("layer", cfg.Layer)
	}
	e := &Engine{
		log:          log,
		mechs:        cfg.Mechanisms,
		sampler:      cfg.Sampler,
		watcher:      cfg.Policies,
		mlConnector:  cfg.MLConnector,
		pendingLimit: cfg.PendingTimeout,
		applyTimeout: cfg.ApplyTimeout,
		tick:         cfg.TickInterval,
		workers:      cfg.Workers,
		now:          cfg.Now,
		apps:         map[string]*appEntry{},
		policies:     map[string]*policyEntry{},
		loadErrors:   map[string]error{},
		inflight:     map[string]*plan{},
		plans:        newPlanLog(cfg.PlanLogSize),
		states:       map[string]stateCache{},
		wakeAnalyzer: make(chan struct{}, 1),
		work:         make(chan *instance),
	}
	e.metrics = newMetrics(e)
	if cfg.Registerer != nil {
		if err := e.metrics.register(cfg.Registerer); err != nil {
			return nil, err
		}
		if ownSampler {
			if err := e.sampler.Register(cfg.Registerer); err != nil {
				return nil, err
			}
		}
	}
	e.sampler.RequestInterval("default", cfg.MonitoringInterval)
	e.sampler.Want("default", cfg.DefaultMetrics)
	e.mechs.OnComplete(func(c mechanism.Completion) {
		if err := e.Complete(c); err != nil {
			e.log.Warn("mechanism result dropped", "plan", c.PlanID, "mechanism", c.Mechanism, "err", err)
		}
	})
	return e, nil
}

// Sampler returns the engine's monitor, to add sources to.
func (e *Engine) Sampler() *telemetry.Sampler { return e.sampler }

// Run runs the monitor, the policy watcher (if configured), the analyze
// workers and the scheduler until ctx is done, then waits for running
// policy calls and mechanism applications to stop. It may be called once.
func (e *Engine) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("mape: the engine is already running")
	}
	var wg sync.WaitGroup
	start := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	start(func() { _ = e.sampler.Run(ctx) })
	if e.watcher != nil {
		start(func() { _ = e.watcher.Run(ctx, func(ev policy.Event) { e.HandlePolicyEvent(ctx, ev) }) })
	}
	for i := 0; i < e.workers; i++ {
		start(func() { e.worker(ctx) })
	}
	start(func() { e.analyzer(ctx) })
	start(func() { e.scheduler(ctx) })
	e.log.Info("MAPE engine started", "workers", e.workers, "tick", e.tick)
	<-ctx.Done()
	wg.Wait()
	e.execWG.Wait()
	e.log.Info("MAPE engine stopped")
	return nil
}

// SetSystemDescription sets the system_description policies receive (the
// agent's own description, as data in the upstream form). The engine
// keeps a copy.
func (e *Engine) SetSystemDescription(desc map[string]any) {
	c := deepCopy(desc)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.system, _ = c.(map[string]any)
}

// SetApplication adds an application, or updates its description. New
// applications get an instance of every application-scope policy, which
// starts analyzing at once; updated ones keep their instances (and their
// contexts), which see the new description from their next call. Setting
// an application again unchanged does nothing, so controllers may call it
// at every pass.
func (e *Engine) SetApplication(ctx context.Context, app Application) error {
	if app.ID == "" {
		return errors.New("mape: application without an ID")
	}
	desc, _ := deepCopy(app.Description).(map[string]any)
	app.Description = desc
	metrics := app.QoSMetrics
	if metrics == nil {
		metrics = QoSMetrics(desc)
	}

	e.ctl.Lock()
	defer e.ctl.Unlock()
	e.mu.Lock()
	old, exists := e.apps[app.ID]
	if exists && reflect.DeepEqual(old.app, app) && slices.Equal(old.metrics, metrics) {
		e.mu.Unlock()
		return nil
	}
	e.apps[app.ID] = &appEntry{app: app, metrics: metrics}
	var entries []*policyEntry
	if !exists {
		for _, pe := range e.policies {
			if pe.cfg.Scope == policy.ScopeApplication {
				entries = append(entries, pe)
			}
		}
	}
	e.mu.Unlock()
	e.sampler.Want("app:"+app.ID, metrics)
	if exists {
		e.log.Info("application updated", "app", app.ID)
		return nil
	}
	e.log.Info("application added", "app", app.ID, "qos_metrics", metrics)
	for _, pe := range entries {
		e.startInstance(ctx, pe, app.ID)
	}
	return nil
}

// RemoveApplication stops the application's policy instances; its queued
// plans are discarded at the next tick.
func (e *Engine) RemoveApplication(id string) {
	e.ctl.Lock()
	defer e.ctl.Unlock()
	e.mu.Lock()
	_, ok := e.apps[id]
	delete(e.apps, id)
	for _, pe := range e.policies {
		if in := pe.instances[id]; in != nil {
			e.dropInstanceLocked(in)
			delete(pe.instances, id)
		}
	}
	e.mu.Unlock()
	e.sampler.Unwant("app:" + id)
	if ok {
		e.log.Info("application removed", "app", id)
	}
}

// Applications returns the managed applications' IDs, sorted.
func (e *Engine) Applications() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.apps))
	for id := range e.apps {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// scoped logs with a few attributes without building a new logger (and
// without formatting anything when the level is off): the hot paths log
// once or twice per plan.
type scoped struct {
	l     *slog.Logger
	attrs []any
}

func (e *Engine) scope(kv ...any) scoped { return scoped{l: e.log, attrs: kv} }

func (s scoped) with(kv ...any) scoped {
	return scoped{l: s.l, attrs: append(s.attrs[:len(s.attrs):len(s.attrs)], kv...)}
}

func (s scoped) log(level slog.Level, msg string, kv []any) {
	if !s.l.Enabled(context.Background(), level) {
		return
	}
	s.l.Log(context.Background(), level, msg, append(s.attrs[:len(s.attrs):len(s.attrs)], kv...)...)
}

func (s scoped) Debug(msg string, kv ...any) { s.log(slog.LevelDebug, msg, kv) }
func (s scoped) Info(msg string, kv ...any)  { s.log(slog.LevelInfo, msg, kv) }
func (s scoped) Warn(msg string, kv ...any)  { s.log(slog.LevelWarn, msg, kv) }
func (s scoped) Error(msg string, kv ...any) { s.log(slog.LevelError, msg, kv) }

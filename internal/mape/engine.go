package mape

import (
	"container/heap"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
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

// SetPolicy adds a policy or replaces the running version: the old
// instances stop (their queued plans are discarded) and new ones start
// with fresh contexts from initialize().
func (e *Engine) SetPolicy(ctx context.Context, t policy.Template) {
	cfg := t.Config()
	name := t.Name()
	e.ctl.Lock()
	defer e.ctl.Unlock()

	pe := &policyEntry{tmpl: t, cfg: cfg, instances: map[string]*instance{}}
	e.mu.Lock()
	old := e.policies[name]
	if old != nil {
		for _, in := range old.instances {
			e.dropInstanceLocked(in)
		}
	}
	e.policies[name] = pe
	delete(e.loadErrors, name)
	var apps []string
	if cfg.Scope == policy.ScopeApplication {
		for id := range e.apps {
			apps = append(apps, id)
		}
		sort.Strings(apps)
	} else {
		apps = []string{""}
	}
	e.mu.Unlock()

	requester := "policy:" + name
	e.sampler.Want(requester, cfg.Metrics)
	if cfg.ScrapeInterval > 0 {
		e.sampler.RequestInterval(requester, cfg.ScrapeInterval)
	} else {
		e.sampler.RemoveInterval(requester)
	}
	change := "added"
	if old != nil {
		change = "replaced"
	}
	e.log.Info("policy "+change, "policy", name, "origin", t.Origin(), "version", t.Version(), "scope", cfg.Scope, "core", cfg.Core, "analyze_interval", cfg.AnalyzeInterval)
	for _, app := range apps {
		e.startInstance(ctx, pe, app)
	}
}

// RemovePolicy stops a policy and forgets its telemetry requests.
// Removing an unknown policy does nothing.
func (e *Engine) RemovePolicy(name string) {
	e.ctl.Lock()
	defer e.ctl.Unlock()
	e.mu.Lock()
	pe := e.policies[name]
	if pe != nil {
		for _, in := range pe.instances {
			e.dropInstanceLocked(in)
		}
		delete(e.policies, name)
	}
	delete(e.loadErrors, name)
	e.mu.Unlock()
	// Both are harmless when already gone (upstream's remove_interval
	// raised KeyError the second time).
	e.sampler.Unwant("policy:" + name)
	e.sampler.RemoveInterval("policy:" + name)
	if pe != nil {
		e.log.Info("policy removed", "policy", name)
	}
}

// HandlePolicyEvent applies a policy.Watcher event.
func (e *Engine) HandlePolicyEvent(ctx context.Context, ev policy.Event) {
	switch ev.Kind {
	case policy.Added, policy.Updated:
		e.SetPolicy(ctx, ev.Template)
	case policy.Removed:
		e.RemovePolicy(ev.Name)
	case policy.Failed:
		e.metrics.loadErrs.WithLabelValues(ev.Name).Inc()
		e.mu.Lock()
		e.loadErrors[ev.Name] = ev.Err
		e.mu.Unlock()
	}
}

// Policies reports the running policies and the files that fail to load,
// sorted by name.
func (e *Engine) Policies() []PolicyStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []PolicyStatus
	for name, pe := range e.policies {
		s := PolicyStatus{
			Name: name, Origin: pe.tmpl.Origin(), Version: pe.tmpl.Version(),
			Scope: pe.cfg.Scope, Core: pe.cfg.Core, Instances: len(pe.instances), Errors: pe.errors,
		}
		if pe.lastErr != nil {
			s.LastError = pe.lastErr.Error()
		}
		if err := e.loadErrors[name]; err != nil {
			s.LastError = "new version not loaded: " + err.Error()
		}
		out = append(out, s)
	}
	for name, err := range e.loadErrors {
		if _, ok := e.policies[name]; !ok {
			out = append(out, PolicyStatus{Name: name, LastError: "not loaded: " + err.Error()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// startInstance runs initialize() for one instance and schedules its
// first analyze now. Called with ctl held.
func (e *Engine) startInstance(ctx context.Context, pe *policyEntry, app string) {
	name := pe.tmpl.Name()
	inst, err := pe.tmpl.NewInstance(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		pe.lastErr = err
		pe.errors++
		e.metrics.policyErrs.WithLabelValues(name, "initialize").Inc()
		e.log.Error("policy instance not started", "policy", name, "app", app, "err", err)
		return
	}
	if e.policies[name] != pe || (app != "" && e.apps[app] == nil) {
		return // replaced or removed meanwhile
	}
	in := &instance{policy: name, app: app, entry: pe, inst: inst, next: e.now(), index: -1}
	pe.instances[app] = in
	heap.Push(&e.due, in)
	e.pokeAnalyzer()
}

func (e *Engine) dropInstanceLocked(in *instance) {
	in.removed = true
	if in.index >= 0 {
		heap.Remove(&e.due, in.index)
	}
}

func (e *Engine) pokeAnalyzer() {
	select {
	case e.wakeAnalyzer <- struct{}{}:
	default:
	}
}

// analyzer hands due instances to the workers.
func (e *Engine) analyzer(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.mu.Lock()
		now := e.now()
		var ready []*instance
		for e.due.Len() > 0 && !e.due[0].next.After(now) {
			ready = append(ready, heap.Pop(&e.due).(*instance))
		}
		wait := time.Hour
		if e.due.Len() > 0 {
			wait = e.due[0].next.Sub(now)
		}
		e.mu.Unlock()
		for _, in := range ready {
			select {
			case e.work <- in:
			case <-ctx.Done():
				return
			}
		}
		if len(ready) > 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-e.wakeAnalyzer:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// worker runs instances' analyze and plan and puts them back in the
// schedule.
func (e *Engine) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case in := <-e.work:
			err := e.cycle(ctx, in)
			e.mu.Lock()
			if !in.removed {
				iv := in.inst.Config().AnalyzeInterval
				if iv > 0 {
					if err != nil && iv < time.Second {
						iv = time.Second // a failing policy does not spin
					}
					in.next = e.now().Add(iv)
					heap.Push(&e.due, in)
				}
				// An interval of 0 means run once: the instance stays
				// registered but is not scheduled again.
			}
			e.mu.Unlock()
			e.pokeAnalyzer()
		}
	}
}

// cycle runs analyze and, when it asks for it, plan; a plan is queued for
// the next tick.
func (e *Engine) cycle(ctx context.Context, in *instance) error {
	inputs := e.inputs(ctx, in)
	if in.app != "" && len(inputs.Applications) == 0 {
		return nil // the application went away; the instance is stopping
	}
	log := e.scope("policy", in.policy)
	if in.app != "" {
		log = log.with("app", in.app)
	}
	start := time.Now()
	needed, err := in.inst.Analyze(ctx, inputs)
	e.metrics.analyze.WithLabelValues(in.policy).Observe(time.Since(start).Seconds())
	if err != nil {
		e.policyFailed(ctx, log, in, "analyze", err)
		return err
	}
	if !needed {
		e.policyOK(in)
		return nil
	}
	start = time.Now()
	p, err := in.inst.Plan(ctx, inputs)
	e.metrics.plan.WithLabelValues(in.policy).Observe(time.Since(start).Seconds())
	if err != nil {
		e.policyFailed(ctx, log, in, "plan", err)
		return err
	}
	e.policyOK(in)
	if len(p) == 0 {
		log.Debug("policy planned nothing")
		return nil
	}
	e.enqueue(log, in, p)
	return nil
}

func (e *Engine) policyOK(in *instance) {
	e.mu.Lock()
	defer e.mu.Unlock()
	in.entry.lastErr = nil
}

func (e *Engine) policyFailed(ctx context.Context, log scoped, in *instance, phase string, err error) {
	if ctx.Err() != nil {
		return // stopping: the call was cancelled
	}
	e.metrics.policyErrs.WithLabelValues(in.policy, phase).Inc()
	e.mu.Lock()
	in.entry.lastErr = err
	in.entry.errors++
	e.mu.Unlock()
	attrs := []any{"phase", phase, "err", err}
	var pe *policy.Error
	if errors.As(err, &pe) {
		attrs = append(attrs, "at", pe.Location())
	}
	log.Error("policy call failed", attrs...)
}

// inputs builds the arguments of an instance's calls.
func (e *Engine) inputs(ctx context.Context, in *instance) *policy.Inputs {
	e.mu.Lock()
	var apps []map[string]any
	if in.app != "" {
		if a := e.apps[in.app]; a != nil {
			apps = []map[string]any{a.app.Description}
		}
	} else {
		ids := make([]string, 0, len(e.apps))
		for id := range e.apps {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			apps = append(apps, e.apps[id].app.Description)
		}
	}
	system := e.system
	e.mu.Unlock()
	return &policy.Inputs{
		Applications: apps,
		System:       system,
		Mechanisms:   e.mechanismViews(ctx),
		Telemetry:    e.sampler.Store(),
		MLConnector:  e.mlConnector,
	}
}

// mechanismViews returns every mechanism's state and options, refreshed at
// most once per sampling interval (State may run a command such as
// nvidia-smi).
func (e *Engine) mechanismViews(ctx context.Context) map[string]policy.MechanismView {
	ttl := e.sampler.Interval()
	now := e.now()
	out := map[string]policy.MechanismView{}
	for _, name := range e.mechs.Names() {
		e.mu.Lock()
		c, ok := e.states[name]
		e.mu.Unlock()
		if ok && now.Sub(c.at) < ttl {
			out[name] = c.view
			continue
		}
		m, _ := e.mechs.Get(name)
		state, err := m.State(ctx)
		if err != nil {
			state = map[string]any{"error": err.Error()}
		}
		v := policy.MechanismView{State: state, Options: m.Options()}
		e.mu.Lock()
		e.states[name] = stateCache{at: now, view: v}
		e.mu.Unlock()
		out[name] = v
	}
	return out
}

// Submit queues a plan that did not come from one of the engine's
// policies, such as a node's plan forwarded to its cluster agent. source
// is recorded as the plan's policy. It returns the plan's ID.
func (e *Engine) Submit(source, app string, core bool, p map[string]any) (string, error) {
	if len(p) == 0 {
		return "", errors.New("mape: empty plan")
	}
	rec := e.newPlan(source, app, core, p)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.plans.add(rec)
	e.metrics.plans.WithLabelValues(string(StateQueued)).Inc()
	if d := e.checkMechanisms(rec); d != nil {
		e.discardLocked(*d)
		return rec.ID, errors.New(d.reason)
	}
	e.queue = append(e.queue, rec)
	return rec.ID, nil
}

func (e *Engine) newPlan(source, app string, core bool, p map[string]any) *plan {
	now := e.now()
	rec := &plan{PlanRecord: PlanRecord{ID: newID(), Policy: source, App: app, Core: core, Plan: p, State: StateQueued, Created: now}, outcomes: map[string]*outcome{}}
	for name := range p {
		rec.outcomes[name] = &outcome{MechanismOutcome: MechanismOutcome{Status: StatusWaiting, Updated: now}}
	}
	rec.mechanisms() // computed before the plan is shared
	return rec
}

// checkMechanisms returns a discard for a plan naming a mechanism that is
// not enabled, or whose command is not a dict.
func (e *Engine) checkMechanisms(rec *plan) *discard {
	for _, name := range rec.mechanisms() {
		if _, ok := e.mechs.Get(name); !ok {
			return &discard{p: rec, kind: reasonUnknownMechanism, reason: fmt.Sprintf("mechanism %s is not enabled on this agent (enabled: %s)", name, strings.Join(e.mechs.Names(), ", "))}
		}
		if _, ok := rec.Plan[name].(map[string]any); !ok {
			return &discard{p: rec, kind: reasonInvalidPlan, reason: fmt.Sprintf("the command for mechanism %s is a %T, want a dict", name, rec.Plan[name])}
		}
	}
	return nil
}

func (e *Engine) enqueue(log scoped, in *instance, p map[string]any) {
	rec := e.newPlan(in.policy, in.app, in.entry.cfg.Core, p)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.plans.add(rec)
	e.metrics.plans.WithLabelValues(string(StateQueued)).Inc()
	if in.removed {
		e.discardLocked(discard{p: rec, kind: reasonPolicyGone, reason: "the policy instance was stopped while planning"})
		return
	}
	if d := e.checkMechanisms(rec); d != nil {
		e.discardLocked(*d)
		return
	}
	e.queue = append(e.queue, rec)
	log.Info("plan queued", "plan", rec.ID, "mechanisms", rec.mechanisms(), "core", rec.Core)
}

func (e *Engine) discardLocked(d discard) {
	p := d.p
	now := e.now()
	p.State = StateDiscarded
	p.Reason = d.reason
	p.Finished = now
	for _, o := range p.outcomes {
		o.Status = StatusSkipped
		o.Updated = now
	}
	e.metrics.plans.WithLabelValues(string(StateDiscarded)).Inc()
	e.metrics.discards.WithLabelValues(d.kind).Inc()
	attrs := []any{"plan", p.ID, "policy", p.Policy, "reason", d.reason}
	if p.App != "" {
		attrs = append(attrs, "app", p.App)
	}
	e.log.Info("plan discarded", attrs...)
}

// scheduler ticks until ctx is done.
func (e *Engine) scheduler(ctx context.Context) {
	t := time.NewTicker(e.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			e.mu.Lock()
			for _, p := range e.queue {
				e.discardLocked(discard{p: p, kind: reasonStopped, reason: "the agent stopped before the plan was scheduled"})
			}
			e.queue = nil
			e.mu.Unlock()
			return
		case <-t.C:
			e.schedule(ctx)
		}
	}
}

// schedule runs one tick: it resolves the queue, starts the scheduled
// plans and fails pending plans that waited too long.
func (e *Engine) schedule(ctx context.Context) {
	e.mu.Lock()
	queue := e.queue
	e.queue = nil
	busy := map[string]string{}
	for _, p := range e.inflight {
		for name, o := range p.outcomes {
			if o.Status == StatusRunning || o.Status == mechanism.StatusPending || o.Status == StatusWaiting {
				busy[name+"\x00"+p.App] = p.ID
			}
		}
	}
	res := resolve(queue,
		func(m, app string) string { return busy[m+"\x00"+app] },
		func(app string) bool { return e.apps[app] != nil })
	for _, d := range res.discarded {
		e.discardLocked(d)
	}
	now := e.now()
	for _, p := range res.deferred {
		if p.deferrals == 1 {
			e.log.Info("core plan waits for the next tick", "plan", p.ID, "policy", p.Policy, "app", p.App, "reason", p.Reason)
		}
	}
	e.queue = append(res.deferred, e.queue...)
	for _, p := range res.scheduled {
		p.State = StateExecuting
		p.Reason = ""
		p.Scheduled = now
		e.inflight[p.ID] = p
		e.metrics.plans.WithLabelValues(string(StateExecuting)).Inc()
	}
	e.expireLocked(now)
	e.mu.Unlock()

	for _, p := range res.scheduled {
		e.execWG.Add(1)
		go func() {
			defer e.execWG.Done()
			e.execute(ctx, p)
		}()
	}
}

// expireLocked fails the mechanisms that have been pending too long.
func (e *Engine) expireLocked(now time.Time) {
	for _, p := range e.inflight {
		if p.State != StatePending || now.Sub(p.pendingSince) < e.pendingLimit {
			continue
		}
		for name, o := range p.outcomes {
			if o.Status == mechanism.StatusPending {
				o.Status = mechanism.StatusFailed
				o.Error = fmt.Sprintf("no result within %s", e.pendingLimit)
				o.Updated = now
				e.metrics.results.WithLabelValues(name, string(mechanism.StatusFailed)).Inc()
			}
		}
		e.settleLocked(p)
	}
}

// execute applies a scheduled plan: every mechanism concurrently.
func (e *Engine) execute(ctx context.Context, p *plan) {
	var wg sync.WaitGroup
	for _, name := range p.mechanisms() {
		m, _ := e.mechs.Get(name)
		cmd := deepCopy(p.Plan[name]).(map[string]any)
		cmd[mechanism.PlanIDKey] = p.ID
		e.mu.Lock()
		p.outcomes[name].Status = StatusRunning
		p.outcomes[name].Updated = e.now()
		e.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, e.applyTimeout)
			res, err := m.Apply(actx, cmd)
			cancel()
			e.applied(p, name, res, err)
		}()
	}
	wg.Wait()
	e.mu.Lock()
	e.settleLocked(p)
	e.mu.Unlock()
}

// applied records the result of one Apply.
func (e *Engine) applied(p *plan, name string, res mechanism.Result, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := p.outcomes[name]
	now := e.now()
	o.Updated = now
	o.Detail = res.Detail
	// The mechanism changed something: policies get its fresh state.
	delete(e.states, name)
	log := e.scope("plan", p.ID, "policy", p.Policy, "mechanism", name)
	if p.App != "" {
		log = log.with("app", p.App)
	}
	switch {
	case err != nil:
		o.Status = mechanism.StatusFailed
		o.Error = err.Error()
		log.Warn("mechanism failed", "err", err)
	case res.Status == mechanism.StatusPending:
		o.Status = mechanism.StatusPending
		if p.pendingSince.IsZero() {
			p.pendingSince = now
		}
		log.Info("mechanism pending")
	default:
		o.Status = mechanism.StatusSuccess
		log.Info("mechanism applied")
	}
	e.metrics.results.WithLabelValues(name, string(o.Status)).Inc()
	if o.early != nil {
		// The result arrived before Apply returned.
		early := *o.early
		o.early = nil
		if o.Status == mechanism.StatusPending {
			e.completeLocked(p, o, early)
			e.metrics.results.WithLabelValues(name, string(early.Status)).Inc()
		} else {
			log.Warn("mechanism reported a result for a command it did not leave pending; ignored", "status", early.Status)
		}
	}
}

// Complete records the late result of a mechanism that answered Pending.
// The mechanisms' completions are routed here; agents may also call it
// directly. It is an error for a plan that is not waiting for that
// mechanism (unknown, already finished, or timed out).
func (e *Engine) Complete(c mechanism.Completion) error {
	if c.Status != mechanism.StatusSuccess && c.Status != mechanism.StatusFailed {
		return fmt.Errorf("plan %s: result %q is neither Success nor Failed", c.PlanID, c.Status)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.inflight[c.PlanID]
	if p == nil {
		return fmt.Errorf("plan %s is not executing (unknown, finished or timed out)", c.PlanID)
	}
	o := p.outcomes[c.Mechanism]
	if o == nil {
		return fmt.Errorf("plan %s has no command for mechanism %s", c.PlanID, c.Mechanism)
	}
	switch o.Status {
	case StatusRunning:
		o.early = &c
		return nil
	case mechanism.StatusPending:
		e.completeLocked(p, o, c)
		e.metrics.results.WithLabelValues(c.Mechanism, string(c.Status)).Inc()
		e.settleLocked(p)
		return nil
	default:
		return fmt.Errorf("plan %s: mechanism %s already reported %s", c.PlanID, c.Mechanism, o.Status)
	}
}

func (e *Engine) completeLocked(p *plan, o *outcome, c mechanism.Completion) {
	o.Status = c.Status
	o.Updated = e.now()
	if c.Detail != nil {
		o.Detail = c.Detail
	}
	if c.Err != nil {
		o.Error = c.Err.Error()
	}
	e.log.Info("mechanism result", "plan", p.ID, "policy", p.Policy, "app", p.App, "mechanism", c.Mechanism, "status", c.Status, "err", o.Error)
}

// settleLocked sets a plan's state from its outcomes once no Apply runs.
func (e *Engine) settleLocked(p *plan) {
	if p.State.Final() {
		return
	}
	pending, running := false, false
	var failures []string
	for _, name := range p.mechanisms() {
		o := p.outcomes[name]
		switch o.Status {
		case mechanism.StatusPending:
			pending = true
		case StatusRunning, StatusWaiting:
			running = true
		case mechanism.StatusFailed:
			failures = append(failures, name+": "+o.Error)
		}
	}
	if running {
		return
	}
	if pending {
		p.State = StatePending
		return
	}
	p.Finished = e.now()
	delete(e.inflight, p.ID)
	log := e.scope("plan", p.ID, "policy", p.Policy)
	if p.App != "" {
		log = log.with("app", p.App)
	}
	if len(failures) > 0 {
		// A plan with a failed mechanism is not Completed, even if the
		// others succeeded (upstream marked it Completed).
		p.State = StateFailed
		p.Reason = strings.Join(failures, "; ")
		log.Warn("plan failed", "reason", p.Reason)
	} else {
		p.State = StateCompleted
		log.Info("plan completed")
	}
	e.metrics.plans.WithLabelValues(string(p.State)).Inc()
}

// Plans returns plans of the plan log that match q, newest first.
func (e *Engine) Plans(q Query) []PlanRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []PlanRecord
	e.plans.newestFirst(func(p *plan) bool {
		if q.matches(p) {
			out = append(out, p.snapshot())
		}
		return q.Limit <= 0 || len(out) < q.Limit
	})
	return out
}

// Plan returns one plan: from the log, or still executing.
func (e *Engine) Plan(id string) (PlanRecord, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.plans.byID[id]; ok {
		return p.snapshot(), true
	}
	if p, ok := e.inflight[id]; ok {
		return p.snapshot(), true
	}
	return PlanRecord{}, false
}

// newID returns a random UUID (version 4).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// dueHeap orders instances by their next analyze time.
type dueHeap []*instance

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *dueHeap) Push(x any) {
	in := x.(*instance)
	in.index = len(*h)
	*h = append(*h, in)
}
func (h *dueHeap) Pop() any {
	old := *h
	in := old[len(old)-1]
	old[len(old)-1] = nil
	in.index = -1
	*h = old[:len(old)-1]
	return in
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

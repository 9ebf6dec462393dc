package mape

import (
	"container/heap"
	"context"
	"errors"
	"sort"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/policy"
)

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
		// Converted once for every instance that reads it until the
		// next refresh; a state that cannot be converted is left to
		// each call, which reports where.
		if sv, err := v.Shared(); err == nil {
			v = sv
		}
		e.mu.Lock()
		e.states[name] = stateCache{at: now, view: v}
		e.mu.Unlock()
		out[name] = v
	}
	return out
}

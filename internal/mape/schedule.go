package mape

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

// Discard reasons, also the values of the discards metric's reason label.
const (
	reasonConflict         = "conflict"
	reasonBusy             = "busy"
	reasonUnknownMechanism = "unknown_mechanism"
	reasonApplicationGone  = "application_removed"
	reasonPolicyGone       = "policy_removed"
	reasonInvalidPlan      = "invalid_plan"
	reasonStopped          = "stopped"
)

// discard is a plan the scheduler drops, with why.
type discard struct {
	p      *plan
	kind   string // one of the reason constants
	reason string // for people
}

// resolution is what one tick decides.
type resolution struct {
	scheduled []*plan
	deferred  []*plan
	discarded []discard
}

// resolve decides the fate of the plans queued for one tick, in order of
// arrival:
//
//   - plans for applications no longer managed are discarded;
//   - core plans are considered before the others and are never
//     discarded: one whose mechanism is taken waits for the next tick,
//     keeping its place;
//   - a plan claims all its mechanisms for the tick; a later plan that
//     needs one of them is discarded (first wins);
//   - a plan for a mechanism still executing a plan of the same
//     application (busy returns that plan's id) is discarded, so that
//     policies do not pile changes on a change in progress.
//
// busy(mechanism, app) returns the id of an executing plan or "".
func resolve(queue []*plan, busy func(mechanism, app string) string, managed func(app string) bool) resolution {
	ordered := make([]*plan, 0, len(queue))
	for _, p := range queue {
		if p.Core {
			ordered = append(ordered, p)
		}
	}
	for _, p := range queue {
		if !p.Core {
			ordered = append(ordered, p)
		}
	}
	var r resolution
	claimed := map[string]*plan{}
	for _, p := range ordered {
		if p.App != "" && !managed(p.App) {
			r.discarded = append(r.discarded, discard{p: p, kind: reasonApplicationGone, reason: fmt.Sprintf("application %s is no longer managed by this agent", p.App)})
			continue
		}
		kind, reason := "", ""
		for _, m := range p.mechanisms() {
			if other, ok := claimed[m]; ok {
				kind = reasonConflict
				reason = fmt.Sprintf("mechanism %s is already taken in this tick by plan %s of policy %s", m, other.ID, other.Policy)
				break
			}
			if id := busy(m, p.App); id != "" {
				kind = reasonBusy
				reason = fmt.Sprintf("mechanism %s is still executing plan %s for %s", m, id, appLabel(p.App))
				break
			}
		}
		if kind != "" {
			if p.Core {
				p.deferrals++
				p.Reason = "waiting: " + reason
				r.deferred = append(r.deferred, p)
			} else {
				r.discarded = append(r.discarded, discard{p: p, kind: kind, reason: reason})
			}
			continue
		}
		for _, m := range p.mechanisms() {
			claimed[m] = p
		}
		r.scheduled = append(r.scheduled, p)
	}
	return r
}

func appLabel(app string) string {
	if app == "" {
		return "the global policies"
	}
	return "application " + app
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

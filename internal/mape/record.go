package mape

import (
	"crypto/rand"
	"fmt"
	"sort"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

// PlanState is where a plan is in its life.
type PlanState string

// Plan states.
const (
	// StateQueued: produced by a policy, waiting for the next tick.
	StateQueued PlanState = "Queued"
	// StateDiscarded: dropped by the scheduler; Reason says why.
	StateDiscarded PlanState = "Discarded"
	// StateExecuting: scheduled; its mechanisms are applying it.
	StateExecuting PlanState = "Executing"
	// StatePending: applied; at least one mechanism has not reported yet.
	StatePending PlanState = "Pending"
	// StateCompleted: every mechanism succeeded.
	StateCompleted PlanState = "Completed"
	// StateFailed: at least one mechanism failed (or never reported).
	StateFailed PlanState = "Failed"
)

// PlanStates lists every state.
var PlanStates = []PlanState{StateQueued, StateDiscarded, StateExecuting, StatePending, StateCompleted, StateFailed}

// Final tells whether the state is an end state.
func (s PlanState) Final() bool {
	return s == StateDiscarded || s == StateCompleted || s == StateFailed
}

// Statuses of one mechanism's part of a plan, besides the mechanism
// package's Success, Pending and Failed.
const (
	// StatusWaiting: the plan is not executing yet.
	StatusWaiting mechanism.Status = "Waiting"
	// StatusRunning: Apply is running.
	StatusRunning mechanism.Status = "Running"
	// StatusSkipped: the plan was discarded.
	StatusSkipped mechanism.Status = "Skipped"
)

// MechanismOutcome is one mechanism's part of a plan.
type MechanismOutcome struct {
	Status mechanism.Status // Waiting, Running, Success, Pending, Failed or Skipped
	// Error says why it failed.
	Error string
	// Detail is what the mechanism reported doing.
	Detail map[string]any
	// Updated is when the status last changed.
	Updated time.Time
}

// PlanRecord is a plan and what became of it.
type PlanRecord struct {
	// ID identifies the plan; mechanisms receive it as plan_uid.
	ID string
	// Policy made it (or the source given to Submit).
	Policy string
	// App is the application it is for; empty for global policies.
	App string
	// Core plans come from core policies.
	Core bool
	// Plan maps mechanism names to commands, as the policy returned it.
	Plan map[string]any
	// State is where the plan is.
	State PlanState
	// Reason explains a discard or a failure.
	Reason string
	// Mechanisms are the outcomes by mechanism name.
	Mechanisms map[string]MechanismOutcome
	// Created, Scheduled and Finished time the plan's life.
	Created, Scheduled, Finished time.Time
}

// plan is the engine's mutable record; the engine's mutex guards it.
type plan struct {
	PlanRecord
	outcomes     map[string]*outcome
	pendingSince time.Time
	deferrals    int
	names        []string // sorted mechanism names, computed once
}

type outcome struct {
	MechanismOutcome
	// early is a completion that arrived while Apply was still running.
	early *mechanism.Completion
}

// snapshot copies the record for callers.
func (p *plan) snapshot() PlanRecord {
	r := p.PlanRecord
	r.Plan = p.Plan // policies' plans are never modified after creation
	r.Mechanisms = make(map[string]MechanismOutcome, len(p.outcomes))
	for n, o := range p.outcomes {
		r.Mechanisms[n] = o.MechanismOutcome
	}
	return r
}

// mechanisms returns the plan's mechanism names, sorted.
func (p *plan) mechanisms() []string {
	if len(p.names) == len(p.Plan) {
		return p.names
	}
	out := make([]string, 0, len(p.Plan))
	for n := range p.Plan {
		out = append(out, n)
	}
	sort.Strings(out)
	p.names = out
	return out
}

// planLog is a ring buffer of the most recent plans.
type planLog struct {
	buf   []*plan
	start int
	n     int
	byID  map[string]*plan
}

func newPlanLog(size int) *planLog {
	return &planLog{buf: make([]*plan, size), byID: make(map[string]*plan, size)}
}

// add records p, evicting the oldest plan when full.
func (l *planLog) add(p *plan) {
	if l.n == len(l.buf) {
		old := l.buf[l.start]
		delete(l.byID, old.ID)
		l.buf[l.start] = p
		l.start = (l.start + 1) % len(l.buf)
	} else {
		l.buf[(l.start+l.n)%len(l.buf)] = p
		l.n++
	}
	l.byID[p.ID] = p
}

// newestFirst calls f for each plan from the newest until f returns false.
func (l *planLog) newestFirst(f func(p *plan) bool) {
	for i := l.n - 1; i >= 0; i-- {
		if !f(l.buf[(l.start+i)%len(l.buf)]) {
			return
		}
	}
}

// Query selects plans from the log; zero fields match everything.
type Query struct {
	App    string    // plans for this application
	Policy string    // plans of this policy
	State  PlanState // plans in this state
	// Limit caps the number of plans returned (newest first).
	Limit int
}

func (q Query) matches(p *plan) bool {
	return (q.App == "" || p.App == q.App) && (q.Policy == "" || p.Policy == q.Policy) && (q.State == "" || p.State == q.State)
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

package mape

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

// execute applies a scheduled plan: every mechanism concurrently.
func (e *Engine) execute(ctx context.Context, p *plan) {
	var wg sync.WaitGroup
	for _, name := range p.mechanisms() {
		m, _ := e.mechs.Get(name)
		cmd := deepCopy(p.Plan[name]).(map[string]any)
		cmd[mechanism.PlanIDKey] = p.ID
		cmd[mechanism.PolicyKey] = p.Policy
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

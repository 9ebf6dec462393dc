package mechanism

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// FluidityProxyName is the name plans use for the proxy (the upstream
// name).
const FluidityProxyName = "fluidity_proxy"

// FluidityProxy lets node policies use the cluster's fluidity mechanism.
// Apply forwards the command ({name, deployment_plan: {...}}, the fluidity
// shape) to the cluster agent through the Forwarder and returns
// StatusPending; the agent calls Executed (or HandleUpdate with the
// cluster's plan_executed message) when the cluster reports the outcome,
// and the proxy completes the plan. A plan the cluster does not report on
// within the timeout fails.
type FluidityProxy struct {
	fwd      Forwarder
	timeout  time.Duration
	complete func(Completion)
	log      *slog.Logger

	mu      sync.Mutex
	pending map[string]*time.Timer
	closed  bool
}

var (
	_ Mechanism = (*FluidityProxy)(nil)
	_ Closer    = (*FluidityProxy)(nil)
)

// NewFluidityProxy is the Factory of FluidityProxyName. It needs
// Env.Forwarder. Config keys: timeout (a duration string, default 2m).
func NewFluidityProxy(env Env) (*FluidityProxy, error) {
	if env.Forwarder == nil {
		return nil, errors.New("fluidity_proxy needs a Forwarder to reach the cluster agent")
	}
	p := &FluidityProxy{fwd: env.Forwarder, timeout: 2 * time.Minute, complete: env.Complete, log: env.Logger, pending: map[string]*time.Timer{}}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.complete == nil {
		p.complete = func(Completion) {}
	}
	if s, ok := env.Config["timeout"].(string); ok {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("config timeout: %q is not a positive duration", s)
		}
		p.timeout = d
	}
	return p, nil
}

// Apply implements Mechanism.
func (p *FluidityProxy) Apply(ctx context.Context, cmd map[string]any) (Result, error) {
	id, _ := cmd[PlanIDKey].(string)
	if id == "" {
		return Result{}, fmt.Errorf("command has no %s; plans must come through the MAPE engine", PlanIDKey)
	}
	if _, ok := cmd["deployment_plan"].(map[string]any); !ok {
		return Result{}, errors.New("deployment_plan: required: a map from component name to a list of actions, as for fluidity")
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Result{}, errors.New("fluidity_proxy is closed")
	}
	if _, dup := p.pending[id]; dup {
		p.mu.Unlock()
		return Result{}, fmt.Errorf("plan %s is already forwarded", id)
	}
	// Registered before forwarding, so that a fast report is not lost.
	p.pending[id] = time.AfterFunc(p.timeout, func() { p.expire(id) })
	p.mu.Unlock()

	if err := p.fwd.Forward(ctx, id, cmd); err != nil {
		p.take(id)
		return Result{}, fmt.Errorf("forward plan to the cluster agent: %w", err)
	}
	p.log.Info("plan forwarded to the cluster agent", "plan", id)
	return Result{Status: StatusPending, Detail: map[string]any{"forwarded": true}}, nil
}

// take removes a pending plan and tells whether it was pending.
func (p *FluidityProxy) take(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.pending[id]
	if ok {
		t.Stop()
		delete(p.pending, id)
	}
	return ok
}

func (p *FluidityProxy) expire(id string) {
	if !p.take(id) {
		return
	}
	p.log.Warn("cluster agent did not report the plan", "plan", id, "timeout", p.timeout)
	p.complete(Completion{PlanID: id, Status: StatusFailed, Err: fmt.Errorf("the cluster agent did not report the plan within %s", p.timeout)})
}

// Executed completes a forwarded plan with the cluster's outcome. An
// unknown or already completed plan id is an error (a late or duplicate
// report), which the agent may log and drop.
func (p *FluidityProxy) Executed(planID string, status Status, message string) error {
	if status != StatusSuccess && status != StatusFailed {
		return fmt.Errorf("plan %s: outcome %q is not Success or Failed", planID, status)
	}
	if !p.take(planID) {
		return fmt.Errorf("plan %s is not waiting for the cluster (unknown, timed out or already reported)", planID)
	}
	c := Completion{PlanID: planID, Status: status}
	if message != "" {
		c.Detail = map[string]any{"message": message}
	}
	if status == StatusFailed {
		if message == "" {
			message = "the cluster agent reported failure"
		}
		c.Err = errors.New(message)
	}
	p.complete(c)
	return nil
}

// HandleUpdate reads the cluster's plan_executed message (the payload of
// upstream fluidity_plan_update: {plan_uid, status: Completed|Failed, ...})
// and calls Executed.
func (p *FluidityProxy) HandleUpdate(msg map[string]any) error {
	id, _ := msg[PlanIDKey].(string)
	if id == "" {
		return fmt.Errorf("plan update has no %s", PlanIDKey)
	}
	status, _ := msg["status"].(string)
	message, _ := msg["message"].(string)
	switch status {
	case "Completed", "Success", "Succeeded":
		return p.Executed(id, StatusSuccess, message)
	case "Failed":
		return p.Executed(id, StatusFailed, message)
	default:
		return fmt.Errorf("plan %s: update status %q is not Completed or Failed", id, status)
	}
}

// State implements Mechanism: the plans waiting for the cluster.
func (p *FluidityProxy) State(context.Context) (map[string]any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.pending))
	for id := range p.pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	list := make([]any, len(ids))
	for i, id := range ids {
		list[i] = id
	}
	return map[string]any{"pending_plans": list}, nil
}

// Options implements Mechanism.
func (p *FluidityProxy) Options() map[string]any {
	return map[string]any{
		"actions": []any{"deploy", "move", "remove", "change_spec"},
		"timeout": p.timeout.String(),
	}
}

// Close stops the timers; pending plans are left to the engine's own
// pending timeout.
func (p *FluidityProxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, t := range p.pending {
		t.Stop()
		delete(p.pending, id)
	}
	return nil
}

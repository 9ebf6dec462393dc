package mechanism

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// recordingForwarder records forwarded plans; fail makes Forward fail.
type recordingForwarder struct {
	mu   sync.Mutex
	sent []string
	fail error
}

func (f *recordingForwarder) Forward(_ context.Context, planID string, _ map[string]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.sent = append(f.sent, planID)
	return nil
}

func proxyCommand(id string) map[string]any {
	return map[string]any{
		PlanIDKey: id,
		"name":    "app",
		"deployment_plan": map[string]any{
			"server":       []any{map[string]any{"action": "change_spec", "host": "edge-1", "new_spec": map[string]any{}}},
			"initial_plan": false,
		},
	}
}

func newProxy(t *testing.T, fwd Forwarder, cfg map[string]any) (*FluidityProxy, chan Completion) {
	t.Helper()
	done := make(chan Completion, 4)
	p, err := NewFluidityProxy(Env{Forwarder: fwd, Config: cfg, Complete: func(c Completion) { done <- c }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, done
}

func TestFluidityProxyOutcomes(t *testing.T) {
	cases := map[string]struct {
		report     func(p *FluidityProxy) error
		wantStatus Status
		wantErr    string
	}{
		"cluster reports success": {
			report:     func(p *FluidityProxy) error { return p.Executed("p1", StatusSuccess, "") },
			wantStatus: StatusSuccess,
		},
		"cluster reports failure": {
			report:     func(p *FluidityProxy) error { return p.Executed("p1", StatusFailed, "no node fits") },
			wantStatus: StatusFailed,
			wantErr:    "no node fits",
		},
		"upstream plan_executed message": {
			report: func(p *FluidityProxy) error {
				return p.HandleUpdate(map[string]any{"plan_uid": "p1", "status": "Completed", "name": "app"})
			},
			wantStatus: StatusSuccess,
		},
		"upstream failed message": {
			report: func(p *FluidityProxy) error {
				return p.HandleUpdate(map[string]any{"plan_uid": "p1", "status": "Failed"})
			},
			wantStatus: StatusFailed,
			wantErr:    "the cluster agent reported failure",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fwd := &recordingForwarder{}
			p, done := newProxy(t, fwd, nil)
			res, err := p.Apply(context.Background(), proxyCommand("p1"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StatusPending {
				t.Fatalf("status = %s, want Pending", res.Status)
			}
			state, _ := p.State(context.Background())
			if diff := cmp.Diff(map[string]any{"pending_plans": []any{"p1"}}, state); diff != "" {
				t.Errorf("state: %s", diff)
			}
			if err := tc.report(p); err != nil {
				t.Fatal(err)
			}
			c := <-done
			gotErr := ""
			if c.Err != nil {
				gotErr = c.Err.Error()
			}
			if c.PlanID != "p1" || c.Status != tc.wantStatus || gotErr != tc.wantErr {
				t.Errorf("completion = %+v, want %s %q", c, tc.wantStatus, tc.wantErr)
			}
			// A second report for the same plan is refused.
			if err := p.Executed("p1", StatusSuccess, ""); err == nil {
				t.Error("duplicate report accepted")
			}
			if diff := cmp.Diff([]string{"p1"}, fwd.sent); diff != "" {
				t.Errorf("forwarded: %s", diff)
			}
		})
	}
}

func TestFluidityProxyTimeout(t *testing.T) {
	p, done := newProxy(t, &recordingForwarder{}, map[string]any{"timeout": "20ms"})
	if _, err := p.Apply(context.Background(), proxyCommand("slow")); err != nil {
		t.Fatal(err)
	}
	c := <-done
	if c.PlanID != "slow" || c.Status != StatusFailed || c.Err == nil || c.Err.Error() != "the cluster agent did not report the plan within 20ms" {
		t.Errorf("completion = %+v", c)
	}
	if err := p.Executed("slow", StatusSuccess, ""); err == nil {
		t.Error("a report after the timeout was accepted")
	}
}

func TestFluidityProxyRefusals(t *testing.T) {
	cases := map[string]struct {
		fwd     *recordingForwarder
		cmd     map[string]any
		wantErr string
	}{
		"no plan id": {
			fwd:     &recordingForwarder{},
			cmd:     map[string]any{"deployment_plan": map[string]any{}},
			wantErr: "command has no plan_uid; plans must come through the MAPE engine",
		},
		"not a fluidity plan": {
			fwd:     &recordingForwarder{},
			cmd:     map[string]any{PlanIDKey: "x", "action": "move"},
			wantErr: "deployment_plan: required: a map from component name to a list of actions, as for fluidity",
		},
		"cluster unreachable": {
			fwd:     &recordingForwarder{fail: errors.New("xmpp: not connected")},
			cmd:     proxyCommand("x"),
			wantErr: "forward plan to the cluster agent: xmpp: not connected",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := newProxy(t, tc.fwd, nil)
			_, err := p.Apply(context.Background(), tc.cmd)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			state, _ := p.State(context.Background())
			if diff := cmp.Diff(map[string]any{"pending_plans": []any{}}, state); diff != "" {
				t.Errorf("a refused plan is pending: %s", diff)
			}
		})
	}
	if _, err := NewFluidityProxy(Env{}); err == nil {
		t.Error("built without a Forwarder")
	}
}

// Build routes completions to OnComplete with the mechanism's name, also
// those reported before OnComplete was called.
func TestRegistryBuild(t *testing.T) {
	r := NewBuiltinRegistry()
	if err := r.Register(CPUFrequencyName, NewCPUFrequencyConfigurator); err == nil {
		t.Error("registered a name twice")
	}
	if _, err := r.Build([]string{"fluidity_proxy", "teleporter"}, Env{Forwarder: &recordingForwarder{}}); err == nil ||
		err.Error() != `mechanism "teleporter" is not known; known mechanisms: CPUFrequencyConfigurator, GPUConfigurator, fluidity_proxy` {
		t.Errorf("error = %v", err)
	}
	if _, err := r.Build([]string{"fluidity_proxy"}, Env{}); err == nil || err.Error() != "mechanism fluidity_proxy: fluidity_proxy needs a Forwarder to reach the cluster agent" {
		t.Errorf("error = %v", err)
	}

	set, err := r.Build([]string{"fluidity_proxy", "CPUFrequencyConfigurator", "fluidity_proxy"}, Env{
		Forwarder: &recordingForwarder{},
		SysfsRoot: t.TempDir(),
		Configs:   map[string]map[string]any{"fluidity_proxy": {"timeout": "1h"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if diff := cmp.Diff([]string{"fluidity_proxy", "CPUFrequencyConfigurator"}, set.Names()); diff != "" {
		t.Errorf("names: %s", diff)
	}
	m, _ := set.Get("fluidity_proxy")
	proxy := m.(*FluidityProxy)
	if proxy.Options()["timeout"] != "1h0m0s" {
		t.Errorf("per-mechanism config not passed: %v", proxy.Options())
	}
	if _, err := proxy.Apply(context.Background(), proxyCommand("early")); err != nil {
		t.Fatal(err)
	}
	if err := proxy.Executed("early", StatusSuccess, ""); err != nil {
		t.Fatal(err)
	}
	got := make(chan Completion, 1)
	set.OnComplete(func(c Completion) { got <- c })
	select {
	case c := <-got:
		if diff := cmp.Diff(Completion{PlanID: "early", Mechanism: "fluidity_proxy", Status: StatusSuccess}, c, cmpopts.EquateErrors()); diff != "" {
			t.Errorf("completion (-want +got):\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("early completion not delivered")
	}
}

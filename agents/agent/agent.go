// Package agent is the MLSysOps agent runtime: it wires configuration,
// messaging, shared state, the MAPE engine, policies, mechanisms and
// telemetry into one process for the continuum, cluster or node layer.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/mape"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/policy"
	"github.com/mlsysops-go/mlsysops/internal/state/record"
	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// layer is what differs between the continuum, cluster and node agents.
type layer interface {
	// childLayer is the layer of the agents that subscribe to this one;
	// empty for nodes.
	childLayer() messaging.Layer
	// children are the JIDs the description lists.
	children() []string
	// systemDescription is the agent's own description in the upstream
	// form, for policies.
	systemDescription() map[string]any
	// mechanisms builds the layer's enabled mechanisms.
	mechanisms(a *Agent) (*mechanism.Set, error)
	// setup registers the layer's message handlers; the engine exists.
	setup(a *Agent) error
	// registered runs after every accepted subscribe to the parent.
	registered(ctx context.Context)
	// childRegistered runs when a child's subscribe is accepted.
	childRegistered(ctx context.Context, jid string, m *messaging.Subscribe)
	// peer sees every liveness change.
	peer(ctx context.Context, ev messaging.PeerEvent)
	// run runs the layer's loops until ctx ends.
	run(ctx context.Context) error
	// ready checks the layer's dependencies for /readyz.
	ready(ctx context.Context) error
	// status adds the layer's view to /status.
	status() map[string]any
	// descriptionChanged runs when the agent's own description file
	// changed: the layer applies what it can while running, and returns
	// an error wrapping ErrRestart for what needs a new start.
	descriptionChanged(ctx context.Context) error
}

// registry records a parent agent's accepted children and their liveness
// where the other components read them: the Redis registry of
// internal/state (state.Registry), kept by the continuum and cluster
// layers. Nodes have no children and no registry.
type registry interface {
	Register(ctx context.Context, a record.Agent) error
	SetLiveness(ctx context.Context, jid string, online bool, at time.Time) error
	List(ctx context.Context) ([]record.Agent, error)
}

// Agent is one running agent.
type Agent struct {
	opts    *agentconfig.Options
	conn    *Connection
	log     *slog.Logger
	name    string
	jid     string
	parent  string
	domain  string
	started time.Time

	reg        *prometheus.Registry
	msg        *messaging.Client
	engine     *mape.Engine
	sampler    *telemetry.Sampler
	mechs      *mechanism.Set
	registry   registry // nil on nodes
	layer      layer
	resub      chan struct{}
	registered atomic.Bool
	mode       atomic.Int64

	mu    sync.Mutex
	known map[string]record.Agent // accepted children, for the registry

	modeGauge     prometheus.Gauge
	regGauge      prometheus.Gauge
	subscribeTime prometheus.Gauge
}

// New builds an agent from its options: it loads the agent's own
// description (and fails with what is wrong when it is missing or invalid),
// connects nothing yet and registers every handler.
func New(ctx context.Context, opts *agentconfig.Options, conn *Connection, env agentconfig.LookupEnv, log *slog.Logger) (*Agent, error) {
	a := &Agent{
		opts: opts, conn: conn, name: opts.NodeName, domain: conn.XMPPDomain, started: time.Now(),
		reg: prometheus.NewRegistry(), resub: make(chan struct{}, 1), known: map[string]record.Agent{},
	}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.jid = AgentJID(opts.Layer, a.name, a.domain)
	if conn.XMPPJID != "" {
		a.jid = conn.XMPPJID
	}
	a.log = log.With(string(opts.Layer), a.name)
	a.modeGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "mlsysops_agent_management_mode", Help: "Management mode: 0 heuristic, 1 ML."})
	a.regGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "mlsysops_agent_registered", Help: "1 once the parent acknowledged the agent's subscription."})
	a.subscribeTime = prometheus.NewGauge(prometheus.GaugeOpts{Name: "mlsysops_agent_registered_seconds", Help: "Seconds from process start to the first acknowledged subscription."})
	a.reg.MustRegister(a.modeGauge, a.regGauge, a.subscribeTime)

	var err error
	a.layer, err = newLayer(ctx, a, env)
	if err != nil {
		return nil, err
	}
	if conn.Parent != "" {
		a.parent = conn.Parent
	}

	pw, err := password(conn.XMPPPasswordFile, env, "MLSYSOPS_XMPP_PASSWORD", "NODE_PASSWORD")
	if err != nil {
		return nil, err
	}
	if pw == "" {
		return nil, errors.New("no XMPP password: set --xmpp-password-file (a Secret mount) or $MLSYSOPS_XMPP_PASSWORD")
	}
	controllers := append([]string(nil), conn.Controllers...)
	if cn := conn.ContinuumName; cn != "" && opts.Layer == agentconfig.LayerNode {
		// The continuum agent may ping nodes and set their mode directly.
		controllers = append(controllers, AgentJID(agentconfig.LayerContinuum, cn, a.domain))
	}
	children := a.layer.children()
	listed := map[string]bool{}
	for _, c := range children {
		listed[c] = true
	}
	a.msg, err = messaging.New(messaging.Config{
		JID: a.jid, Password: pw, Layer: messaging.Layer(opts.Layer),
		Server: conn.XMPPServer, CAFile: conn.XMPPCAFile,
		Parent: a.parent, Controllers: controllers, Children: children,
		AcceptSubscribe:   func(from string) bool { return listed[from] },
		HeartbeatInterval: conn.HeartbeatInterval,
		Logger:            a.log, Registerer: a.reg,
	})
	if err != nil {
		return nil, fmt.Errorf("messaging: %w", err)
	}

	if err := a.buildEngine(ctx); err != nil {
		return nil, err
	}
	messaging.HandleFunc(a.msg, a.handlePing)
	messaging.HandleFunc(a.msg, a.handleMode)
	if a.layer.childLayer() != "" {
		messaging.HandleFunc(a.msg, a.handleSubscribe)
	}
	if err := a.layer.setup(a); err != nil {
		return nil, err
	}
	return a, nil
}

// buildEngine makes the mechanisms, the policy watcher and the MAPE engine.
func (a *Agent) buildEngine(ctx context.Context) error {
	mechs, err := a.layer.mechanisms(a)
	if err != nil {
		return fmt.Errorf("mechanisms: %w", err)
	}
	a.mechs = mechs
	if a.sampler == nil {
		a.sampler = telemetry.NewSampler(telemetry.SamplerOptions{Interval: a.opts.MonitoringInterval, Logger: a.log})
	}
	if err := a.sampler.Register(a.reg); err != nil {
		return err
	}
	rt := policy.Runtime{Limits: policy.Limits{MaxSteps: a.opts.PolicyMaxSteps, Timeout: a.opts.PolicyTimeout}, Logger: a.log}
	builtins, err := policy.Builtins(ctx, string(a.opts.Layer), rt)
	if err != nil {
		return fmt.Errorf("built-in policies: %w", err)
	}
	watcher := policy.NewWatcher(policy.WatcherOptions{
		Dir: a.opts.PolicyDirectory, Builtins: builtins, Runtime: rt, PollInterval: a.opts.PolicyPollInterval, Logger: a.log,
	})
	a.engine, err = mape.New(mape.Config{
		Layer: string(a.opts.Layer), Logger: a.log, Mechanisms: mechs, Sampler: a.sampler,
		MonitoringInterval: a.opts.MonitoringInterval, DefaultMetrics: a.opts.DefaultTelemetryMetrics,
		Policies: watcher, PlanLogSize: a.opts.PlanLogSize, PendingTimeout: a.opts.PendingTimeout,
		Registerer: a.reg,
	})
	if err != nil {
		return fmt.Errorf("MAPE engine: %w", err)
	}
	a.engine.SetSystemDescription(a.layer.systemDescription())
	return nil
}

// Run runs the agent until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.log.Info("agent starting", "jid", a.jid, "parent", a.parent, "policy_directory", a.opts.PolicyDirectory,
		"mechanisms", a.mechs.Names(), "listen", a.conn.Listen)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	start := func(what string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", what, err)
				cancel()
			}
		}()
	}
	if a.conn.Listen != "" {
		srv, err := a.serve()
		if err != nil {
			return err
		}
		start("http", srv)
	}
	start("messaging", a.msg.Run)
	start("mape", a.engine.Run)
	start("peers", a.watchPeers)
	if a.parent != "" {
		start("subscribe", a.subscribeLoop)
	}
	if a.registry != nil {
		start("registry", a.syncRegistry)
	}
	start(string(a.opts.Layer), a.layer.run)
	start("description", a.watchDescription)

	<-ctx.Done()
	wg.Wait()
	if err := a.mechs.Close(); err != nil {
		a.log.Warn("closing mechanisms", "err", err)
	}
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	a.log.Info("agent stopped")
	return errors.Join(out...)
}

// subscribeLoop registers with the parent until it acknowledges, then again
// whenever the parent comes back after being away (it may have restarted and
// forgotten its children).
func (a *Agent) subscribeLoop(ctx context.Context) error {
	backoff := 500 * time.Millisecond
	for {
		err := a.subscribe(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			a.log.Warn("parent did not accept the subscription; retrying", "parent", a.parent, "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
		select {
		case <-ctx.Done():
			return nil
		case <-a.resub:
		}
	}
}

func (a *Agent) subscribe(ctx context.Context) error {
	if err := a.msg.WaitConnected(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m := &messaging.Subscribe{Name: a.name, Layer: messaging.Layer(a.opts.Layer), Version: Version}
	if n, ok := a.layer.(*nodeLayer); ok {
		m.Cluster = n.cluster
	}
	resp, _, err := a.msg.Request(rctx, a.parent, m)
	if err != nil {
		return err
	}
	ack, ok := resp.(*messaging.SubscribeAck)
	if !ok {
		return fmt.Errorf("unexpected answer %T to subscribe", resp)
	}
	if !ack.Accepted {
		return fmt.Errorf("refused: %s", ack.Reason)
	}
	if !a.registered.Swap(true) {
		a.subscribeTime.Set(time.Since(a.started).Seconds())
	}
	a.regGauge.Set(1)
	a.log.Info("registered with parent", "parent", a.parent, "since_start", time.Since(a.started).Round(time.Millisecond).String())
	a.layer.registered(ctx)
	return nil
}

// watchPeers follows liveness: children go online and offline in the
// registry; the parent's return triggers a new subscription.
func (a *Agent) watchPeers(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-a.msg.Events():
			a.log.Info("peer liveness", "peer", ev.Peer, "role", ev.Role.String(), "online", ev.Online, "reason", ev.Reason)
			switch ev.Role {
			case messaging.RoleParent:
				if ev.Online && a.registered.Load() {
					select {
					case a.resub <- struct{}{}:
					default:
					}
				}
			case messaging.RoleChild:
				if a.registry != nil {
					a.mu.Lock()
					_, known := a.known[ev.Peer]
					a.mu.Unlock()
					if known {
						if err := a.registry.SetLiveness(ctx, ev.Peer, ev.Online, ev.Time); err != nil {
							a.log.Warn("registry liveness", "peer", ev.Peer, "err", err)
						}
					}
				}
			}
			a.layer.peer(ctx, ev)
		}
	}
}

// syncRegistry rewrites the registry entries of the accepted children
// periodically, so a Redis restart or a failed write heals by itself.
func (a *Agent) syncRegistry(ctx context.Context) error {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		online := map[string]messaging.PeerState{}
		for _, p := range a.msg.PeerStates() {
			online[p.Peer] = p
		}
		a.mu.Lock()
		agents := make([]record.Agent, 0, len(a.known))
		for _, ag := range a.known {
			agents = append(agents, ag)
		}
		a.mu.Unlock()
		for _, ag := range agents {
			p := online[ag.JID]
			if ag.JID == a.jid {
				p = messaging.PeerState{Online: true, LastSeen: time.Now()}
			}
			if err := a.registry.Register(ctx, ag); err != nil {
				a.log.Debug("registry write", "peer", ag.JID, "err", err)
				continue
			}
			_ = a.registry.SetLiveness(ctx, ag.JID, p.Online, p.LastSeen)
		}
	}
}

// handleSubscribe accepts a child of the right layer whose JID matches its
// name, records it and acknowledges.
func (a *Agent) handleSubscribe(ctx context.Context, env *messaging.Envelope, m *messaging.Subscribe) (messaging.Message, error) {
	want := a.layer.childLayer()
	refuse := func(reason string) (messaging.Message, error) {
		a.log.Warn("subscription refused", "peer", env.From, "reason", reason)
		return &messaging.SubscribeAck{Accepted: false, Reason: reason}, nil
	}
	if m.Layer != want {
		return refuse(fmt.Sprintf("a %s agent accepts %s agents, not %s", a.opts.Layer, want, m.Layer))
	}
	if exp := AgentJID(agentconfig.Layer(m.Layer), m.Name, a.domain); exp != env.From {
		return refuse(fmt.Sprintf("agent %s must use the account %s", m.Name, exp))
	}
	if want == messaging.LayerNode && m.Cluster != a.name {
		return refuse(fmt.Sprintf("node %s belongs to cluster %q, not %s", m.Name, m.Cluster, a.name))
	}
	if _, err := a.msg.AddChild(env.From); err != nil {
		return nil, fmt.Errorf("add child %s: %w", env.From, err)
	}
	ag := record.Agent{JID: env.From, Layer: string(m.Layer), Version: m.Version}
	if want == messaging.LayerNode {
		ag.Node, ag.Cluster = m.Name, a.name
	} else {
		ag.Cluster = m.Name
	}
	a.mu.Lock()
	_, again := a.known[env.From]
	a.known[env.From] = ag
	a.mu.Unlock()
	if a.registry != nil {
		if err := a.registry.Register(ctx, ag); err != nil {
			a.log.Warn("registry write failed; retried in the background", "peer", env.From, "err", err)
		} else {
			_ = a.registry.SetLiveness(ctx, env.From, true, time.Now())
		}
	}
	a.log.Info("child registered", "peer", env.From, "child_layer", string(m.Layer), "again", again, "version", m.Version)
	a.layer.childRegistered(ctx, env.From, m)
	return &messaging.SubscribeAck{Accepted: true, HeartbeatIntervalMillis: a.conn.HeartbeatInterval.Milliseconds()}, nil
}

func (a *Agent) handlePing(_ context.Context, _ *messaging.Envelope, m *messaging.Ping) (messaging.Message, error) {
	return &messaging.Pong{Note: m.Note}, nil
}

// handleMode switches the management mode and passes it on to the
// children, so one command to the continuum reaches every agent.
func (a *Agent) handleMode(ctx context.Context, env *messaging.Envelope, m *messaging.ManagementMode) (messaging.Message, error) {
	old := a.mode.Swap(int64(m.Mode))
	a.modeGauge.Set(float64(m.Mode))
	a.log.Info("management mode", "mode", m.Mode, "previous", old, "from", env.From, "reason", m.Reason)
	for _, c := range a.msg.Children() {
		go func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := a.msg.Send(sctx, c, &messaging.ManagementMode{Mode: m.Mode, Reason: m.Reason}); err != nil {
				a.log.Warn("management mode not delivered", "peer", c, "err", err)
			}
		}()
	}
	return nil, nil
}

// PingResult is one agent's answer to a ping from this agent.
type PingResult struct {
	JID           string  `json:"jid"`
	LatencyMillis float64 `json:"latency_ms"`
	Error         string  `json:"error,omitempty"`
}

// pingAll pings every agent in jids at once.
func (a *Agent) pingAll(ctx context.Context, jids []string) []PingResult {
	out := make([]PingResult, len(jids))
	var wg sync.WaitGroup
	for i, j := range jids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			_, _, err := a.msg.Request(pctx, j, &messaging.Ping{Note: a.name})
			out[i] = PingResult{JID: j, LatencyMillis: float64(time.Since(start).Microseconds()) / 1000}
			if err != nil {
				out[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

// toMap converts a typed value to upstream-style data through JSON.
func toMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// Package agent is what every MLSysOps agent shares, whatever its layer:
// the process and its options, identity, messaging and the registration
// with the parent (and, for agents with children, theirs), the MAPE engine
// with its policies and mechanisms, telemetry sampling, and the HTTP
// endpoints. Each layer's behaviour lives in its own package
// (agents/continuum, agents/cluster, agents/node), which implements Layer
// and registers itself with RegisterLayer.
package agent

import (
	"context"
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

// Agent is one running agent. Its exported fields are what its layer
// works with: the layer's constructor runs first in New and may set
// Parent, Sampler and Cluster, fill Conn.ContinuumName and call
// AcceptChildren; Msg, Engine and Mechs exist from the layer's Setup on.
// Layers only read the rest.
type Agent struct {
	// Opts are the agent's behaviour options.
	Opts *agentconfig.Options
	// Conn is how the agent reaches the services around it.
	Conn *Connection
	// Log is the agent's logger.
	Log *slog.Logger
	// Name is the agent's name: its node, cluster or continuum name.
	Name string
	// JID is the agent's own bare JID.
	JID string
	// Parent is the parent agent's bare JID; empty for the continuum. The
	// layer names it from its description; --parent overrides it.
	Parent string
	// Domain is the XMPP domain of every agent's account.
	Domain string
	// Metrics is the agent's Prometheus registry, served on /metrics.
	Metrics *prometheus.Registry
	// Msg is the agent's XMPP client.
	Msg *messaging.Client
	// Engine is the agent's MAPE engine.
	Engine *mape.Engine
	// Sampler is the agent's telemetry sampler; the agent makes one unless
	// the layer set its own (the node layer's samples its host).
	Sampler *telemetry.Sampler
	// Mechs are the agent's enabled mechanisms, built by the layer.
	Mechs *mechanism.Set
	// Cluster is the cluster a node agent belongs to, named in its
	// subscriptions (the node layer sets it); empty for the other layers.
	Cluster string
	// Registered is set once the parent accepted the agent's subscription.
	Registered atomic.Bool

	// The parts of an agent with children, set by AcceptChildren
	// (children.go): nil on nodes, so that the node-only build links none
	// of them.
	registry       Registry
	acceptChildren func()
	keepRegistry   func(context.Context) error
	// mu guards known.
	mu sync.Mutex
	// known are the agents this agent keeps writing to its registry: the
	// accepted children, and those AcceptChildren was given.
	known map[string]record.Agent

	started time.Time
	layer   Layer
	resub   chan struct{}
	mode    atomic.Int64
	// loginReport reports refused logins; nil when they cannot be.
	loginReport *loginReporter

	modeGauge     prometheus.Gauge
	regGauge      prometheus.Gauge
	subscribeTime prometheus.Gauge
}

// New builds an agent from its options: it loads the agent's own
// description (and fails with what is wrong when it is missing or invalid),
// connects nothing yet and registers every handler.
func New(ctx context.Context, opts *agentconfig.Options, conn *Connection, env agentconfig.LookupEnv, log *slog.Logger) (*Agent, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return newAgent(ctx, opts, conn, env, log, reg)
}

// newAgent is New with the registry the agent's metrics go to: a replica
// (replica.go) builds an agent per term of leadership, each with a fresh
// registry, and keeps the process metrics in its own.
func newAgent(ctx context.Context, opts *agentconfig.Options, conn *Connection, env agentconfig.LookupEnv, log *slog.Logger, reg *prometheus.Registry) (*Agent, error) {
	a := &Agent{
		Opts: opts, Conn: conn, Name: opts.NodeName, Domain: conn.XMPPDomain, started: time.Now(),
		Metrics: reg, resub: make(chan struct{}, 1), known: map[string]record.Agent{},
	}
	a.JID = AgentJID(opts.Layer, a.Name, a.Domain)
	if conn.XMPPJID != "" {
		a.JID = conn.XMPPJID
	}
	a.Log = log.With(string(opts.Layer), a.Name)
	a.modeGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "mlsysops_agent_management_mode", Help: "Management mode: 0 heuristic, 1 ML."})
	a.regGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "mlsysops_agent_registered", Help: "1 once the parent acknowledged the agent's subscription."})
	a.subscribeTime = prometheus.NewGauge(prometheus.GaugeOpts{Name: "mlsysops_agent_registered_seconds", Help: "Seconds from process start to the first acknowledged subscription."})
	a.Metrics.MustRegister(a.modeGauge, a.regGauge, a.subscribeTime)

	var err error
	a.layer, err = newLayer(ctx, a, env)
	if err != nil {
		return nil, err
	}
	if conn.Parent != "" {
		a.Parent = conn.Parent
	}

	// A password file is read at every login (a rotated Secret applies
	// without a restart); a missing one makes the agent unready and
	// reported, not dead.
	pw := ""
	if conn.XMPPPasswordFile == "" {
		if pw, err = ReadSecret("", env, "MLSYSOPS_XMPP_PASSWORD", "NODE_PASSWORD"); err != nil {
			return nil, err
		}
		if pw == "" {
			return nil, errors.New("no XMPP password: set --xmpp-password-file (a Secret mount) or $MLSYSOPS_XMPP_PASSWORD")
		}
	}
	a.loginReport, err = newLoginReporter(conn, opts.Layer, a.Name, a.Log)
	if err != nil {
		return nil, err
	}
	controllers := append([]string(nil), conn.Controllers...)
	if cn := conn.ContinuumName; cn != "" && opts.Layer == agentconfig.LayerNode {
		// The continuum agent may ping nodes and set their mode directly.
		controllers = append(controllers, AgentJID(agentconfig.LayerContinuum, cn, a.Domain))
	}
	children := a.layer.Children()
	listed := map[string]bool{}
	for _, c := range children {
		listed[c] = true
	}
	a.Msg, err = messaging.New(messaging.Config{
		JID: a.JID, Password: pw, PasswordFile: conn.XMPPPasswordFile, Layer: messaging.Layer(opts.Layer),
		OnAuthFailure: a.loginReport.report,
		Servers:       conn.XMPPServers, CAFile: conn.XMPPCAFile,
		Parent: a.Parent, Controllers: controllers, Children: children,
		AcceptSubscribe:   func(from string) bool { return listed[from] },
		HeartbeatInterval: conn.HeartbeatInterval,
		Logger:            a.Log, Registerer: a.Metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("messaging: %w", err)
	}

	if err := a.buildEngine(ctx); err != nil {
		return nil, err
	}
	messaging.HandleFunc(a.Msg, a.handlePing)
	messaging.HandleFunc(a.Msg, a.handleMode)
	messaging.HandleFunc(a.Msg, a.handleResubscribe)
	if a.layer.ChildLayer() != "" {
		if a.acceptChildren == nil {
			return nil, fmt.Errorf("the %s layer has children but did not call agent.AcceptChildren", opts.Layer)
		}
		a.acceptChildren()
	}
	if err := a.layer.Setup(a); err != nil {
		return nil, err
	}
	return a, nil
}

// buildEngine makes the mechanisms, the policy watcher and the MAPE engine.
func (a *Agent) buildEngine(ctx context.Context) error {
	mechs, err := a.layer.Mechanisms(a)
	if err != nil {
		return fmt.Errorf("mechanisms: %w", err)
	}
	a.Mechs = mechs
	if a.Sampler == nil {
		a.Sampler = telemetry.NewSampler(telemetry.SamplerOptions{Interval: a.Opts.MonitoringInterval, Logger: a.Log})
	}
	if err := a.Sampler.Register(a.Metrics); err != nil {
		return err
	}
	rt := policy.Runtime{Limits: policy.Limits{
		MaxSteps: a.Opts.PolicyMaxSteps, Timeout: a.Opts.PolicyTimeout,
		MaxMemory: uint64(a.Opts.PolicyMaxMemoryMiB) << 20, MaxDepth: a.Opts.PolicyMaxDepth,
	}, Logger: a.Log}
	builtins, err := policy.Builtins(ctx, string(a.Opts.Layer), rt)
	if err != nil {
		return fmt.Errorf("built-in policies: %w", err)
	}
	watcher := policy.NewWatcher(policy.WatcherOptions{
		Dir: a.Opts.PolicyDirectory, Builtins: builtins, Runtime: rt, PollInterval: a.Opts.PolicyPollInterval, Logger: a.Log,
	})
	a.Engine, err = mape.New(mape.Config{
		Layer: string(a.Opts.Layer), Logger: a.Log, Mechanisms: mechs, Sampler: a.Sampler,
		MonitoringInterval: a.Opts.MonitoringInterval, DefaultMetrics: a.Opts.DefaultTelemetryMetrics,
		Policies: watcher, PlanLogSize: a.Opts.PlanLogSize, PendingTimeout: a.Opts.PendingTimeout,
		Registerer: a.Metrics,
	})
	if err != nil {
		return fmt.Errorf("MAPE engine: %w", err)
	}
	a.Engine.SetSystemDescription(a.layer.SystemDescription())
	return nil
}

// Run runs the agent until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.Log.Info("agent starting", "jid", a.JID, "parent", a.Parent, "policy_directory", a.Opts.PolicyDirectory,
		"mechanisms", a.Mechs.Names(), "listen", a.Conn.Listen)

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
	if a.Conn.Listen != "" {
		srv, err := a.serve()
		if err != nil {
			return err
		}
		start("http", srv)
	}
	start("messaging", a.Msg.Run)
	start("login reports", a.loginReport.run)
	start("mape", a.Engine.Run)
	start("peers", a.watchPeers)
	if a.Parent != "" {
		start("subscribe", a.subscribeLoop)
	}
	if a.keepRegistry != nil {
		start("registry", a.keepRegistry)
	}
	start(string(a.Opts.Layer), a.layer.Run)
	start("description", a.watchDescription)

	<-ctx.Done()
	wg.Wait()
	if err := a.Mechs.Close(); err != nil {
		a.Log.Warn("closing mechanisms", "err", err)
	}
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	a.Log.Info("agent stopped")
	return errors.Join(out...)
}

// subscribeLoop registers with the parent until it acknowledges, then again
// whenever the parent comes back after being away (it may have restarted and
// forgotten its children).
func (a *Agent) subscribeLoop(ctx context.Context) error {
	backoff, wait := 500*time.Millisecond, subscribeTimeout
	for {
		err := a.subscribe(ctx, wait)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			a.Log.Warn("parent did not accept the subscription; retrying", "parent", a.Parent, "err", err, "retry_in", backoff, "timeout", wait)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, messaging.ErrDeliveryTimeout) {
				// A parent this slow to answer (a connection storm of
				// its children) is given longer: a subscription
				// expiring on its way is work lost on both sides.
				wait = min(wait*2, maxSubscribeTimeout)
			}
			continue
		}
		backoff, wait = 500*time.Millisecond, subscribeTimeout
		select {
		case <-ctx.Done():
			return nil
		case <-a.resub:
		}
	}
}

// subscribeTimeout is how long a subscription waits for its answer at
// first; each that times out doubles it, up to maxSubscribeTimeout.
const (
	subscribeTimeout    = 5 * time.Second
	maxSubscribeTimeout = time.Minute
)

func (a *Agent) subscribe(ctx context.Context, timeout time.Duration) error {
	if err := a.Msg.WaitConnected(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m := &messaging.Subscribe{Name: a.Name, Layer: messaging.Layer(a.Opts.Layer), Version: Version}
	m.Cluster = a.Cluster
	resp, _, err := a.Msg.Request(rctx, a.Parent, m)
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
	if !a.Registered.Swap(true) {
		a.subscribeTime.Set(time.Since(a.started).Seconds())
	}
	a.regGauge.Set(1)
	a.Log.Info("registered with parent", "parent", a.Parent, "since_start", time.Since(a.started).Round(time.Millisecond).String())
	a.layer.Registered(ctx)
	return nil
}

// watchPeers follows liveness: children go online and offline in the
// registry; the parent's return triggers a new subscription.
func (a *Agent) watchPeers(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-a.Msg.Events():
			a.Log.Info("peer liveness", "peer", ev.Peer, "role", ev.Role.String(), "online", ev.Online, "reason", ev.Reason)
			switch ev.Role {
			case messaging.RoleParent:
				if ev.Online && a.Registered.Load() {
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
					if ev.Online && !known {
						// A child this agent has no subscription of (it
						// restarted, the child did not see it go): the
						// child must subscribe again to be recorded.
						a.askResubscribe(ctx, ev.Peer)
					}
					if known {
						if err := a.registry.SetLiveness(ctx, ev.Peer, ev.Online, ev.Time); err != nil {
							a.Log.Warn("registry liveness", "peer", ev.Peer, "err", err)
						}
					}
				}
			}
			a.layer.Peer(ctx, ev)
		}
	}
}

func (a *Agent) handlePing(_ context.Context, _ *messaging.Envelope, m *messaging.Ping) (messaging.Message, error) {
	return &messaging.Pong{Note: m.Note}, nil
}

// handleMode switches the management mode and passes it on to the
// children, so one command to the continuum reaches every agent.
func (a *Agent) handleMode(ctx context.Context, env *messaging.Envelope, m *messaging.ManagementMode) (messaging.Message, error) {
	old := a.mode.Swap(int64(m.Mode))
	a.modeGauge.Set(float64(m.Mode))
	a.Log.Info("management mode", "mode", m.Mode, "previous", old, "from", env.From, "reason", m.Reason)
	for _, c := range a.Msg.Children() {
		go func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := a.Msg.Send(sctx, c, &messaging.ManagementMode{Mode: m.Mode, Reason: m.Reason}); err != nil {
				a.Log.Warn("management mode not delivered", "peer", c, "err", err)
			}
		}()
	}
	return nil, nil
}

// askResubscribe asks child to subscribe again, without waiting.
func (a *Agent) askResubscribe(ctx context.Context, child string) {
	a.Log.Info("child heard before its subscription; asking it to subscribe", "peer", child)
	go func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := a.Msg.SendAsync(sctx, child, &messaging.Resubscribe{Reason: "the parent has no subscription of yours"}); err != nil {
			a.Log.Warn("resubscribe request not sent", "peer", child, "err", err)
		}
	}()
}

// handleResubscribe subscribes again when the parent asks: it restarted
// and has no record of this agent.
func (a *Agent) handleResubscribe(_ context.Context, env *messaging.Envelope, m *messaging.Resubscribe) (messaging.Message, error) {
	// Authorized as a command already (the parent or a controller sent
	// it); subscribing again is harmless either way.
	if a.Parent == "" {
		return nil, nil
	}
	a.Log.Info("parent asks for a new subscription", "parent", a.Parent, "reason", m.Reason)
	select {
	case a.resub <- struct{}{}:
	default:
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
			_, _, err := a.Msg.Request(pctx, j, &messaging.Ping{Note: a.Name})
			out[i] = PingResult{JID: j, LatencyMillis: float64(time.Since(start).Microseconds()) / 1000}
			if err != nil {
				out[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

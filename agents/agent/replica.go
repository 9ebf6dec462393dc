package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// Replicas.
//
// With --leader-elect an agent of the continuum or cluster layer is one of
// several replicas of the same agent (a Deployment with two or more pods):
// they compete for a Kubernetes Lease, and only the holder acts. The
// leader builds the whole agent (New) and runs it: it logs in to XMPP as
// the agent's JID, the identity its children and its parent address, and
// runs the controllers, the intake, the mechanisms and the MAPE loop. The
// followers connect to nothing but the Lease's API: they never log in to
// XMPP, so two replicas never hold the agent's JID at once (ejabberd would
// let each new login kick the other out: stream error conflict) and
// messages to the agent reach the one that acts. A follower answers
// /healthz, /readyz (ready: it can take over) and /status (role follower
// and the leader's name) on the agent's address.
//
// The leader stops acting (cancels the agent, which closes its XMPP
// session and stops its controllers) when it fails to renew the Lease
// within the renew deadline, which is shorter than the lease duration: by
// the time a follower may take the Lease, the old leader has stopped. On
// SIGTERM the leader stops its agent first and then releases the Lease, so
// a follower takes over within a retry period. After losing the Lease a
// replica becomes a follower again. A SIGKILLed leader hands over once the
// Lease expires: within the lease duration plus a retry period, plus the
// time the new leader takes to start (see docs/operations.md for figures).

// Campaign competes for an agent's Lease on behalf of a replica. The
// full build's election package provides it (RegisterCampaign); the
// node-only build has none, as node agents run without replicas.
type Campaign interface {
	// Run competes until ctx ends. While this replica holds the Lease it
	// calls lead with a context that ends when the Lease is lost (or ctx
	// ends); the Lease is released once lead has returned. Lead returning
	// early (its agent failed) gives the Lease up too; Run competes again
	// after a retry period.
	Run(ctx context.Context, lead func(ctx context.Context)) error
	// Lease names the Lease, "namespace/name".
	Lease() string
	// Leader is the identity of the replica holding the Lease, as last
	// observed; empty when unknown.
	Leader() string
	// Ready reports whether the Lease's API answers: a follower that
	// cannot reach it could not take over.
	Ready(ctx context.Context) error
}

// NewCampaignFunc builds the campaign of a replica with identity for the
// agent of layer and name; onLeader sees every change of leader.
type NewCampaignFunc func(conn *Connection, layer agentconfig.Layer, name, identity string, log *slog.Logger, onLeader func(identity string)) (Campaign, error)

var newCampaign NewCampaignFunc

// RegisterCampaign provides leader election to --leader-elect; the full
// build's election package calls it from an init function.
func RegisterCampaign(fn NewCampaignFunc) { newCampaign = fn }

// replica is one replica of an elected agent.
type replica struct {
	opts *agentconfig.Options
	conn *Connection
	env  agentconfig.LookupEnv
	log  *slog.Logger
	// metrics hold the process's own metrics and the election's; each
	// term's agent has a registry of its own.
	metrics  *prometheus.Registry
	identity string
	camp     Campaign
	started  time.Time

	mu      sync.Mutex
	leading bool
	since   time.Time // start of the current term
	agent   *Agent    // the current term's agent, once built
	leader  string
	changed time.Time // when the leader last changed

	leaderGauge prometheus.Gauge
	terms       prometheus.Counter
}

// runReplica runs the agent as one replica among several (--leader-elect).
func runReplica(ctx context.Context, opts *agentconfig.Options, conn *Connection, env agentconfig.LookupEnv, log *slog.Logger) error {
	if newCampaign == nil {
		return fmt.Errorf("--leader-elect: this build (%s) has no leader election; node agents run without replicas", LayersBuilt())
	}
	r := &replica{opts: opts, conn: conn, env: env, identity: conn.LeaderElectIdentity, started: time.Now(), metrics: prometheus.NewRegistry()}
	if r.identity == "" {
		r.identity = defaultIdentity()
	}
	r.log = log.With(string(opts.Layer), opts.NodeName, "replica", r.identity)
	r.leaderGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "mlsysops_agent_leader", Help: "1 while this replica holds the agent's Lease and acts, 0 while it follows."})
	r.terms = prometheus.NewCounter(prometheus.CounterOpts{Name: "mlsysops_agent_leader_terms_total", Help: "Times this replica took the agent's Lease."})
	r.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), r.leaderGauge, r.terms)
	var err error
	r.camp, err = newCampaign(conn, opts.Layer, opts.NodeName, r.identity, r.log, r.observeLeader)
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	r.log.Info("replica starting: following until it holds the lease", "lease", r.camp.Lease(), "identity", r.identity)

	var wg sync.WaitGroup
	httpErr := make(chan error, 1)
	if conn.Listen != "" {
		ln, err := net.Listen("tcp", conn.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", conn.Listen, err)
		}
		srv := &http.Server{Handler: r.handler(), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				httpErr <- err
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			wg.Wait()
		}()
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case err := <-httpErr:
			r.log.Error("HTTP server failed", "err", err)
			cancel()
		case <-cctx.Done():
		}
	}()
	err = r.camp.Run(cctx, r.lead)
	r.log.Info("replica stopped")
	return err
}

// lead runs one term: it builds the agent and runs it until ctx ends.
func (r *replica) lead(ctx context.Context) {
	start := time.Now()
	r.mu.Lock()
	r.leading, r.since, r.leader, r.changed = true, start, r.identity, start
	r.mu.Unlock()
	r.leaderGauge.Set(1)
	r.terms.Inc()
	r.log.Info("leading: starting the agent", "lease", r.camp.Lease())
	defer func() {
		r.mu.Lock()
		r.leading, r.agent = false, nil
		r.mu.Unlock()
		r.leaderGauge.Set(0)
		r.log.Info("no longer leading: the agent stopped", "term", time.Since(start).Round(time.Millisecond).String())
	}()
	// The replica serves HTTP itself, for every term.
	conn := *r.conn
	conn.Listen = ""
	a, err := newAgent(ctx, r.opts, &conn, r.env, r.log, prometheus.NewRegistry())
	if err != nil {
		r.log.Error("leading, but the agent cannot start; giving the lease up", "err", err)
		return
	}
	r.mu.Lock()
	r.agent = a
	r.mu.Unlock()
	r.log.Info("leading: agent built", "after", time.Since(start).Round(time.Millisecond).String())
	if err := a.Run(ctx); err != nil && ctx.Err() == nil {
		r.log.Error("agent failed; giving the lease up", "err", err)
	}
}

// observeLeader records a change of leader.
func (r *replica) observeLeader(identity string) {
	r.mu.Lock()
	changed := r.leader != identity
	if changed {
		r.leader, r.changed = identity, time.Now()
	}
	r.mu.Unlock()
	if changed && identity != r.identity {
		r.log.Info("following", "leader", identity)
	}
}

// current returns the running agent while this replica leads.
func (r *replica) current() *Agent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agent
}

// election is the replica's part of /status.
func (r *replica) election() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	role := "follower"
	if r.leading {
		role = "leader"
	}
	out := map[string]any{
		"role": role, "identity": r.identity, "leader": r.leader, "lease": r.camp.Lease(),
		"leader_since": formatTime(r.changed),
	}
	if r.leading {
		out["leading_since"] = formatTime(r.since)
	}
	return out
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// handler serves the replica: the agent's routes while it leads, the
// follower's answers otherwise.
func (r *replica) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, req *http.Request) {
		g := append(prometheus.Gatherers{r.metrics}, sharedGatherers...)
		if a := r.current(); a != nil {
			g = append(g, a.Metrics)
		}
		promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, req)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		if err := r.ready(req.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	token := r.conn.HTTPTokenFile
	mux.Handle("GET /status", protect(token, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, r.status()) }))
	mux.Handle("POST /ping", protect(token, func(w http.ResponseWriter, req *http.Request) {
		a := r.current()
		if a == nil {
			http.Error(w, "this replica follows; the leader is "+r.camp.Leader(), http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), 15*time.Second)
		defer cancel()
		writeJSON(w, a.pingAll(ctx, a.pingTargets(ctx)))
	}))
	if r.conn.Profiling {
		addProfiling(mux, token)
	}
	return mux
}

// ready: a follower can reach the Lease's API; a leader's agent is ready.
func (r *replica) ready(ctx context.Context) error {
	r.mu.Lock()
	leading, a := r.leading, r.agent
	r.mu.Unlock()
	if leading {
		if a == nil {
			return errors.New("leading: the agent is starting")
		}
		return a.ready(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.camp.Ready(ctx); err != nil {
		return fmt.Errorf("following, but the lease's API does not answer: %w", err)
	}
	return nil
}

// status is the agent's /status while leading, with the election's view
// under "election"; a follower's names the agent and the leader.
func (r *replica) status() map[string]any {
	if a := r.current(); a != nil {
		out := a.Status()
		out["election"] = r.election()
		return out
	}
	return map[string]any{
		"name": r.opts.NodeName, "layer": r.opts.Layer, "election": r.election(),
		"uptime_seconds": time.Since(r.started).Seconds(),
	}
}

// defaultIdentity is a replica's name when neither --leader-elect-identity
// nor $POD_NAME gives one: the host name and a random suffix, so that two
// replicas on one host differ.
func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "agent"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

package agent

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/mape"
)

// serve listens on conn.Listen (so a taken port fails the start) and returns
// the function that serves until ctx ends.
func (a *Agent) serve() (func(context.Context) error, error) {
	ln, err := net.Listen("tcp", a.Conn.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", a.Conn.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(append(prometheus.Gatherers{a.Metrics}, sharedGatherers...), promhttp.HandlerOpts{Registry: a.Metrics}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.ready(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	token := a.Conn.HTTPTokenFile
	mux.Handle("GET /status", protect(token, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Status()) }))
	mux.Handle("POST /ping", protect(token, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		defer cancel()
		writeJSON(w, a.pingAll(ctx, a.pingTargets(ctx)))
	}))
	if a.Conn.Profiling {
		addProfiling(mux, token)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, nil
}

// addProfiling serves Go's profiles under /debug/pprof/, with the token
// of tokenFile when there is one.
func addProfiling(mux *http.ServeMux, tokenFile string) {
	mux.Handle("GET /debug/pprof/", protect(tokenFile, pprof.Index))
	mux.Handle("GET /debug/pprof/cmdline", protect(tokenFile, pprof.Cmdline))
	mux.Handle("GET /debug/pprof/profile", protect(tokenFile, pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", protect(tokenFile, pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", protect(tokenFile, pprof.Trace))
}

// protect serves h only to requests with the bearer token held in
// tokenFile (read at every request, so that a new token counts at once;
// these endpoints are not hot); without a file, to everyone. A missing or
// empty file refuses every request rather than opening the endpoint.
func protect(tokenFile string, h http.HandlerFunc) http.Handler {
	if tokenFile == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want, err := os.ReadFile(tokenFile)
		want = bytes.TrimSpace(want)
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if err != nil || len(want) == 0 || !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mlsysops-agent"`)
			http.Error(w, "this endpoint needs the agent's bearer token (--http-token-file)", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

// pingTargets are every registered agent for the continuum (which sees the
// whole registry), the children for the others.
func (a *Agent) pingTargets(ctx context.Context) []string {
	if a.Opts.Layer == agentconfig.LayerContinuum && a.registry != nil {
		if list, err := a.registry.List(ctx); err == nil {
			var out []string
			for _, ag := range list {
				if ag.JID != a.JID {
					out = append(out, ag.JID)
				}
			}
			return out
		}
	}
	return a.Msg.Children()
}

// ready is XMPP connected and the layer's dependencies reachable.
func (a *Agent) ready(ctx context.Context) error {
	if !a.Msg.Connected() {
		if p := a.Msg.AuthStatus().Problem(); p != "" {
			return errors.New(p)
		}
		return errors.New("XMPP not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return a.layer.Ready(ctx)
}

// Status is the agent's state as /status reports it.
func (a *Agent) Status() map[string]any {
	plans := a.Engine.Plans(mape.Query{Limit: 50})
	out := map[string]any{
		"name": a.Name, "layer": a.Opts.Layer, "jid": a.JID, "parent": a.Parent,
		"registered": a.Registered.Load(), "connected": a.Msg.Connected(), "mode": a.mode.Load(),
		"xmpp_login": a.Msg.AuthStatus(),
		"peers":      a.Msg.PeerStates(), "children": a.Msg.Children(),
		"policies": a.Engine.Policies(), "plans": plans, "applications": a.Engine.Applications(),
		"interval_seconds": a.Sampler.Interval().Seconds(), "intervals": durationsSeconds(a.Sampler.Intervals()),
		"mechanisms": a.Mechs.Names(), "uptime_seconds": time.Since(a.started).Seconds(),
	}
	for k, v := range a.layer.Status() {
		out[k] = v
	}
	return out
}

func durationsSeconds(m map[string]time.Duration) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v.Seconds()
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

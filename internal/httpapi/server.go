// Package httpapi is what the MLSysOps HTTP APIs (the northbound API and
// the ML connector) share: a chi router with request ids, access logs,
// per-route Prometheus metrics, timeouts, panic recovery and bearer-token
// authentication with roles; RFC 9457 problem documents listing every
// field problem; strict body reading and JSON decoding; the OpenAPI
// document served at /openapi.json with its self-contained /docs page; and
// a server with graceful shutdown.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/internal/auth"
)

// Paths every API serves.
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
	PathOpenAPI = "/openapi.json"
	PathDocs    = "/docs"
)

// DefaultPublicPaths are served without a token by default.
var DefaultPublicPaths = []string{PathHealthz, PathReadyz, PathMetrics}

// Authenticator checks bearer tokens; *auth.Authenticator implements it.
type Authenticator interface {
	Authenticate(token string) (auth.Identity, bool)
}

var _ Authenticator = (*auth.Authenticator)(nil)

// Config configures a Server.
type Config struct {
	// Name names the API in logs (the component key) and metrics (the
	// subsystem): "northbound", "mlconnector".
	Name string
	// Auth checks bearer tokens; required.
	Auth Authenticator
	// PublicPaths are served without a token; a path ending in / covers
	// everything below it. Default DefaultPublicPaths.
	PublicPaths []string
	// RequestTimeout bounds one request; default 30s. A route may set its
	// own.
	RequestTimeout time.Duration
	// OpenAPI is the OpenAPI document in YAML; it is served as JSON at
	// /openapi.json and rendered at /docs.
	OpenAPI []byte
	// Logger receives access logs and errors; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the request metrics; Gatherer serves /metrics.
	// Default: a private registry with the Go and process collectors.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Version is reported by /healthz.
	Version string
	// Ready is /readyz's check of the dependencies: name to error (nil
	// when fine). Nil means always ready.
	Ready func(ctx context.Context) map[string]error
}

// Route is one route of an API.
type Route struct {
	Method  string
	Pattern string
	// Role is the least role allowed to call it.
	Role auth.Role
	// Timeout replaces Config.RequestTimeout for this route (long
	// uploads, drift runs); zero keeps it.
	Timeout time.Duration
	Handle  func(w http.ResponseWriter, r *http.Request) error
}

// Server is the HTTP handler of an API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	mux     *chi.Mux
	routes  []Route
	openapi []byte
	docs    []byte
}

var _ http.Handler = (*Server)(nil)

// DefaultRequestTimeout bounds a request when Config.RequestTimeout is 0.
const DefaultRequestTimeout = 30 * time.Second

// New builds the server for routes, adding /healthz, /readyz, /metrics,
// /openapi.json and /docs.
func New(cfg Config, routes []Route) (*Server, error) {
	if cfg.Auth == nil {
		return nil, errors.New("httpapi: an authenticator is required")
	}
	if cfg.Name == "" {
		return nil, errors.New("httpapi: the API needs a name")
	}
	if cfg.PublicPaths == nil {
		cfg.PublicPaths = DefaultPublicPaths
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil && cfg.Gatherer == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
		cfg.Registerer, cfg.Gatherer = reg, reg
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", cfg.Name)}
	m, err := newMetrics(cfg.Name, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.openapi, err = OpenAPIJSON(cfg.OpenAPI); err != nil {
		return nil, err
	}
	if s.docs, err = RenderDocs(s.openapi); err != nil {
		return nil, err
	}
	s.routes = append([]Route{
		{Method: http.MethodGet, Pattern: PathHealthz, Role: auth.RoleViewer, Handle: s.healthz},
		{Method: http.MethodGet, Pattern: PathReadyz, Role: auth.RoleViewer, Handle: s.readyz},
		{Method: http.MethodGet, Pattern: PathMetrics, Role: auth.RoleViewer, Handle: s.serveMetrics},
		{Method: http.MethodGet, Pattern: PathOpenAPI, Role: auth.RoleViewer, Handle: s.serveOpenAPI},
		{Method: http.MethodGet, Pattern: PathDocs, Role: auth.RoleViewer, Handle: s.serveDocs},
	}, routes...)
	mux := chi.NewRouter()
	mux.Use(withRequestID, s.observe, s.recoverPanics)
	for _, rt := range s.routes {
		mux.Method(rt.Method, rt.Pattern, s.guard(rt))
	}
	mux.NotFound(s.unrouted(http.StatusNotFound))
	mux.MethodNotAllowed(s.unrouted(http.StatusMethodNotAllowed))
	s.mux = mux
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Router returns the chi router, for walking its routes.
func (s *Server) Router() chi.Routes { return s.mux }

// Routes returns the route table, the built-in routes included.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

// OpenAPI returns the OpenAPI document (JSON).
func (s *Server) OpenAPI() []byte { return s.openapi }

// Docs returns the /docs page.
func (s *Server) Docs() []byte { return s.docs }

// Logger returns the server's logger (with its component key).
func (s *Server) Logger() *slog.Logger { return s.log }

// Public reports whether path is served without a token.
func (s *Server) Public(path string) bool {
	for _, p := range s.cfg.PublicPaths {
		if path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p)) {
			return true
		}
	}
	return false
}

// unrouted answers requests no route matches: 401 without a valid token
// (so unauthenticated callers learn nothing about the routes), else 404 or
// 405.
func (s *Server) unrouted(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.Public(r.URL.Path) {
			if _, err := s.authenticate(r); err != nil {
				s.Fail(w, r, err)
				return
			}
		}
		if status == http.StatusMethodNotAllowed {
			s.Fail(w, r, NewError(status, "about:blank", "%s is not allowed on %s; the OpenAPI document at %s lists the routes", r.Method, r.URL.Path, PathOpenAPI))
			return
		}
		s.Fail(w, r, NewError(status, ProblemNotFound, "no route %s %s; the OpenAPI document at %s lists the routes", r.Method, r.URL.Path, PathOpenAPI))
	}
}

// OpenAPIJSON converts an OpenAPI document from YAML to indented JSON.
func OpenAPIJSON(doc []byte) ([]byte, error) {
	b, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	if m == nil {
		return nil, errors.New("openapi document: empty")
	}
	return json.MarshalIndent(m, "", "  ")
}

func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", MediaJSON)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(s.openapi)
	return nil
}

func (s *Server) serveDocs(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(s.docs)
	return nil
}

// serveMetrics serves the Prometheus metrics.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}).ServeHTTP(w, r)
	return nil
}

// healthz says the process serves.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	WriteJSON(w, http.StatusOK, Health{Status: "ok", Checks: map[string]string{"version": s.cfg.Version}})
	return nil
}

// readyz says whether the API can do its work.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	h := Health{Status: "ok", Checks: map[string]string{}}
	status := http.StatusOK
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		for name, err := range s.cfg.Ready(ctx) {
			if err != nil {
				h.Status, h.Checks[name], status = "unavailable", err.Error(), http.StatusServiceUnavailable
			} else {
				h.Checks[name] = "ok"
			}
		}
	}
	WriteJSON(w, status, h)
	return nil
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/explain"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/oip"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes   = 32 << 20
	DefaultRequestTimeout = 60 * time.Second
)

// Config of a Server.
type Config struct {
	// Name and Version of the model served.
	Name, Version string
	// ServerVersion is reported by GET /v2.
	ServerVersion string
	Logger        *slog.Logger
	// Registerer receives the server's metrics; nil makes a new registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// MaxBodyBytes bounds a request body (413 beyond).
	MaxBodyBytes int64
	// RequestTimeout bounds one request's work.
	RequestTimeout time.Duration
	// ExplainConcurrency is how many explanations run at once; others wait.
	ExplainConcurrency int
}

// Server serves one model.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	state   atomic.Pointer[loaded]
	explain chan struct{}
	router  chi.Router
}

type loaded struct {
	model  model.Model
	meta   model.Metadata
	layout *explain.Layout // nil when the model cannot be explained
	whyNot string          // why layout is nil
	bg     *explain.Background
}

// New returns a server that is live and not ready until SetModel.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ExplainConcurrency <= 0 {
		cfg.ExplainConcurrency = 1
	}
	if cfg.Registerer == nil {
		r := prometheus.NewRegistry()
		cfg.Registerer, cfg.Gatherer = r, r
	}
	s := &Server{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Registerer, cfg.Name),
		explain: make(chan struct{}, cfg.ExplainConcurrency)}
	s.routes()
	return s
}

// SetModel makes the server ready with m. bg is the background of
// explanations (nil: explain answers 422 saying there is none).
func (s *Server) SetModel(m model.Model, bg *explain.Background) {
	l := &loaded{model: m, meta: m.Metadata(), bg: bg}
	var err error
	if l.layout, err = explain.NewLayout(l.meta); err != nil {
		l.whyNot = err.Error()
	} else if bg != nil && len(bg.Names) == len(l.layout.Names) && len(l.meta.Features) == 0 {
		// The training CSV names the features the model file does not.
		l.layout.Names = bg.Names
	}
	s.state.Store(l)
	s.metrics.ready.Set(1)
}

// Unready makes readiness fail (at shutdown) and returns the model, if any.
func (s *Server) Unready() model.Model {
	s.metrics.ready.Set(0)
	if l := s.state.Swap(nil); l != nil {
		return l.model
	}
	return nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

func (s *Server) routes() {
	r := chi.NewRouter()
	r.Get("/v2/health/live", s.live)
	r.Get("/healthz", s.live)
	r.Get("/v2/health/ready", s.ready)
	r.Get("/readyz", s.ready)
	r.Get("/v2", s.serverMetadata)
	r.Handle("/metrics", promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}))
	model := func(r chi.Router) {
		r.Get("/", s.instrument("metadata", s.modelMetadata))
		r.Get("/ready", s.instrument("ready", s.modelReady))
		r.Post("/infer", s.instrument("infer", s.infer))
		r.Post("/explain", s.instrument("explain", s.explainHandler))
	}
	r.Route("/v2/models/{name}", func(r chi.Router) {
		model(r)
		r.Route("/versions/{version}", model)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such path: "+r.URL.Path, nil)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path, nil)
	})
	s.router = r
}

// apiError is an answer other than 200.
type apiError struct {
	status   int
	msg      string
	problems oip.Problems
	cause    error // logged
}

func (e *apiError) Error() string { return e.msg }

func fail(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

func invalid(p oip.Problems) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: p.Error(), problems: p}
}

type handler func(w http.ResponseWriter, r *http.Request, l *loaded) *apiError

// instrument resolves the model, times the request, counts it by code and
// logs failures.
func (s *Server) instrument(endpoint string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		err := s.resolve(r)
		var l *loaded
		if err == nil {
			if l = s.state.Load(); l == nil {
				err = fail(http.StatusServiceUnavailable, "model %q is loading", s.cfg.Name)
			}
		}
		if err == nil {
			err = h(w, r, l)
		}
		code := http.StatusOK
		if err != nil {
			code = err.status
			w.Header().Set("Content-Type", "application/json")
			writeError(w, err.status, err.msg, err.problems)
			level := slog.LevelInfo
			if code >= 500 {
				level = slog.LevelError
			}
			attrs := []any{"endpoint", endpoint, "code", code, "error", err.msg}
			if err.cause != nil {
				attrs = append(attrs, "cause", err.cause)
			}
			if id := r.Header.Get("X-Request-Id"); id != "" {
				attrs = append(attrs, "request_id", id)
			}
			s.log.Log(ctx, level, "request failed", attrs...)
		}
		s.metrics.observe(endpoint, code, time.Since(start))
	}
}

func (s *Server) resolve(r *http.Request) *apiError {
	name := chi.URLParam(r, "name")
	if name != s.cfg.Name {
		return fail(http.StatusNotFound, "model %q is not served here: this server serves %q", name, s.cfg.Name)
	}
	if v := chi.URLParam(r, "version"); v != "" && v != s.cfg.Version {
		return fail(http.StatusNotFound, "model %q has no version %q here: this server serves version %q", name, v, s.cfg.Version)
	}
	return nil
}

func writeError(w http.ResponseWriter, status int, msg string, problems oip.Problems) {
	writeJSON(w, status, struct {
		Error    string       `json:"error"`
		Problems oip.Problems `json:"problems,omitempty"`
	}{msg, problems})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) live(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"live": true})
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	if s.state.Load() == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"ready": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ready": true})
}

func (s *Server) serverMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"name": "mlsysops-modelserver", "version": s.cfg.ServerVersion, "extensions": []string{"explain"},
	})
}

func (s *Server) modelMetadata(w http.ResponseWriter, _ *http.Request, l *loaded) *apiError {
	params := map[string]any{"kind": l.meta.Kind}
	if l.layout != nil {
		params["features"] = l.layout.Names
		params["explain_output"] = l.meta.ExplainOutput
	}
	md := oip.ModelMetadata{
		Name: s.cfg.Name, Platform: l.meta.Platform,
		Inputs: oip.Metadata(l.meta.Inputs), Outputs: oip.Metadata(l.meta.Outputs), Parameters: params,
	}
	if s.cfg.Version != "" {
		md.Versions = []string{s.cfg.Version}
	}
	writeJSON(w, http.StatusOK, md)
	return nil
}

func (s *Server) modelReady(w http.ResponseWriter, _ *http.Request, _ *loaded) *apiError {
	writeJSON(w, http.StatusOK, map[string]any{"name": s.cfg.Name, "ready": true})
	return nil
}

// readBody reads the body within the size limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fail(http.StatusRequestEntityTooLarge, "the body is larger than %d bytes: send smaller batches", s.cfg.MaxBodyBytes)
	case err != nil:
		return nil, fail(http.StatusBadRequest, "read the body: %v", err)
	}
	return body, nil
}

func (s *Server) infer(w http.ResponseWriter, r *http.Request, l *loaded) *apiError {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		return aerr
	}
	req, probs := oip.DecodeRequest(body)
	if probs != nil {
		return invalid(probs)
	}
	if probs := oip.Validate(req, l.meta.Inputs, l.meta.Outputs); probs != nil {
		return invalid(probs)
	}
	outs, err := l.model.Infer(r.Context(), req.Inputs, req.Outputs)
	if err != nil {
		return &apiError{status: http.StatusUnprocessableEntity, msg: "the model cannot evaluate this input: " + err.Error(), cause: err}
	}
	if len(req.Inputs[0].Shape) > 0 {
		s.metrics.rows.Add(float64(req.Inputs[0].Shape[0]))
	}
	buf, err := oip.AppendResponse(make([]byte, 0, 256), &oip.Response{
		ModelName: s.cfg.Name, ModelVersion: s.cfg.Version, ID: req.ID, Outputs: outs,
	})
	if errors.Is(err, oip.ErrNotFinite) {
		return &apiError{status: http.StatusUnprocessableEntity, msg: err.Error() + ": check the input's range"}
	}
	if err != nil {
		return &apiError{status: http.StatusInternalServerError, msg: "encode the response", cause: err}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(buf)))
	_, _ = w.Write(buf)
	return nil
}

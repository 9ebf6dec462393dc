package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlsysops-go/mlsysops/internal/auth"
)

type ctxKey struct{}

// reqInfo is what the middleware learns about a request; the access log
// reads the identity the route's guard found.
type reqInfo struct {
	id       string
	identity *auth.Identity
}

func info(ctx context.Context) *reqInfo {
	ri, _ := ctx.Value(ctxKey{}).(*reqInfo)
	if ri == nil {
		return &reqInfo{}
	}
	return ri
}

// RequestID returns the id of the request ctx belongs to.
func RequestID(ctx context.Context) string { return info(ctx).id }

// Caller returns the identity of the token the request was authenticated
// with; false on public paths.
func Caller(ctx context.Context) (auth.Identity, bool) {
	if id := info(ctx).identity; id != nil {
		return *id, true
	}
	return auth.Identity{}, false
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ValidToken reports whether s is a well-formed request id or
// idempotency key: 1 to 128 letters, digits or . _ : -.
func ValidToken(s string) bool { return requestIDRE.MatchString(s) }

// NewRequestID returns a random id.
func NewRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withRequestID takes a well-formed X-Request-Id from the client or makes
// one, and echoes it.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !requestIDRE.MatchString(id) {
			id = NewRequestID()
		}
		w.Header().Set(HeaderRequestID, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, &reqInfo{id: id})))
	})
}

// recorder remembers the status and size of a response.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += n
	return n, err
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// metrics are the per-route request metrics.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newMetrics(subsystem string, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: subsystem, Name: "requests_total",
			Help: "HTTP requests by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mlsysops", Subsystem: subsystem, Name: "request_duration_seconds",
			Help:    "HTTP request latency by method and route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "mlsysops", Subsystem: subsystem, Name: "requests_in_flight",
			Help: "HTTP requests being served.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.duration, m.inFlight} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register %s metrics: %w", subsystem, err)
			}
		}
	}
	return m, nil
}

// knownMethods keeps the method label bounded.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// observe records metrics and writes the access log line of every request.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		s.metrics.inFlight.Inc()
		defer s.metrics.inFlight.Dec()
		next.ServeHTTP(rec, r)
		elapsed := time.Since(start)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		method := r.Method
		if !knownMethods[method] {
			method = "other"
		}
		s.metrics.requests.WithLabelValues(method, route, strconv.Itoa(rec.status)).Inc()
		s.metrics.duration.WithLabelValues(method, route).Observe(elapsed.Seconds())
		level := slog.LevelInfo
		switch {
		case rec.status == http.StatusInternalServerError:
			level = slog.LevelError
		case rec.status >= 500:
			level = slog.LevelWarn
		case route == PathHealthz || route == PathReadyz || route == PathMetrics:
			level = slog.LevelDebug
		}
		attrs := []any{
			"method", r.Method, "path", r.URL.Path, "route", route, "status", rec.status,
			"bytes", rec.bytes, "duration_ms", float64(elapsed.Microseconds()) / 1000,
			"request_id", RequestID(r.Context()), "remote", r.RemoteAddr,
		}
		if id, ok := Caller(r.Context()); ok {
			attrs = append(attrs, "user", id.Name, "role", string(id.Role))
		}
		s.log.Log(r.Context(), level, "request", attrs...)
	})
}

// recoverPanics turns a panic into a 500 with a log line and the stack,
// rather than a dropped connection.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "request_id", RequestID(r.Context()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				s.Fail(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authenticate returns the caller's identity, or the 401 to answer.
func (s *Server) authenticate(r *http.Request) (auth.Identity, *Error) {
	h := r.Header.Get("Authorization")
	challenge := `Bearer realm="mlsysops"`
	if h == "" {
		e := NewError(http.StatusUnauthorized, ProblemUnauthorized,
			"a bearer token is required: send the header Authorization: Bearer <token> (mls reads it from MLS_TOKEN)")
		e.Header = http.Header{"Www-Authenticate": []string{challenge}}
		return auth.Identity{}, e
	}
	scheme, token, _ := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		e := NewError(http.StatusUnauthorized, ProblemUnauthorized,
			"the Authorization header must be \"Bearer <token>\"")
		e.Header = http.Header{"Www-Authenticate": []string{challenge + `, error="invalid_request"`}}
		return auth.Identity{}, e
	}
	id, ok := s.cfg.Auth.Authenticate(token)
	if !ok {
		e := NewError(http.StatusUnauthorized, ProblemUnauthorized, "the bearer token is not valid")
		e.Header = http.Header{"Www-Authenticate": []string{challenge + `, error="invalid_token"`}}
		return auth.Identity{}, e
	}
	return id, nil
}

// guard wraps a route's handler with authentication (unless the path is
// public) and the role check.
func (s *Server) guard(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.Public(r.URL.Path) {
			id, err := s.authenticate(r)
			if err != nil {
				s.Fail(w, r, err)
				return
			}
			if !id.Role.Allows(rt.Role) {
				e := NewError(http.StatusForbidden, ProblemForbidden,
					"%s %s needs the %s role; the token of %s has the %s role", rt.Method, rt.Pattern, rt.Role, id.Name, id.Role)
				e.Header = http.Header{"Www-Authenticate": []string{`Bearer realm="mlsysops", error="insufficient_scope"`}}
				s.Fail(w, r, e)
				return
			}
			info(r.Context()).identity = &id
		}
		timeout := rt.Timeout
		if timeout <= 0 {
			timeout = s.cfg.RequestTimeout
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		if err := rt.Handle(w, r); err != nil {
			s.Fail(w, r, err)
		}
	}
}

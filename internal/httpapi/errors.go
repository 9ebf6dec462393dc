package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
)

// Error is an error with the HTTP answer it deserves. Handlers return it
// for everything a client can get wrong; anything else a handler returns
// is a failure of a dependency (503) or a bug (500).
type Error struct {
	Status   int
	Type     string
	Detail   string
	Problems []FieldProblem
	// Header is set on the response (WWW-Authenticate, Retry-After, ...).
	Header http.Header
	// Cause is logged, never shown.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Detail, e.Cause)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Detail)
}

func (e *Error) Unwrap() error { return e.Cause }

// NewError returns an error answered with status, the problem type typ and
// a detail formatted from format and args.
func NewError(status int, typ, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Detail: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400.
func BadRequest(format string, args ...any) *Error {
	return NewError(http.StatusBadRequest, ProblemInvalid, format, args...)
}

// NotFound is a 404.
func NotFound(format string, args ...any) *Error {
	return NewError(http.StatusNotFound, ProblemNotFound, format, args...)
}

// Conflict is a 409.
func Conflict(format string, args ...any) *Error {
	return NewError(http.StatusConflict, ProblemConflict, format, args...)
}

// Invalid is a 422 listing every problem.
func Invalid(detail string, problems []FieldProblem) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Type: ProblemInvalid, Detail: detail, Problems: problems}
}

// InvalidQuery is a 400 listing every problem of the query parameters.
func InvalidQuery(problems []FieldProblem) *Error {
	return &Error{Status: http.StatusBadRequest, Type: ProblemInvalid, Detail: "invalid query parameters", Problems: problems}
}

// Unavailable is a 503: a dependency failed; the client may retry.
func Unavailable(what string, cause error) *Error {
	e := NewError(http.StatusServiceUnavailable, ProblemUnavailable, "%s is unavailable; retry later", what)
	e.Cause = cause
	e.Header = http.Header{"Retry-After": []string{"5"}}
	return e
}

// TooLarge is a 413.
func TooLarge(limit int64) *Error {
	return NewError(http.StatusRequestEntityTooLarge, ProblemTooLarge, "the request body is larger than %d bytes", limit)
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are written; this is a bug.
		slog.Error("encode response", "err", err)
		http.Error(w, `{"title":"Internal Server Error","status":500}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", MediaJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// statusClientClosed marks a request the client gave up on; it is logged
// as such and answered (to nobody) with 503.
const statusClientClosed = 499

// Fail answers with the problem document err deserves and logs what the
// client does not see. An *Error is answered as it says; a cancelled
// request is 503, a deadline 504, anything else 500 (a bug).
func (s *Server) Fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
			// The client went away; nobody reads the answer.
			e = &Error{Status: statusClientClosed, Type: ProblemUnavailable, Detail: "client closed the request", Cause: err}
		case errors.Is(err, context.DeadlineExceeded):
			e = &Error{Status: http.StatusGatewayTimeout, Type: ProblemTimeout, Detail: "the request took too long; retry later", Cause: err}
		default:
			e = &Error{Status: http.StatusInternalServerError, Type: ProblemInternal, Detail: "internal error; the server log has the details under this request id", Cause: err}
		}
	}
	rid := RequestID(r.Context())
	if e.Cause != nil {
		// A dependency failing (502-504) is worth a warning; only a bug
		// (500) is an error of this server.
		level := slog.LevelWarn
		if e.Status == http.StatusInternalServerError {
			level = slog.LevelError
		}
		s.log.Log(r.Context(), level, "request failed", "request_id", rid, "status", e.Status, "detail", e.Detail, "err", e.Cause)
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := e.Status
	if status == statusClientClosed {
		status = http.StatusServiceUnavailable
	}
	p := Problem{
		Type: e.Type, Title: http.StatusText(status), Status: status, Detail: e.Detail,
		Instance: r.URL.Path, RequestID: rid, Problems: e.Problems,
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", MediaProblem)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

// Error is an error with the HTTP answer it deserves. Handlers return it
// for everything a client can get wrong; anything else a handler returns
// is a failure of a dependency (503) or a bug (500).
type Error struct {
	Status   int
	Type     string
	Detail   string
	Problems []api.FieldProblem
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

func newError(status int, typ, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Detail: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, api.ProblemInvalid, format, args...)
}

func notFound(format string, args ...any) *Error {
	return newError(http.StatusNotFound, api.ProblemNotFound, format, args...)
}

func conflict(format string, args ...any) *Error {
	return newError(http.StatusConflict, api.ProblemConflict, format, args...)
}

// invalid is a 422 listing every problem.
func invalid(detail string, problems []api.FieldProblem) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Type: api.ProblemInvalid, Detail: detail, Problems: problems}
}

// unavailable is a 503: a dependency (Redis, Karmada, XMPP) failed.
func unavailable(what string, cause error) *Error {
	e := newError(http.StatusServiceUnavailable, api.ProblemUnavailable, "%s is unavailable; retry later", what)
	e.Cause = cause
	e.Header = http.Header{"Retry-After": []string{"5"}}
	return e
}

// backend classifies an error of a dependency: not found and conflicts are
// the client's business; timeouts are 504; anything else makes the
// dependency unavailable.
func backend(what string, err error) error {
	var ce *state.ConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, new(*Error)):
		return err
	case errors.As(err, &ce):
		return conflict("%s", ce.Error())
	case errors.Is(err, state.ErrNotFound), errors.Is(err, infra.ErrNotFound), errors.Is(err, policystore.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Type: api.ProblemNotFound, Detail: "not found", Cause: err}
	case errors.Is(err, infra.ErrAPIMissing):
		return unavailable("the MLSysOps API in Karmada", err)
	case errors.Is(err, context.DeadlineExceeded):
		e := newError(http.StatusGatewayTimeout, api.ProblemTimeout, "%s did not answer in time; retry later", what)
		e.Cause = err
		return e
	}
	return unavailable(what, err)
}

// problemsFrom turns validator errors into field problems.
func problemsFrom(errs field.ErrorList) []api.FieldProblem {
	ps := description.ProblemsFrom("", errs)
	out := make([]api.FieldProblem, len(ps))
	for i, p := range ps {
		out[i] = api.FieldProblem{Field: p.Field, Type: p.Type, Message: p.Message}
	}
	return out
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are written; this is a bug.
		slog.Error("encode response", "err", err)
		http.Error(w, `{"title":"Internal Server Error","status":500}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", api.MediaJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// fail answers with the problem document err deserves and logs what the
// client does not see.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
			// The client went away; nobody reads the answer.
			e = &Error{Status: 499, Type: api.ProblemUnavailable, Detail: "client closed the request", Cause: err}
		case errors.Is(err, context.DeadlineExceeded):
			e = &Error{Status: http.StatusGatewayTimeout, Type: api.ProblemTimeout, Detail: "the request took too long; retry later", Cause: err}
		default:
			e = &Error{Status: http.StatusInternalServerError, Type: api.ProblemInternal, Detail: "internal error; the server log has the details under this request id", Cause: err}
		}
	}
	rid := requestID(r.Context())
	if e.Cause != nil {
		// A dependency failing (502-504) is worth a warning; only a bug
		// (500) is an error of this server.
		level := slog.LevelWarn
		if e.Status == http.StatusInternalServerError {
			level = slog.LevelError
		}
		a.log.Log(r.Context(), level, "request failed", "request_id", rid, "status", e.Status, "detail", e.Detail, "err", e.Cause)
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := e.Status
	if status == 499 {
		status = http.StatusServiceUnavailable
	}
	p := api.Problem{
		Type: e.Type, Title: http.StatusText(status), Status: status, Detail: e.Detail,
		Instance: r.URL.Path, RequestID: rid, Problems: e.Problems,
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", api.MediaProblem)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

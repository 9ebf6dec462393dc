package handlers

import (
	"context"
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

// Error is an error with the HTTP answer it deserves (internal/httpapi).
type Error = httpapi.Error

func newError(status int, typ, format string, args ...any) *Error {
	return httpapi.NewError(status, typ, format, args...)
}

func badRequest(format string, args ...any) *Error { return httpapi.BadRequest(format, args...) }

func notFound(format string, args ...any) *Error { return httpapi.NotFound(format, args...) }

func conflict(format string, args ...any) *Error { return httpapi.Conflict(format, args...) }

// invalid is a 422 listing every problem.
func invalid(detail string, problems []api.FieldProblem) *Error {
	return httpapi.Invalid(detail, problems)
}

// unavailable is a 503: a dependency (Redis, Karmada, XMPP) failed.
func unavailable(what string, cause error) *Error { return httpapi.Unavailable(what, cause) }

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

func writeJSON(w http.ResponseWriter, status int, v any) { httpapi.WriteJSON(w, status, v) }

func requestID(ctx context.Context) string { return httpapi.RequestID(ctx) }

func identity(ctx context.Context) (auth.Identity, bool) { return httpapi.Caller(ctx) }

func newRequestID() string { return httpapi.NewRequestID() }

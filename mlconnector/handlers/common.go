package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// classify turns an error of the registry, the database or the store into
// the answer it deserves: the client's mistakes are 4xx, a dependency
// that is down 503, a timeout 504. Anything else stays (a 500: a bug).
func classify(err error) error {
	var (
		he *httpapi.Error
		iu *registry.InUseError
		fe *registry.FormatError
		ce *registry.ConflictError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &he):
		return err
	case errors.As(err, &iu):
		return &httpapi.Error{Status: http.StatusConflict, Type: httpapi.ProblemConflict, Detail: iu.Error()}
	case errors.As(err, &ce):
		return &httpapi.Error{Status: http.StatusConflict, Type: httpapi.ProblemConflict, Detail: ce.Error()}
	case errors.As(err, &fe):
		return httpapi.Invalid(fe.Error(), []api.Problem{{Field: "format", Type: httpapi.FieldRequired, Message: fe.Error()}})
	case errors.Is(err, registry.ErrNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, Type: httpapi.ProblemNotFound, Detail: notFoundDetail(err)}
	case errors.Is(err, db.ErrUnavailable) || db.IsUnavailable(err):
		return httpapi.Unavailable("the database", err)
	case errors.Is(err, objstore.ErrUnavailable):
		return httpapi.Unavailable("the artifact store", err)
	case errors.Is(err, objstore.ErrNotFound):
		// Registered, but its object is gone from the store: the client
		// (a deployment's init container) says "artifact missing".
		return &httpapi.Error{Status: http.StatusNotFound, Type: httpapi.ProblemNotFound, Detail: err.Error() + ": the file is registered but missing from the artifact store"}
	case errors.Is(err, context.DeadlineExceeded):
		e := httpapi.NewError(http.StatusGatewayTimeout, httpapi.ProblemTimeout, "the request took too long; retry later")
		e.Cause = err
		return e
	}
	return err
}

// notFoundDetail keeps the registry's words ("model X has no version 3")
// without the sentinel's.
func notFoundDetail(err error) string {
	s := strings.TrimSuffix(err.Error(), ": "+registry.ErrNotFound.Error())
	if !strings.Contains(s, "not found") && !strings.Contains(s, " no ") {
		s += ": not found"
	}
	return s
}

// readJSON reads a JSON body strictly into v.
func (a *API) readJSON(r *http.Request, v any) error {
	data, _, err := httpapi.ReadBody(r, httpapi.JSONBody(a.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	return httpapi.DecodeJSON(data, v)
}

// pageQuery reads limit and continue.
type pageQuery struct {
	limit int
	after string
}

func readPage(r *http.Request, problems *[]api.Problem) pageQuery {
	q := r.URL.Query()
	p := pageQuery{limit: api.DefaultLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxLimit {
			*problems = append(*problems, api.Problem{Field: "limit", Type: httpapi.FieldInvalid,
				Message: fmt.Sprintf("Invalid value: %q: must be a whole number from 1 to %d", v, api.MaxLimit)})
		} else {
			p.limit = n
		}
	}
	if v := q.Get("continue"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || !cleanToken(string(b)) {
			*problems = append(*problems, api.Problem{Field: "continue", Type: httpapi.FieldInvalid,
				Message: "Invalid value: not a continue token from a previous page"})
		} else {
			p.after = string(b)
		}
	}
	return p
}

func continueToken(after string) string {
	if after == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(after))
}

func cleanToken(s string) bool {
	return s != "" && len(s) <= 256 && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// caller names the user of a request in records (created_by, owner).
func caller(r *http.Request) string {
	if id, ok := httpapi.Caller(r.Context()); ok {
		return id.Name
	}
	return ""
}

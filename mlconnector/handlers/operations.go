package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

var errNoOperations = httpapi.Unavailable("the operations log", errors.New("not configured"))

// recordOperation is POST /v1/operations and upstream's POST
// /deployment/add/operation: 201 with the operation and its id.
func (a *API) recordOperation(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Operations == nil {
		return errNoOperations
	}
	var op api.OperationCreate
	if err := a.readJSON(r, &op); err != nil {
		return err
	}
	if ps := op.Validate(); len(ps) > 0 {
		return invalidBody("operation", ps)
	}
	out, err := a.cfg.Operations.Record(r.Context(), op)
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusCreated, out)
	return nil
}

// operationsPage reads the paging of an operations list: continue holds
// the last operation id.
func operationsPage(r *http.Request) (after int64, limit int, err error) {
	var problems []api.Problem
	p := readPage(r, &problems)
	if p.after != "" {
		n, perr := strconv.ParseInt(p.after, 10, 64)
		if perr != nil || n < 0 {
			problems = append(problems, api.Problem{Field: "continue", Type: httpapi.FieldInvalid, Message: "Invalid value: not a continue token from a previous page"})
		}
		after = n
	}
	if len(problems) > 0 {
		return 0, 0, httpapi.InvalidQuery(problems)
	}
	return after, p.limit, nil
}

func (a *API) listOps(w http.ResponseWriter, r *http.Request, owner, deployment string, upstream bool) error {
	if a.cfg.Operations == nil {
		return errNoOperations
	}
	after, limit, err := operationsPage(r)
	if err != nil {
		return err
	}
	for _, c := range []struct{ field, v string }{{"owner", owner}, {"deployment", deployment}} {
		if len(c.v) > 128 || !api.CleanString(c.v) {
			return httpapi.InvalidQuery([]api.Problem{{Field: c.field, Type: httpapi.FieldInvalid, Message: "Invalid value: at most 128 printable characters"}})
		}
	}
	list, next, err := a.cfg.Operations.List(r.Context(), owner, deployment, after, limit)
	if err != nil {
		return classify(err)
	}
	if list == nil {
		list = []api.Operation{}
	}
	if upstream {
		httpapi.WriteJSON(w, http.StatusOK, list)
		return nil
	}
	tok := ""
	if next > 0 {
		tok = continueToken(strconv.FormatInt(next, 10))
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Page[api.Operation]{Items: list, Continue: tok})
	return nil
}

// listOperations is GET /v1/operations?owner=&deployment=.
func (a *API) listOperations(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	return a.listOps(w, r, q.Get("owner"), q.Get("deployment"), false)
}

// deploymentOperations is GET /v1/deployments/{id}/operations.
func (a *API) deploymentOperations(w http.ResponseWriter, r *http.Request) error {
	deps, err := a.deployments()
	if err != nil {
		return err
	}
	id := chi.URLParam(r, "deployment_id")
	if _, err := deps.Get(r.Context(), id); err != nil {
		return classify(err)
	}
	return a.listOps(w, r, r.URL.Query().Get("owner"), id, false)
}

// upstreamOwnerOperations is GET /deployment/get/opos/{ownerid}: an
// array (empty rather than upstream's 404), paged by limit and continue.
func (a *API) upstreamOwnerOperations(w http.ResponseWriter, r *http.Request) error {
	return a.listOps(w, r, chi.URLParam(r, "ownerid"), "", true)
}

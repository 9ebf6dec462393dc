package handlers

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

var errNoRuntimes = httpapi.Unavailable("the runtime registry", errors.New("not configured"))

func (a *API) listRuntimes(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Runtimes == nil {
		return errNoRuntimes
	}
	list, err := a.cfg.Runtimes.List(r.Context())
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Page[api.Runtime]{Items: list})
	return nil
}

// putRuntime registers or replaces a runtime: 201 when new, 200 when
// replaced; the built-in runtime cannot be replaced.
func (a *API) putRuntime(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Runtimes == nil {
		return errNoRuntimes
	}
	var rt api.Runtime
	if err := a.readJSON(r, &rt); err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	var problems []api.Problem
	if rt.Name == "" {
		rt.Name = name
	} else if rt.Name != name {
		problems = append(problems, api.Problem{Field: "name", Type: httpapi.FieldInvalid, Message: "Invalid value: must equal the name in the path, " + name})
	}
	if rt.BuiltIn {
		problems = append(problems, api.Problem{Field: "built_in", Type: httpapi.FieldInvalid, Message: "Invalid value: true: only the connector's own runtime is built in"})
	}
	problems = append(problems, rt.Validate()...)
	if len(problems) > 0 {
		return invalidBody("runtime", problems)
	}
	out, created, err := a.cfg.Runtimes.Put(r.Context(), rt, caller(r))
	if err != nil {
		return classify(err)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpapi.WriteJSON(w, status, out)
	return nil
}

func (a *API) deleteRuntime(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Runtimes == nil {
		return errNoRuntimes
	}
	if err := a.cfg.Runtimes.Delete(r.Context(), chi.URLParam(r, "name")); err != nil {
		return classify(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

func (a *API) needPolicies() error {
	if a.cfg.Policies == nil {
		return newError(http.StatusServiceUnavailable, api.ProblemUnavailable,
			"this server keeps no policies; start it with a Kubernetes connection or --policy-dir")
	}
	return nil
}

func layerProblem(layer string) api.FieldProblem {
	return api.FieldProblem{Field: "layer", Type: "FieldValueNotSupported",
		Message: fmt.Sprintf("Unsupported value: %q: supported values: %s", layer, strings.Join(api.Layers, ", "))}
}

func (a *API) listPolicies(w http.ResponseWriter, r *http.Request) error {
	layers := api.Layers
	if l := r.URL.Query().Get("layer"); l != "" {
		if !api.ValidLayer(l) {
			return &Error{Status: http.StatusBadRequest, Type: api.ProblemInvalid, Detail: "invalid query parameters",
				Problems: []api.FieldProblem{layerProblem(l)}}
		}
		layers = []string{l}
	}
	if err := a.needPolicies(); err != nil {
		return err
	}
	out := api.PolicyList{Items: []api.Policy{}}
	for _, l := range layers {
		ps, err := a.cfg.Policies.List(r.Context(), l)
		if err != nil {
			return backend("the policy store", err)
		}
		out.Items = append(out.Items, ps...)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// policyTarget checks the layer and name of a policy path; an unknown
// layer or a name that cannot be a policy is a 404.
func policyTarget(r *http.Request) (string, string, error) {
	layer, name := chi.URLParam(r, "layer"), chi.URLParam(r, "name")
	if !api.ValidLayer(layer) {
		return "", "", notFound("no policy layer %q; the layers are %s", layer, strings.Join(api.Layers, ", "))
	}
	return layer, name, nil
}

func (a *API) getPolicy(w http.ResponseWriter, r *http.Request) error {
	layer, name, err := policyTarget(r)
	if err != nil {
		return err
	}
	if !policystore.ValidName(name) {
		return notFound("no policy %q in layer %s; policies are named policy-<name>.star", name, layer)
	}
	if err := a.needPolicies(); err != nil {
		return err
	}
	p, err := a.cfg.Policies.Get(r.Context(), layer, name)
	if errors.Is(err, policystore.ErrNotFound) {
		return notFound("no policy %q in layer %s; list them with GET %s?layer=%s", name, layer, api.PathPolicies, layer)
	}
	if err != nil {
		return backend("the policy store", err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// putPolicy uploads a policy; agents of the layer reload it.
func (a *API) putPolicy(w http.ResponseWriter, r *http.Request) error {
	layer, name, err := policyTarget(r)
	if err != nil {
		return err
	}
	data, format, err := a.readBody(r, bodyPolicy, policystore.MaxSourceSize+64<<10)
	if err != nil {
		return err
	}
	source := data
	if format == description.FormatJSON {
		var body struct {
			Source *string `json:"source"`
		}
		if err := decodeJSON(data, &body); err != nil {
			return err
		}
		if body.Source == nil {
			return invalid("the body names no source", []api.FieldProblem{{Field: "source", Type: "FieldValueRequired", Message: "Required value: the policy's Starlark source"}})
		}
		source = []byte(*body.Source)
	}
	if ps := policystore.Check(name, source); len(ps) > 0 {
		return invalid(fmt.Sprintf("the policy has %d problem(s)", len(ps)), ps)
	}
	if err := a.needPolicies(); err != nil {
		return err
	}
	created, err := a.cfg.Policies.Put(r.Context(), layer, name, source)
	if err != nil {
		return backend("the policy store", err)
	}
	a.log.Info("policy stored", "layer", layer, "policy", name, "created", created, "bytes", len(source), "request_id", requestID(r.Context()))
	p, err := a.cfg.Policies.Get(r.Context(), layer, name)
	if err != nil {
		return backend("the policy store", err)
	}
	p.Source = ""
	w.Header().Set("Location", api.PathPolicies+"/"+layer+"/"+name)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, p)
	return nil
}

func (a *API) deletePolicy(w http.ResponseWriter, r *http.Request) error {
	layer, name, err := policyTarget(r)
	if err != nil {
		return err
	}
	if !policystore.ValidName(name) {
		return notFound("no policy %q in layer %s; policies are named policy-<name>.star", name, layer)
	}
	if err := a.needPolicies(); err != nil {
		return err
	}
	err = a.cfg.Policies.Delete(r.Context(), layer, name)
	if errors.Is(err, policystore.ErrNotFound) {
		return notFound("no policy %q in layer %s", name, layer)
	}
	if err != nil {
		return backend("the policy store", err)
	}
	a.log.Info("policy deleted", "layer", layer, "policy", name, "request_id", requestID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
)

// decodeModel reads a model description: 400 when the body is not JSON,
// 422 listing every problem otherwise.
func decodeModel(data []byte) (api.ModelSpec, error) {
	var spec api.ModelSpec
	if err := httpapi.DecodeJSON(data, &spec); err != nil {
		return spec, err
	}
	if ps := spec.Validate(); len(ps) > 0 {
		return spec, invalidBody("model", ps)
	}
	return spec, nil
}

// invalidBody is the 422 of a body with problems.
func invalidBody(what string, ps []api.Problem) *httpapi.Error {
	if len(ps) == 1 {
		return httpapi.Invalid(fmt.Sprintf("the %s has 1 problem: %s: %s", what, ps[0].Field, ps[0].Message), ps)
	}
	return httpapi.Invalid(fmt.Sprintf("the %s has %d problems; each is listed with its field path", what, len(ps)), ps)
}

// createModel registers a model: POST /v1/models and upstream's POST
// /model/add (201 with the model).
func (a *API) createModel(w http.ResponseWriter, r *http.Request) error {
	data, _, err := httpapi.ReadBody(r, httpapi.JSONBody(a.cfg.MaxBodyBytes))
	if err != nil {
		return err
	}
	spec, err := decodeModel(data)
	if err != nil {
		return err
	}
	m, err := a.cfg.Registry.CreateModel(r.Context(), spec, caller(r))
	if err != nil {
		return classify(err)
	}
	w.Header().Set("Location", api.ModelPath(m.ModelID))
	httpapi.WriteJSON(w, http.StatusCreated, m)
	return nil
}

func (a *API) getModel(w http.ResponseWriter, r *http.Request) error {
	m, err := a.cfg.Registry.Model(r.Context(), chi.URLParam(r, "model_id"))
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, m)
	return nil
}

// listOptions reads the filters of a model list.
func listOptions(r *http.Request, problems *[]api.Problem) registry.ListOptions {
	q := r.URL.Query()
	o := registry.ListOptions{Kind: q.Get("kind"), Name: q.Get("name")}
	for _, t := range append(q["tag"], q["tags"]...) {
		if t != "" {
			o.Tags = append(o.Tags, t)
		}
	}
	for _, c := range []struct{ field, v string }{{"kind", o.Kind}, {"name", o.Name}} {
		if len(c.v) > 256 || !api.CleanString(c.v) {
			*problems = append(*problems, api.Problem{Field: c.field, Type: httpapi.FieldInvalid, Message: "Invalid value: at most 256 printable characters"})
		}
	}
	if len(o.Tags) > 100 {
		*problems = append(*problems, api.Problem{Field: "tag", Type: httpapi.FieldTooMany, Message: "Too many: at most 100 tags"})
	}
	for _, t := range o.Tags {
		if len(t) > 256 || !api.CleanString(t) {
			*problems = append(*problems, api.Problem{Field: "tag", Type: httpapi.FieldInvalid, Message: "Invalid value: at most 256 printable characters"})
			break
		}
	}
	return o
}

// listModels is GET /v1/models: a page, filtered by kind, tags (any of)
// and name.
func (a *API) listModels(w http.ResponseWriter, r *http.Request) error {
	var problems []api.Problem
	o := listOptions(r, &problems)
	p := readPage(r, &problems)
	if len(problems) > 0 {
		return httpapi.InvalidQuery(problems)
	}
	o.After, o.Limit = p.after, p.limit
	list, next, err := a.cfg.Registry.Models(r.Context(), o)
	if err != nil {
		return classify(err)
	}
	if list == nil {
		list = []api.Model{}
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Page[api.Model]{Items: list, Continue: continueToken(next)})
	return nil
}

// patchModel merges a JSON merge patch (RFC 7386) into the model's
// description: PATCH /v1/models/{id} and upstream's PATCH /model/{id}
// (a stub upstream).
func (a *API) patchModel(w http.ResponseWriter, r *http.Request) error {
	data, _, err := httpapi.ReadBody(r, httpapi.BodyRule{
		Accept: func(m httpapi.MediaType) bool {
			return m.Type == "" || m.IsJSON()
		},
		Accepted: "application/merge-patch+json or application/json", Limit: a.cfg.MaxBodyBytes,
	})
	if err != nil {
		return err
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil || patch == nil {
		return httpapi.BadRequest("the body is not a JSON object (a JSON merge patch of the model)")
	}
	id := chi.URLParam(r, "model_id")
	for attempt := 0; ; attempt++ {
		cur, err := a.cfg.Registry.Model(r.Context(), id)
		if err != nil {
			return classify(err)
		}
		b, _ := json.Marshal(cur.ModelSpec)
		var doc map[string]any
		_ = json.Unmarshal(b, &doc)
		merged, _ := json.Marshal(mergePatch(doc, patch))
		spec, err := decodeModel(merged)
		if err != nil {
			return err
		}
		m, err := a.cfg.Registry.ReplaceSpec(r.Context(), id, spec, cur.UpdatedAt)
		var ce *registry.ConflictError
		if errors.As(err, &ce) && attempt < 3 {
			continue
		}
		if err != nil {
			return classify(err)
		}
		httpapi.WriteJSON(w, http.StatusOK, m)
		return nil
	}
}

// mergePatch applies an RFC 7386 merge patch.
func mergePatch(doc map[string]any, patch map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, v := range patch {
		if v == nil {
			delete(doc, k)
			continue
		}
		if pm, ok := v.(map[string]any); ok {
			dm, _ := doc[k].(map[string]any)
			doc[k] = mergePatch(dm, pm)
			continue
		}
		doc[k] = v
	}
	return doc
}

// deleteModel is DELETE /v1/models/{id} and upstream's DELETE
// /model/{id}: the model, its versions, files and drift results go.
func (a *API) deleteModel(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "model_id")
	if err := a.cfg.Registry.DeleteModel(r.Context(), id); err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Message{Message: "model " + id + " deleted with its files"})
	return nil
}

// upstreamList answers upstream's list routes: a JSON array (empty when
// nothing matches, where upstream answered 404), skip and limit.
func (a *API) upstreamList(w http.ResponseWriter, r *http.Request, o registry.ListOptions) error {
	q := r.URL.Query()
	var problems []api.Problem
	skip, limit := 0, api.DefaultLimit
	for _, p := range []struct {
		name string
		dst  *int
		min  int
	}{{"skip", &skip, 0}, {"limit", &limit, 1}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < p.min || n > 1_000_000 {
				problems = append(problems, api.Problem{Field: p.name, Type: httpapi.FieldInvalid,
					Message: fmt.Sprintf("Invalid value: %q: must be a whole number from %d", v, p.min)})
				continue
			}
			*p.dst = n
		}
	}
	limit = min(limit, api.MaxLimit)
	if len(problems) > 0 {
		return httpapi.InvalidQuery(problems)
	}
	out := []api.Model{}
	o.Limit = api.MaxLimit
	for seen := 0; len(out) < limit; {
		page, next, err := a.cfg.Registry.Models(r.Context(), o)
		if err != nil {
			return classify(err)
		}
		for _, m := range page {
			if seen >= skip && len(out) < limit {
				out = append(out, m)
			}
			seen++
		}
		if next == "" {
			break
		}
		o.After = next
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
	return nil
}

// upstreamAllModels is GET /model/all.
func (a *API) upstreamAllModels(w http.ResponseWriter, r *http.Request) error {
	return a.upstreamList(w, r, registry.ListOptions{})
}

// upstreamModelsOfKind is GET /model/getkind/{modelkind}.
func (a *API) upstreamModelsOfKind(w http.ResponseWriter, r *http.Request) error {
	kind := chi.URLParam(r, "modelkind")
	if len(kind) > 256 || !api.CleanString(kind) {
		return httpapi.InvalidQuery([]api.Problem{{Field: "modelkind", Type: httpapi.FieldInvalid, Message: "Invalid value: at most 256 printable characters"}})
	}
	return a.upstreamList(w, r, registry.ListOptions{Kind: kind})
}

// upstreamSearchModels is GET /model/search?tags=a&tags=b: models with
// any of the tags.
func (a *API) upstreamSearchModels(w http.ResponseWriter, r *http.Request) error {
	var problems []api.Problem
	o := listOptions(r, &problems)
	if len(problems) > 0 {
		return httpapi.InvalidQuery(problems)
	}
	if len(o.Tags) == 0 {
		return httpapi.InvalidQuery([]api.Problem{{Field: "tags", Type: httpapi.FieldRequired, Message: "Required value: name at least one tag (?tags=a&tags=b)"}})
	}
	return a.upstreamList(w, r, registry.ListOptions{Tags: o.Tags})
}

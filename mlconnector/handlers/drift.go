package handlers

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

var errNoDrift = httpapi.Unavailable("drift detection", errors.New("not configured"))

// listDrift is GET /v1/models/{id}/drift: the stored results, newest
// first, paged.
func (a *API) listDrift(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Drift == nil {
		return errNoDrift
	}
	after, limit, err := operationsPage(r)
	if err != nil {
		return err
	}
	id := chi.URLParam(r, "model_id")
	if _, err := a.cfg.Registry.Model(r.Context(), id); err != nil {
		return classify(err)
	}
	list, next, err := a.cfg.Drift.Results(r.Context(), id, after, limit)
	if err != nil {
		return classify(err)
	}
	if list == nil {
		list = []api.DriftResult{}
	}
	tok := ""
	if next > 0 {
		tok = continueToken(strconv.FormatInt(next, 10))
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Page[api.DriftResult]{Items: list, Continue: tok})
	return nil
}

// runDrift is POST /v1/models/{id}/drift: a check now, stored and
// returned.
func (a *API) runDrift(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Drift == nil {
		return errNoDrift
	}
	run, err := a.cfg.Drift.Run(r.Context(), chi.URLParam(r, "model_id"), "manual")
	if err != nil {
		return classify(err)
	}
	httpapi.WriteJSON(w, http.StatusOK, run)
	return nil
}

// driftChart is GET /v1/models/{id}/drift/chart.png: each feature's
// statistic over time.
func (a *API) driftChart(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Drift == nil {
		return errNoDrift
	}
	png, err := a.cfg.Drift.Chart(r.Context(), chi.URLParam(r, "model_id"))
	if err != nil {
		return classify(err)
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(png)
	return nil
}

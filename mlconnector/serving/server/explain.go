package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/explain"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/oip"
)

// MaxPermutations bounds what an explain request may ask for.
const MaxPermutations = 20_000

type explainRequest struct {
	ID             string          `json:"id"`
	Inputs         json.RawMessage `json:"inputs"`
	Output         string          `json:"output"`
	Method         string          `json:"method"`
	Permutations   int             `json:"permutations"`
	Seed           uint64          `json:"seed"`
	BackgroundSize int             `json:"background_size"`
}

type explainResponse struct {
	ModelName      string      `json:"model_name"`
	ModelVersion   string      `json:"model_version,omitempty"`
	ID             string      `json:"id,omitempty"`
	Output         string      `json:"output"`
	Method         string      `json:"method"`
	Features       []string    `json:"features"`
	BaseValue      []float64   `json:"base_value"`
	Prediction     []float64   `json:"prediction"`
	ShapleyValues  [][]float64 `json:"shapley_values"`
	StandardErrors [][]float64 `json:"standard_errors,omitempty"`
	Permutations   int         `json:"permutations"`
	Evaluations    int         `json:"evaluations"`
	BackgroundRows int         `json:"background_rows"`
}

func (s *Server) explainHandler(w http.ResponseWriter, r *http.Request, l *loaded) *apiError {
	if l.layout == nil {
		return fail(http.StatusUnprocessableEntity, "this model cannot be explained: %s", l.whyNot)
	}
	if l.bg == nil {
		return fail(http.StatusUnprocessableEntity, "no background data: start the server with --background (the model's training CSV)")
	}
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		return aerr
	}
	var req explainRequest
	if probs := oip.DecodeStrict(body, &req); probs != nil {
		return invalid(probs)
	}
	var probs oip.Problems
	output := req.Output
	if output == "" {
		output = l.meta.ExplainOutput
	}
	if output == "" {
		probs = append(probs, oip.Problem{Field: "output", Message: "required for this model: name the output to explain"})
	}
	switch req.Method {
	case "", explain.Auto, explain.Exact, explain.Sampling:
	default:
		probs = append(probs, oip.Problem{Field: "method", Message: fmt.Sprintf("%q: want auto, exact or sampling", req.Method)})
	}
	if req.Permutations < 0 || req.Permutations > MaxPermutations {
		probs = append(probs, oip.Problem{Field: "permutations", Message: fmt.Sprintf("%d: want 0 (automatic) to %d", req.Permutations, MaxPermutations)})
	}
	if req.BackgroundSize < 0 || req.BackgroundSize > len(l.bg.Rows) {
		probs = append(probs, oip.Problem{Field: "background_size", Message: fmt.Sprintf("%d: want 0 (all) to %d, the rows loaded", req.BackgroundSize, len(l.bg.Rows))})
	}
	if req.Method == explain.Exact && len(l.layout.Columns) > explain.MaxFeatures {
		probs = append(probs, oip.Problem{Field: "method", Message: fmt.Sprintf("exact takes at most %d features; this model has %d: use sampling", explain.MaxFeatures, len(l.layout.Columns))})
	}
	if len(req.Inputs) == 0 {
		probs = append(probs, oip.Problem{Field: "inputs", Message: "required: the row to explain, as infer's inputs"})
	}
	if len(probs) > 0 {
		return invalid(probs)
	}
	wrapped, _ := json.Marshal(map[string]json.RawMessage{"inputs": req.Inputs})
	in, probs := oip.DecodeRequest(wrapped)
	if probs == nil {
		probs = oip.Validate(in, l.meta.Inputs, nil)
	}
	if probs != nil {
		return invalid(probs)
	}
	x, err := l.layout.Features(in.Inputs)
	if err != nil {
		return invalid(oip.Problems{{Field: "inputs", Message: err.Error()}})
	}
	f, width, err := l.layout.Function(l.model, output)
	if err != nil {
		return invalid(oip.Problems{{Field: "output", Message: err.Error()}})
	}
	bg := l.bg.Rows
	if req.BackgroundSize > 0 {
		bg = bg[:req.BackgroundSize]
	}
	select {
	case s.explain <- struct{}{}:
		defer func() { <-s.explain }()
	case <-r.Context().Done():
		return fail(http.StatusServiceUnavailable, "too many explanations at once: try again")
	}
	res, err := explain.Shapley(r.Context(), f, width, x, bg, explain.Options{
		Method: req.Method, Permutations: req.Permutations, Seed: req.Seed})
	if err != nil {
		if errors.Is(err, r.Context().Err()) {
			return fail(http.StatusServiceUnavailable, "the explanation took longer than %s: ask for fewer permutations or a smaller background_size", s.cfg.RequestTimeout)
		}
		return &apiError{status: http.StatusUnprocessableEntity, msg: "the model cannot evaluate this input: " + err.Error(), cause: err}
	}
	s.metrics.evaluations.Add(float64(res.Evaluations))
	if !finite(res) {
		return fail(http.StatusUnprocessableEntity, "%s: check the input's range", oip.ErrNotFinite)
	}
	writeJSON(w, http.StatusOK, explainResponse{
		ModelName: s.cfg.Name, ModelVersion: s.cfg.Version, ID: req.ID, Output: output, Method: res.Method,
		Features: l.layout.Names, BaseValue: res.BaseValue, Prediction: res.Prediction,
		ShapleyValues: res.Values, StandardErrors: res.StdErr, Permutations: res.Permutations,
		Evaluations: res.Evaluations, BackgroundRows: len(bg),
	})
	return nil
}

func finite(r *explain.Result) bool {
	all := append([][]float64{r.BaseValue, r.Prediction}, r.Values...)
	for _, row := range append(all, r.StdErr...) {
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

//go:build cgo

package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/onnx"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

func onnxRegistry(t testing.TB) *model.Registry {
	r := model.NewRegistry()
	onnx.Register(r, servingtest.ONNXRuntime(t))
	return r
}

func TestONNXModelsOverHTTP(t *testing.T) {
	t.Run("iris_mlp", func(t *testing.T) {
		ts, _ := serve(t, onnxRegistry(t), "iris_mlp.onnx", "iris_mlp", Config{})
		checkReference(t, ts.URL, "iris_mlp", []tensor.Spec{{Name: "input", DataType: tensor.FP32}})
	})
	t.Run("diabetes_linear", func(t *testing.T) {
		ts, _ := serve(t, onnxRegistry(t), "diabetes_linear.onnx", "diabetes_linear", Config{})
		checkReference(t, ts.URL, "diabetes_linear", []tensor.Spec{
			{Name: "clinical", DataType: tensor.FP64}, {Name: "serum", DataType: tensor.FP64}})
		// Batch sizes that differ between the two inputs: a 400, not the
		// runtime's error.
		code, b := post(t, ts.URL+"/v2/models/diabetes_linear/infer", `{"inputs":[
			{"name":"clinical","shape":[1,4],"datatype":"FP64","data":[0,0,0,0]},
			{"name":"serum","shape":[2,6],"datatype":"FP64","data":[0,0,0,0,0,0,0,0,0,0,0,0]}]}`)
		if code != http.StatusBadRequest {
			t.Errorf("batch mismatch: %d %s", code, b)
		}
	})
}

// TestExplainLinearONNXModel: the Shapley values of a linear model with
// two inputs are coef_i (x_i - mean of the background's column i), the
// features being the two inputs' columns in order.
func TestExplainLinearONNXModel(t *testing.T) {
	ts, s := serve(t, onnxRegistry(t), "diabetes_linear.onnx", "diabetes_linear", Config{})
	ref := servingtest.LoadReference(t, "diabetes_linear")
	a, b := ref.Inputs["clinical"][0], ref.Inputs["serum"][0]
	body := fmt.Sprintf(`{"inputs":[{"name":"clinical","shape":[1,4],"datatype":"FP64","data":%s},
		{"name":"serum","shape":[1,6],"datatype":"FP64","data":%s}],"background_size":20}`, mustJSON(a), mustJSON(b))
	code, out := post(t, ts.URL+"/v2/models/diabetes_linear/explain", body)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, out)
	}
	var r struct {
		Method        string      `json:"method"`
		Features      []string    `json:"features"`
		ShapleyValues [][]float64 `json:"shapley_values"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Method != "exact" || fmt.Sprint(r.Features) != fmt.Sprint(ref.Features) {
		t.Errorf("method %s, features %v", r.Method, r.Features)
	}
	bg := s.state.Load().bg.Rows[:20]
	x := append(append([]float64(nil), a...), b...)
	for i := range x {
		mean := 0.0
		for _, row := range bg {
			mean += row[i] / float64(len(bg))
		}
		if want := ref.Coef[i] * (x[i] - mean); math.Abs(r.ShapleyValues[i][0]-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("feature %s: %v, want %v", r.Features[i], r.ShapleyValues[i][0], want)
		}
	}
}

// TestONNXEdgeInputs: an empty batch answers empty outputs; inputs that
// overflow the model's arithmetic are a 422 (for infer and explain), never
// a 5xx.
func TestONNXEdgeInputs(t *testing.T) {
	ts, _ := serve(t, onnxRegistry(t), "iris_mlp.onnx", "iris_mlp", Config{})
	huge := `{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[3e38,-3e38,3e38,3e38]}]}`
	for _, tc := range []struct {
		path, body string
		code       int
	}{
		{"infer", `{"inputs":[{"name":"input","shape":[0,4],"datatype":"FP32","data":[]}]}`, 200},
		{"infer", huge, 422},
		{"explain", huge, 422},
	} {
		if code, b := post(t, ts.URL+"/v2/models/iris_mlp/"+tc.path, tc.body); code != tc.code {
			t.Errorf("%s %s: %d %s, want %d", tc.path, tc.body, code, b, tc.code)
		}
	}
}

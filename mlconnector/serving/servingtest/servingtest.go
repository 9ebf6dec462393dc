// Package servingtest finds the model server's test fixtures (written by
// mlconnector/serving/testdata/gen.py) and ONNX Runtime for tests and
// benchmarks.
package servingtest

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Dir is the fixtures folder.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Path is the path of a fixture file.
func Path(name string) string { return filepath.Join(Dir(), name) }

// ONNXRuntime is the path of libonnxruntime.so.1: $MLSYSOPS_ONNXRUNTIME_LIB,
// or bin/ of the checkout, where `make deps` puts it. A missing library
// fails the test: it is a dependency, not an option.
func ONNXRuntime(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("MLSYSOPS_ONNXRUNTIME_LIB"); p != "" {
		return p
	}
	p := filepath.Join(Dir(), "..", "..", "..", "bin", "libonnxruntime.so.1")
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("ONNX Runtime not found at %s: run `make deps`", p)
	}
	return p
}

// Reference is a fixture's NAME.reference.json: inputs by input name (rows
// of features) and the expected outputs by output name.
type Reference struct {
	// TrainingData is the file name of the model's training CSV.
	TrainingData string                     `json:"training_data"`
	Features     []string                   `json:"features"`
	Inputs       map[string][][]float64     `json:"inputs"`
	Outputs      map[string]json.RawMessage `json:"outputs"`
	Coef         []float64                  `json:"coef"`
}

// LoadReference reads NAME.reference.json.
func LoadReference(tb testing.TB, name string) Reference {
	tb.Helper()
	var r Reference
	readJSON(tb, name+".reference.json", &r)
	return r
}

// Shapley is a fixture's NAME.shap.json: Shapley values computed by brute
// force in Python against the first BackgroundRows rows of the training
// CSV.
type Shapley struct {
	BackgroundRows int         `json:"background_rows"`
	X              []float64   `json:"x"`
	BaseValue      []float64   `json:"base_value"`
	Prediction     []float64   `json:"prediction"`
	Values         [][]float64 `json:"shapley_values"`
}

// LoadShapley reads NAME.shap.json.
func LoadShapley(tb testing.TB, name string) Shapley {
	tb.Helper()
	var s Shapley
	readJSON(tb, name+".shap.json", &s)
	return s
}

func readJSON(tb testing.TB, file string, v any) {
	tb.Helper()
	b, err := os.ReadFile(Path(file))
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
}

// TrainingCSV is the path of model NAME's training CSV (the reference's
// training_data).
func TrainingCSV(tb testing.TB, name string) string {
	tb.Helper()
	r := LoadReference(tb, name)
	if r.TrainingData == "" {
		tb.Fatalf("%s.reference.json names no training_data", name)
	}
	return Path(r.TrainingData)
}

// TrainingRows reads model NAME's training CSV: its header and its rows,
// the target column included.
func TrainingRows(tb testing.TB, name string) ([]string, [][]float64) {
	tb.Helper()
	f, err := os.Open(TrainingCSV(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatal(err)
	}
	rows := make([][]float64, len(recs)-1)
	for i, rec := range recs[1:] {
		rows[i] = make([]float64, len(rec))
		for j, s := range rec {
			if rows[i][j], err = strconv.ParseFloat(s, 64); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return recs[0], rows
}

// Close reports whether a and b agree within tol, absolutely or relative to
// b's magnitude when it is above 1.
func Close(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b))
}

// Tensors builds the reference's inputs as tensors of the datatypes specs
// name.
func (r Reference) Tensors(specs []tensor.Spec) []*tensor.Tensor {
	var out []*tensor.Tensor
	for _, s := range specs {
		rows := r.Inputs[s.Name]
		t := tensor.New(s.Name, s.DataType, []int64{int64(len(rows)), int64(len(rows[0]))})
		for i, row := range rows {
			for j, v := range row {
				t.SetFloat64(i*len(row)+j, v)
			}
		}
		out = append(out, t)
	}
	return out
}

// Expected is the reference output name, flattened row-major.
func (r Reference) Expected(tb testing.TB, name string) []float64 {
	tb.Helper()
	raw, ok := r.Outputs[name]
	if !ok {
		tb.Fatalf("the reference has no output %q", name)
	}
	var flat []float64
	if err := json.Unmarshal(raw, &flat); err == nil {
		return flat
	}
	flat = nil
	var rows [][]float64
	if err := json.Unmarshal(raw, &rows); err != nil {
		tb.Fatalf("output %q: %v", name, err)
	}
	for _, row := range rows {
		flat = append(flat, row...)
	}
	return flat
}

// Check infers the reference's inputs with m and compares every output the
// reference has with tolerance tol.
func Check(tb testing.TB, m model.Model, r Reference, tol float64) {
	tb.Helper()
	outs, err := m.Infer(context.Background(), r.Tensors(m.Metadata().Inputs), nil)
	if err != nil {
		tb.Fatal(err)
	}
	got := map[string]*tensor.Tensor{}
	for _, o := range outs {
		got[o.Name] = o
	}
	for name := range r.Outputs {
		want := r.Expected(tb, name)
		o, ok := got[name]
		if !ok {
			tb.Fatalf("no output %q", name)
		}
		if o.Len() != len(want) {
			tb.Fatalf("output %q: %d elements, want %d", name, o.Len(), len(want))
		}
		for i, w := range want {
			if g := o.Float64(i); !Close(g, w, tol) {
				tb.Errorf("output %q[%d] = %v, want %v (tolerance %g)", name, i, g, w, tol)
			}
		}
	}
}

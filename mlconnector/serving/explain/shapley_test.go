package explain

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/trees"
)

// linear is an additive model: its Shapley values are w_i (x_i - mean_i)
// whatever the method, since every ordering gives the same contributions.
func linear(w []float64, bias float64) Function {
	return func(_ context.Context, rows [][]float64) ([]float64, error) {
		out := make([]float64, len(rows))
		for i, r := range rows {
			out[i] = bias
			for j, v := range r {
				out[i] += w[j] * v
			}
		}
		return out, nil
	}
}

func TestLinearModelClosedForm(t *testing.T) {
	w := []float64{1.5, -2, 0.25, 4, 0, 3, -1, 2, 0.5, -0.75, 1, 2}
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	bg := [][]float64{
		{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
		{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
		{-1, 5, 3, 0, 1, 1, 9, 2, 0, 4, 4, 1},
	}
	for _, method := range []string{Exact, Sampling} {
		t.Run(method, func(t *testing.T) {
			r, err := Shapley(context.Background(), linear(w, 0.5), 1, x, bg, Options{Method: method, Permutations: 6, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			for i := range x {
				mean := (bg[0][i] + bg[1][i] + bg[2][i]) / 3
				if want := w[i] * (x[i] - mean); math.Abs(r.Values[i][0]-want) > 1e-9 {
					t.Errorf("feature %d: %v, want %v", i, r.Values[i][0], want)
				}
			}
		})
	}
}

// background is the first n training rows, features only.
func background(t testing.TB, name string, n int) [][]float64 {
	_, rows := servingtest.TrainingRows(t, name)
	bg := make([][]float64, n)
	for i := range bg {
		bg[i] = rows[i][:len(rows[i])-1]
	}
	return bg
}

func treeFunction(t testing.TB, name string) (Function, int) {
	format, file := trees.LightGBM, name+".txt"
	if strings.HasSuffix(name, "_xgb") {
		format, file = trees.XGBoostJSON, name+".json"
	}
	m, err := trees.Load(format, servingtest.Path(file), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLayout(m.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	f, width, err := l.Function(m, m.Metadata().ExplainOutput)
	if err != nil {
		t.Fatal(err)
	}
	return f, width
}

func TestExactMatchesBruteForceInPython(t *testing.T) {
	ref := servingtest.LoadShapley(t, "diabetes_gbm")
	f, width := treeFunction(t, "diabetes_gbm")
	r, err := Shapley(context.Background(), f, width, ref.X, background(t, "diabetes_gbm", ref.BackgroundRows), Options{Method: Auto})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != Exact {
		t.Errorf("method %s for 10 features, want exact", r.Method)
	}
	near := cmp.Comparer(func(a, b float64) bool { return servingtest.Close(a, b, 1e-9) })
	if diff := cmp.Diff(ref.Values, r.Values, near); diff != "" {
		t.Errorf("values (-python +go):\n%s", diff)
	}
	if diff := cmp.Diff(ref.BaseValue, r.BaseValue, near); diff != "" {
		t.Errorf("base value (-python +go):\n%s", diff)
	}
	if want := (1 << 10) * ref.BackgroundRows; r.Evaluations != want {
		t.Errorf("%d evaluations, want %d", r.Evaluations, want)
	}
}

// TestValuesSumToPredictionMinusBase checks efficiency: for every output,
// the values add up to the prediction minus the base value, for the exact
// method and for sampling (each permutation telescopes).
func TestValuesSumToPredictionMinusBase(t *testing.T) {
	for _, name := range []string{"iris_gbm", "cancer_gbm", "diabetes_gbm", "iris_xgb", "cancer_xgb", "diabetes_xgb"} {
		for _, method := range []string{Exact, Sampling} {
			if method == Exact && strings.HasPrefix(name, "cancer_") {
				continue // 30 features: sampling only
			}
			t.Run(name+"/"+method, func(t *testing.T) {
				f, width := treeFunction(t, name)
				ref := servingtest.LoadReference(t, name)
				x := ref.Inputs["input"][0]
				r, err := Shapley(context.Background(), f, width, x, background(t, name, 20), Options{Method: method, Permutations: 20, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				for k := range width {
					sum := 0.0
					for i := range x {
						sum += r.Values[i][k]
					}
					if d := r.Prediction[k] - r.BaseValue[k]; math.Abs(sum-d) > 1e-12*math.Max(1, math.Abs(d)) {
						t.Errorf("output %d: values sum to %v, prediction - base = %v", k, sum, d)
					}
				}
			})
		}
	}
}

// TestSamplingConverges compares sampling with the exact values: within
// four standard errors, and closer with 16 times the permutations.
func TestSamplingConverges(t *testing.T) {
	ref := servingtest.LoadShapley(t, "diabetes_gbm")
	f, width := treeFunction(t, "diabetes_gbm")
	bg := background(t, "diabetes_gbm", ref.BackgroundRows)
	errAt := func(perms int) float64 {
		r, err := Shapley(context.Background(), f, width, ref.X, bg, Options{Method: Sampling, Permutations: perms, Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for i := range ref.X {
			d := math.Abs(r.Values[i][0] - ref.Values[i][0])
			if d > 4*r.StdErr[i][0]+1e-9 {
				t.Errorf("%d permutations: feature %d off by %v, standard error %v", perms, i, d, r.StdErr[i][0])
			}
			total += d * d
		}
		return math.Sqrt(total)
	}
	small, large := errAt(40), errAt(640)
	if !(large < small/2) {
		t.Errorf("error %v with 40 permutations, %v with 640: want at least halved", small, large)
	}
	t.Logf("RMS error: %v with 40 permutations, %v with 640", small, large)
}

func TestSamplingIsSeeded(t *testing.T) {
	f, width := treeFunction(t, "cancer_gbm")
	ref := servingtest.LoadReference(t, "cancer_gbm")
	bg := background(t, "cancer_gbm", 10)
	run := func(seed uint64) [][]float64 {
		r, err := Shapley(context.Background(), f, width, ref.Inputs["input"][1], bg, Options{Permutations: 8, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if r.Method != Sampling || r.Permutations != 8 {
			t.Fatalf("method %s with %d permutations", r.Method, r.Permutations)
		}
		return r.Values
	}
	if diff := cmp.Diff(run(7), run(7)); diff != "" {
		t.Errorf("same seed, different values:\n%s", diff)
	}
	if cmp.Equal(run(7), run(8)) {
		t.Error("different seeds, same values")
	}
}

func TestBadArguments(t *testing.T) {
	f := linear([]float64{1, 2}, 0)
	cases := map[string]struct {
		x    []float64
		bg   [][]float64
		opts Options
	}{
		"no features":       {nil, [][]float64{{1}}, Options{}},
		"no background":     {[]float64{1, 2}, nil, Options{}},
		"ragged background": {[]float64{1, 2}, [][]float64{{1}}, Options{}},
		"unknown method":    {[]float64{1, 2}, [][]float64{{1, 2}}, Options{Method: "magic"}},
		"exact, too many":   {make([]float64, 17), [][]float64{make([]float64, 17)}, Options{Method: Exact}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Shapley(context.Background(), f, 1, tc.x, tc.bg, tc.opts); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

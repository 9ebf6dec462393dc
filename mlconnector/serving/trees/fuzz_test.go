package trees

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// hangAfter is how long FuzzLoad lets one model load and predict.
const hangAfter = 20 * time.Second

// FuzzLoad feeds arbitrary model files, in the upstream formats whoever
// registers a model uploads (XGBoost JSON, LightGBM text), to the loader
// and then to inference: a damaged or hostile file must be refused or
// serve, never crash the model server, at load or at prediction (rows of
// zeros, NaN and huge values).
//
//	go test ./mlconnector/serving/trees -run '^$' -fuzz FuzzLoad -fuzztime 60s -fuzzminimizetime 3s
//
// (the inputs are models of tens of kilobytes: minimizing one with the
// default minute shows no progress for that minute).
func FuzzLoad(f *testing.F) {
	for _, s := range []struct {
		lightgbm bool
		file     string
	}{{false, "iris_xgb.json"}, {false, "diabetes_xgb.json"}, {true, "iris_gbm.txt"}, {true, "diabetes_gbm.txt"}} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", s.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.lightgbm, b)
	}
	f.Add(false, []byte(`{"learner":{"gradient_booster":{"name":"gbtree","model":{"trees":[{}],"tree_info":[0]}},"learner_model_param":{"num_feature":"1","base_score":"5E-1"},"objective":{"name":"reg:squarederror"}}}`))
	f.Fuzz(func(t *testing.T, lightgbm bool, data []byte) {
		format := XGBoostJSON
		if lightgbm {
			format = LightGBM
		}
		fuzzModel(t, format, data)
	})
}

// FuzzLoadXGBoostBinary does for XGBoost's binary format (before 1.0) what
// FuzzLoad does for the others, from the fixtures written in it.
//
//	go test ./mlconnector/serving/trees -run '^$' -fuzz FuzzLoadXGBoostBinary -fuzztime 60s -fuzzminimizetime 3s
func FuzzLoadXGBoostBinary(f *testing.F) {
	for _, file := range []string{"iris_xgb.json", "cancer_xgb.json", "diabetes_xgb.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(xgbBinary(f, b, nil))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzModel(t, XGBoost, data) })
}

// FuzzLoadLightGBMJSON does for LightGBM's JSON dump what FuzzLoad does
// for its text format, from the fixtures written as JSON.
//
//	go test ./mlconnector/serving/trees -run '^$' -fuzz FuzzLoadLightGBMJSON -fuzztime 60s -fuzzminimizetime 3s
func FuzzLoadLightGBMJSON(f *testing.F) {
	for _, file := range []string{"iris_gbm.txt", "diabetes_gbm.txt"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(lgbJSONFromText(f, string(b)))
	}
	f.Add([]byte(lgbJSONModel("", "")))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzModel(t, LightGBMJSON, data) })
}

// fuzzModel loads a model file of a format and predicts rows of zeros,
// NaN and huge values with it: it may be refused, or serve, but not crash
// or hang.
func fuzzModel(t *testing.T, format string, data []byte) {
	// A hang is a failure the fuzzer can keep: past hangAfter the
	// process dies with every goroutine's stack, and the fuzzer
	// records the input.
	watchdog := time.AfterFunc(hangAfter, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("loading and using a %d-byte model took more than %s", len(data), hangAfter))
	})
	defer watchdog.Stop()
	path := filepath.Join(t.TempDir(), "model")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Load(format, path, model.Options{Threads: 1})
	if err != nil {
		return
	}
	in := m.Metadata().Inputs
	if len(in) != 1 || len(in[0].Shape) != 2 || in[0].Shape[1] <= 0 {
		t.Fatalf("loaded model with inputs %+v", in)
	}
	cols := int(in[0].Shape[1])
	if cols > 1<<16 {
		return // a valid model this wide: rows of it are not this test's point
	}
	vals := make([]float64, 3*cols)
	for i := range cols {
		vals[cols+i], vals[2*cols+i] = math.NaN(), 1e308
	}
	out, err := m.Infer(context.Background(), []*tensor.Tensor{{Name: "input", DataType: tensor.FP64, Shape: []int64{3, int64(cols)}, FP64: vals}}, nil)
	if err == nil && len(out) == 0 {
		t.Fatal("inference returned nothing")
	}
}

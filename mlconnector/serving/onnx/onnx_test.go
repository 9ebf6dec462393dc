//go:build cgo

package onnx

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

func TestFixturesMatchScikitLearn(t *testing.T) {
	cases := map[string]struct {
		kind    model.Kind
		inputs  []tensor.Spec
		outputs []tensor.Spec
	}{
		"iris_mlp": {model.Classifier,
			[]tensor.Spec{{Name: "input", DataType: tensor.FP32, Shape: []int64{-1, 4}}},
			[]tensor.Spec{
				{Name: "label", DataType: tensor.INT64, Shape: []int64{-1}},
				{Name: "probabilities", DataType: tensor.FP32, Shape: []int64{-1, 3}}}},
		"diabetes_linear": {model.Regressor,
			[]tensor.Spec{
				{Name: "clinical", DataType: tensor.FP64, Shape: []int64{-1, 4}},
				{Name: "serum", DataType: tensor.FP64, Shape: []int64{-1, 6}}},
			[]tensor.Spec{{Name: "predict", DataType: tensor.FP64, Shape: []int64{-1, 1}}}},
	}
	r := model.NewRegistry()
	Register(r, servingtest.ONNXRuntime(t))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := r.Load("", servingtest.Path(name+".onnx"), model.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			meta := m.Metadata()
			if meta.Kind != tc.kind {
				t.Errorf("kind %s, want %s", meta.Kind, tc.kind)
			}
			if diff := cmp.Diff(tc.inputs, meta.Inputs); diff != "" {
				t.Errorf("inputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.outputs, meta.Outputs); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			servingtest.Check(t, m, servingtest.LoadReference(t, name), 1e-5)
		})
	}
}

func TestSelectedOutputsAndRuntimeErrors(t *testing.T) {
	m, err := Load(servingtest.ONNXRuntime(t), servingtest.Path("diabetes_linear.onnx"), model.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Batch sizes that differ between inputs pass the specs (both are -1)
	// but not the model's Concat: an error, never a crash.
	in := []*tensor.Tensor{
		tensor.New("clinical", tensor.FP64, []int64{2, 4}),
		tensor.New("serum", tensor.FP64, []int64{3, 6}),
	}
	if _, err := m.Infer(context.Background(), in, nil); err == nil {
		t.Fatal("mismatched batch sizes: no error")
	}
	in[1] = tensor.New("serum", tensor.FP64, []int64{2, 6})
	out, err := m.Infer(context.Background(), in, []string{"predict"})
	if err != nil || len(out) != 1 || out[0].Name != "predict" {
		t.Fatalf("got %v, %v", out, err)
	}
}

func TestBadModelFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.onnx")
	if err := os.WriteFile(p, []byte("not a protobuf at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(servingtest.ONNXRuntime(t), p, model.Options{})
	if err == nil || !strings.Contains(err.Error(), "inputs and outputs") {
		t.Fatalf("error %v", err)
	}
}

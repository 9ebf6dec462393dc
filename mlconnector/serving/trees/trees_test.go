package trees

import (
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
		outputs []tensor.Spec
	}{
		"iris_gbm": {model.Classifier, []tensor.Spec{
			{Name: "label", DataType: tensor.INT64, Shape: []int64{-1}},
			{Name: "probabilities", DataType: tensor.FP64, Shape: []int64{-1, 3}}}},
		"cancer_gbm": {model.Classifier, []tensor.Spec{
			{Name: "label", DataType: tensor.INT64, Shape: []int64{-1}},
			{Name: "probabilities", DataType: tensor.FP64, Shape: []int64{-1, 2}}}},
		"diabetes_gbm": {model.Regressor, []tensor.Spec{
			{Name: "predict", DataType: tensor.FP64, Shape: []int64{-1, 1}}}},
	}
	r := model.NewRegistry()
	Register(r)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := r.Load("", servingtest.Path(name+".txt"), model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ref := servingtest.LoadReference(t, name)
			meta := m.Metadata()
			if meta.Kind != tc.kind {
				t.Errorf("kind %s, want %s", meta.Kind, tc.kind)
			}
			if diff := cmp.Diff(tc.outputs, meta.Outputs); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ref.Features, meta.Features); diff != "" {
				t.Errorf("features (-want +got):\n%s", diff)
			}
			servingtest.Check(t, m, ref, 1e-5)
		})
	}
}

func TestBadModelFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, err := os.ReadFile(servingtest.Path("iris_gbm.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		format, path, want string
	}{
		"truncated lightgbm": {LightGBM, write("t.txt", string(good[:len(good)/2])), "error while reading"},
		"not a model":        {LightGBM, write("n.txt", "tree\nhello\n\n"), "version"},
		"xgboost 1.x":        {XGBoost, write("x.bin", "binf\x00\x00\x00\x3f"), "before 1.0"},
		"missing file":       {LightGBM, filepath.Join(dir, "absent.txt"), "no such file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(tc.format, tc.path, model.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

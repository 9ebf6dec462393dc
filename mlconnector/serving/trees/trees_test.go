package trees

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// TestFixturesMatchReferences: the LightGBM files (written from
// scikit-learn's trees) predict what scikit-learn does, the XGBoost JSON
// files what XGBoost does, within 1e-5.
func TestFixturesMatchReferences(t *testing.T) {
	classifier := func(k int64) []tensor.Spec {
		return []tensor.Spec{
			{Name: "label", DataType: tensor.INT64, Shape: []int64{-1}},
			{Name: "probabilities", DataType: tensor.FP64, Shape: []int64{-1, k}}}
	}
	cases := map[string]struct {
		kind    model.Kind
		outputs []tensor.Spec
	}{
		"iris_xgb.json":     {model.Classifier, classifier(3)},
		"cancer_xgb.json":   {model.Classifier, classifier(2)},
		"diabetes_xgb.json": {model.Regressor, []tensor.Spec{{Name: "predict", DataType: tensor.FP64, Shape: []int64{-1, 1}}}},
		"iris_gbm.txt": {model.Classifier, []tensor.Spec{
			{Name: "label", DataType: tensor.INT64, Shape: []int64{-1}},
			{Name: "probabilities", DataType: tensor.FP64, Shape: []int64{-1, 3}}}},
		"cancer_gbm.txt": {model.Classifier, []tensor.Spec{
			{Name: "label", DataType: tensor.INT64, Shape: []int64{-1}},
			{Name: "probabilities", DataType: tensor.FP64, Shape: []int64{-1, 2}}}},
		"diabetes_gbm.txt": {model.Regressor, []tensor.Spec{
			{Name: "predict", DataType: tensor.FP64, Shape: []int64{-1, 1}}}},
	}
	r := model.NewRegistry()
	Register(r)
	for file, tc := range cases {
		t.Run(file, func(t *testing.T) {
			name := strings.TrimSuffix(file, filepath.Ext(file))
			m, err := r.Load("", servingtest.Path(file), model.Options{})
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
		"truncated lightgbm":        {LightGBM, write("t.txt", string(good[:len(good)/2])), "error while reading"},
		"not a model":               {LightGBM, write("n.txt", "tree\nhello\n\n"), "version"},
		"xgboost 1.x":               {XGBoost, write("x.bin", "binf\x00\x00\x00\x3f"), "save it as JSON"},
		"xgboost JSON, not a model": {XGBoostJSON, write("x.json", `{"learner": 5}`), "not an XGBoost JSON model"},
		"xgboost JSON, linear":      {XGBoostJSON, write("l.json", `{"learner": {"gradient_booster": {"name": "gblinear"}}}`), "gblinear"},
		"xgboost JSON, no trees":    {XGBoostJSON, write("e.json", `{"learner": {"gradient_booster": {"name": "gbtree", "model": {"trees": []}}}}`), "no trees"},
		"xgboost JSON, cycle":       {XGBoostJSON, write("c.json", xgbJSON(`"left_children": [0, -1, -1], "right_children": [2, -1, -1]`)), "children"},
		"xgboost JSON, bad feature": {XGBoostJSON, write("f.json", xgbJSON(`"left_children": [1, -1, -1], "right_children": [2, -1, -1], "split_indices": [9, 0, 0]`)), "feature 9"},
		"xgboost JSON, objective":   {XGBoostJSON, write("o.json", strings.Replace(xgbJSON(""), "reg:squarederror", "survival:cox", 1)), "survival:cox"},
		"missing file":              {LightGBM, filepath.Join(dir, "absent.txt"), "no such file"},
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

// xgbJSON is an XGBoost JSON model of one tree of three nodes; fields
// replaces some of its arrays.
func xgbJSON(fields string) string {
	tree := map[string]string{
		"left_children": "[1, -1, -1]", "right_children": "[2, -1, -1]", "split_indices": "[0, 0, 0]",
		"split_conditions": "[0.5, -1, 1]", "default_left": "[1, 0, 0]", "split_type": "[0, 0, 0]",
	}
	for _, f := range strings.Split(fields, ", \"") {
		if k, v, ok := strings.Cut(f, ": "); ok {
			tree[strings.Trim(k, `"`)] = v
		}
	}
	var parts []string
	for k, v := range tree {
		parts = append(parts, `"`+k+`": `+v)
	}
	return `{"learner": {"learner_model_param": {"base_score": "5E-1", "num_class": "0", "num_feature": "2"},
		"objective": {"name": "reg:squarederror"},
		"gradient_booster": {"name": "gbtree", "model": {"tree_info": [0], "trees": [{` + strings.Join(parts, ", ") + `}]}}}}`
}

func TestXGBoostJSONMissingValuesTakeTheDefault(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(p, []byte(xgbJSON("")), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Load(XGBoostJSON, p, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := &tensor.Tensor{Name: "input", DataType: tensor.FP64, Shape: []int64{3, 2}, FP64: []float64{0.2, 0, 0.7, 0, math.NaN(), 0}}
	out, err := m.Infer(context.Background(), []*tensor.Tensor{in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// base 0.5 plus the leaf: left (-1) below 0.5, right (1) above, left
	// (the default) when missing.
	if diff := cmp.Diff([]float64{-0.5, 1.5, -0.5}, out[0].FP64); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestLoadRefusesBadLightGBMTrees: a LightGBM model whose node links form
// a cycle made every prediction loop forever inside leaves (found by
// FuzzLoad); such models, and links out of range, are refused at load with
// the tree and node named.
func TestLoadRefusesBadLightGBMTrees(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "testdata", "iris_gbm.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ from, to, want string }{
		"child is its parent":  {"left_child=1 -1 -3", "left_child=0 -1 -3", "tree 1: node 0's left_child is node 0: want a later node below 3 (no cycles)"},
		"child is an ancestor": {"right_child=2 -2 -4", "right_child=2 0 -4", "tree 1: node 1's right_child is node 0: want a later node below 3 (no cycles)"},
		"child past the nodes": {"left_child=1 -1 -3", "left_child=7 -1 -3", "tree 1: node 0's left_child is node 7: want a later node below 3 (no cycles)"},
		"leaf past the leaves": {"right_child=2 -2 -4", "right_child=2 -2 -9", "tree 1: node 2's right_child is leaf 8 of 4"},
		"lists too short":      {"left_child=1 -1 -3", "left_child=1 -1", "tree 1: num_leaves=4 with 2 left and 3 right children"},
		"not a number":         {"left_child=1 -1 -3", "left_child=1 x -3", `tree 1: left_child "x"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(string(good), tc.from, tc.to, 1)
			if bad == string(good) {
				t.Fatalf("%q not in the fixture", tc.from)
			}
			path := filepath.Join(t.TempDir(), "model.txt")
			if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(LightGBM, path, model.Options{Threads: 1})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want %q", err, tc.want)
			}
		})
	}
}

// Package trees serves gradient-boosted tree ensembles in pure Go: LightGBM
// text and JSON models through github.com/dmitryikh/leaves, and XGBoost's
// JSON format (1.0 and later, numerical splits) and binary format (as
// XGBoost wrote it before 1.0) through this package's own readers, which
// check every count and node link before they use it. It needs no cgo, so
// it is what an image without ONNX Runtime serves.
//
// A model has one input, "input" (FP64 [-1, features]). A binary (sigmoid)
// or multiclass (softmax) model is a classifier with outputs "label" (INT64
// [-1]) and "probabilities" (FP64 [-1, classes]); any other objective is a
// regressor with the output "predict" (FP64 [-1, outputs]).
package trees

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/dmitryikh/leaves"
	"github.com/dmitryikh/leaves/transformation"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Formats read by this package.
const (
	LightGBM     = "lightgbm"
	LightGBMJSON = "lightgbm-json"
	// XGBoost is XGBoost's binary format before 1.0.
	XGBoost = "xgboost"
	// XGBoostJSON is XGBoost's JSON format (1.0 and later; save the model
	// to a file ending in .json), read by this package.
	XGBoostJSON = "xgboost-json"
)

// MaxModelBytes bounds a model file; the reader trusts sizes written in the
// file, so a damaged file must not get far.
const MaxModelBytes = 1 << 30

// Register adds the tree formats to r.
func Register(r *model.Registry) {
	for _, f := range []string{LightGBM, LightGBMJSON, XGBoost, XGBoostJSON} {
		r.Register(f, func(path string, opts model.Options) (model.Model, error) { return Load(f, path, opts) })
	}
}

// Ensemble is a loaded tree ensemble.
type Ensemble struct {
	// predict writes rows*groups transformed predictions.
	predict func(vals []float64, rows, cols int, out []float64) error
	groups  int
	meta    model.Metadata
	classes int // 0 for a regressor
}

var _ model.Model = (*Ensemble)(nil)

// Load reads a model file of the given format.
func Load(format, path string, opts model.Options) (m *Ensemble, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxModelBytes {
		return nil, fmt.Errorf("%d bytes: larger than the %d this reader takes", len(data), MaxModelBytes)
	}
	// leaves panics on some malformed files; a model that cannot be read
	// is an error, not a crash of the server.
	defer func() {
		if p := recover(); p != nil {
			m, err = nil, fmt.Errorf("malformed model file: %v", p)
		}
	}()
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	m = &Ensemble{}
	var platform string
	var features []string
	var nFeatures int
	if format == XGBoostJSON || format == XGBoost {
		var x *xgbEnsemble
		switch {
		case format == XGBoostJSON:
			x, err = parseXGBoostJSON(data)
		case bytes.HasPrefix(data, []byte("binf")) || bytes.HasPrefix(data, []byte("{")):
			return nil, errors.New("an XGBoost 1.0 or later model: save it as JSON (a file name ending in .json) and serve it with the xgboost-json format")
		default:
			x, err = parseXGBoostBinary(data)
		}
		if err != nil {
			return nil, err
		}
		m.predict, m.groups, m.classes = x.predict, x.groups, x.classes
		platform, features, nFeatures = "xgboost", x.names, x.features
	} else {
		var e *leaves.Ensemble
		var objective string
		switch format {
		case LightGBM:
			if err := checkLightGBMTrees(data); err != nil {
				return nil, err
			}
			e, err = leaves.LGEnsembleFromReader(bufio.NewReader(bytes.NewReader(data)), true)
			platform, features = "lightgbm", lightGBMFeatures(data)
		case LightGBMJSON:
			if objective, err = checkLightGBMJSON(data); err != nil {
				return nil, err
			}
			// leaves reads no objective from JSON (asked to, it refuses
			// every model): lightGBMTransform applies it below.
			e, err = leaves.LGEnsembleFromJSON(bytes.NewReader(data), false)
			platform = "lightgbm"
		default:
			return nil, fmt.Errorf("format %q is not a tree format", format)
		}
		if err != nil {
			return nil, err
		}
		m.groups, nFeatures = e.NOutputGroups(), e.NFeatures()
		m.predict = func(vals []float64, rows, cols int, out []float64) error {
			t := min(threads, (rows+leaves.BatchSize-1)/leaves.BatchSize)
			return e.PredictDense(vals, rows, cols, out, 0, max(t, 1))
		}
		switch e.Transformation().Type() {
		case transformation.Logistic:
			m.classes = 2
		case transformation.Softmax:
			m.classes = e.NOutputGroups()
		}
		if format == LightGBMJSON {
			transform, classes, err := lightGBMTransform(objective, m.groups)
			if err != nil {
				return nil, err
			}
			if m.classes = classes; transform != nil {
				raw := m.predict
				m.predict = func(vals []float64, rows, cols int, out []float64) error {
					if err := raw(vals, rows, cols, out); err != nil {
						return err
					}
					transform(out)
					return nil
				}
			}
		}
	}
	if nFeatures <= 0 {
		return nil, errors.New("the model has no features")
	}
	if len(features) != nFeatures {
		features = nil
	}
	m.meta = model.Metadata{
		Platform: platform,
		Inputs:   []tensor.Spec{{Name: "input", DataType: tensor.FP64, Shape: []int64{-1, int64(nFeatures)}}},
		Features: features,
	}
	if m.classes > 0 {
		m.meta.Kind = model.Classifier
		m.meta.Outputs = []tensor.Spec{
			{Name: "label", DataType: tensor.INT64, Shape: []int64{-1}},
			{Name: "probabilities", DataType: tensor.FP64, Shape: []int64{-1, int64(m.classes)}},
		}
		m.meta.ExplainOutput = "probabilities"
	} else {
		m.meta.Kind = model.Regressor
		m.meta.Outputs = []tensor.Spec{{Name: "predict", DataType: tensor.FP64, Shape: []int64{-1, int64(m.groups)}}}
		m.meta.ExplainOutput = "predict"
	}
	return m, nil
}

// lightGBMFeatures reads feature_names= from a LightGBM text model's header.
func lightGBMFeatures(data []byte) []string {
	header, _, _ := bytes.Cut(data, []byte("\n\n"))
	for _, line := range strings.Split(string(header), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "feature_names="); ok {
			return strings.Fields(v)
		}
	}
	return nil
}

// Metadata implements model.Model.
func (m *Ensemble) Metadata() model.Metadata { return m.meta }

// Close implements model.Model.
func (m *Ensemble) Close() error { return nil }

// Infer implements model.Model.
func (m *Ensemble) Infer(_ context.Context, inputs []*tensor.Tensor, outputs []string) ([]*tensor.Tensor, error) {
	if len(inputs) != 1 || inputs[0].DataType != tensor.FP64 || len(inputs[0].Shape) != 2 {
		return nil, errors.New("want one FP64 input of shape [N, features]")
	}
	in := inputs[0]
	rows, cols := int(in.Shape[0]), int(in.Shape[1])
	groups := m.groups
	pred := make([]float64, rows*groups)
	if rows > 0 {
		if err := m.predict(in.FP64, rows, cols, pred); err != nil {
			return nil, err
		}
	}
	if m.classes == 0 {
		return model.Select([]*tensor.Tensor{{Name: "predict", DataType: tensor.FP64, Shape: []int64{int64(rows), int64(groups)}, FP64: pred}}, outputs), nil
	}
	k := m.classes
	probs := pred
	if k == 2 && groups == 1 {
		probs = make([]float64, rows*2)
		for i, p := range pred {
			probs[2*i], probs[2*i+1] = 1-p, p
		}
	}
	labels := make([]int64, rows)
	for i := range rows {
		row := probs[i*k : (i+1)*k]
		best := 0
		for j, p := range row {
			if p > row[best] {
				best = j
			}
		}
		labels[i] = int64(best)
	}
	return model.Select([]*tensor.Tensor{
		{Name: "label", DataType: tensor.INT64, Shape: []int64{int64(rows)}, Int64: labels},
		{Name: "probabilities", DataType: tensor.FP64, Shape: []int64{int64(rows), int64(k)}, FP64: probs},
	}, outputs), nil
}

// checkLightGBMTrees checks the node links of every tree of a LightGBM text
// model before leaves reads it: leaves follows left_child and right_child
// as written, so a child that points back to its node or an ancestor made
// every prediction loop forever (found by FuzzLoad). LightGBM numbers a
// tree's internal nodes in the order it splits, so an internal child comes
// after its parent, which rules out cycles; a leaf child is ~index, below
// num_leaves.
func checkLightGBMTrees(data []byte) error {
	tree, nLeaves := "", 0
	var left, right []string
	check := func() error {
		if tree == "" {
			return nil
		}
		internal := nLeaves - 1
		if nLeaves < 1 || len(left) != max(internal, 0) || len(right) != max(internal, 0) {
			return fmt.Errorf("tree %s: num_leaves=%d with %d left and %d right children", tree, nLeaves, len(left), len(right))
		}
		for i := range internal {
			for _, side := range []struct {
				name string
				v    string
			}{{"left_child", left[i]}, {"right_child", right[i]}} {
				c, err := strconv.Atoi(side.v)
				switch {
				case err != nil:
					return fmt.Errorf("tree %s: %s %q: %w", tree, side.name, side.v, err)
				case c >= 0 && (c <= i || c >= internal):
					return fmt.Errorf("tree %s: node %d's %s is node %d: want a later node below %d (no cycles)", tree, i, side.name, c, internal)
				case c < 0 && ^c >= nLeaves:
					return fmt.Errorf("tree %s: node %d's %s is leaf %d of %d", tree, i, side.name, ^c, nLeaves)
				}
			}
		}
		return nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		key, v, ok := strings.Cut(line, "=")
		switch {
		case ok && key == "Tree" || line == "end of trees":
			if err := check(); err != nil {
				return err
			}
			tree, nLeaves, left, right = v, 0, nil, nil
			if line == "end of trees" {
				return nil
			}
		case tree == "" || !ok:
		case key == "num_leaves":
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("tree %s: num_leaves %q: %w", tree, v, err)
			}
			nLeaves = n
		case key == "left_child":
			left = strings.Fields(v)
		case key == "right_child":
			right = strings.Fields(v)
		}
	}
	return check()
}

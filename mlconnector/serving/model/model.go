// Package model is what the model server serves: the Model interface every
// format implements, and a registry of loaders by format name ("onnx",
// "lightgbm", ...), so that a build without cgo can leave ONNX out and say so.
package model

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Kind says how to read a model's outputs.
type Kind string

// Kinds of model.
const (
	// Classifier models have a "label" output and a "probabilities" output
	// of shape [N, classes].
	Classifier Kind = "classifier"
	// Regressor models have one numeric output.
	Regressor Kind = "regressor"
	// Other models are served as they are; explanations need an output
	// named in the request.
	Other Kind = "other"
)

// Metadata describes a loaded model.
type Metadata struct {
	// Platform names the runtime, e.g. "onnxruntime" or "lightgbm".
	Platform string
	Kind     Kind
	Inputs   []tensor.Spec
	Outputs  []tensor.Spec
	// Features names the model's features in input order, when the model
	// file records them (LightGBM does).
	Features []string
	// ExplainOutput is the output explanations describe by default (the
	// probabilities of a classifier, the prediction of a regressor).
	ExplainOutput string
}

// Model is a loaded model. Infer is safe for concurrent use.
type Model interface {
	Metadata() Metadata
	// Infer evaluates the model on inputs, which match Metadata().Inputs
	// (the server validates them first), and returns the outputs named in
	// outputs, or every output when outputs is empty, in Metadata order.
	// An error is about this input (the server answers 422).
	Infer(ctx context.Context, inputs []*tensor.Tensor, outputs []string) ([]*tensor.Tensor, error)
	Close() error
}

// Options are passed to every loader.
type Options struct {
	// Threads bounds the threads one inference may use (0: the runtime's
	// default).
	Threads int
}

// Loader reads a model file.
type Loader func(path string, opts Options) (Model, error)

// ErrUnavailable is wrapped by loaders that this build does not have.
var ErrUnavailable = errors.New("not available in this build")

// Registry maps format names to loaders.
type Registry struct {
	loaders map[string]Loader
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{loaders: map[string]Loader{}} }

// Register adds a loader for format, replacing any.
func (r *Registry) Register(format string, l Loader) { r.loaders[format] = l }

// Formats lists the registered formats, sorted.
func (r *Registry) Formats() []string {
	var f []string
	for k := range r.loaders {
		f = append(f, k)
	}
	slices.Sort(f)
	return f
}

// Load reads path with format's loader; an empty format is detected from
// the file (see Detect).
func (r *Registry) Load(format, path string, opts Options) (Model, error) {
	if format == "" {
		var err error
		if format, err = Detect(path); err != nil {
			return nil, err
		}
	}
	l, ok := r.loaders[format]
	if !ok {
		return nil, fmt.Errorf("model format %q is not known: want one of %s", format, strings.Join(r.Formats(), ", "))
	}
	m, err := l(path, opts)
	if err != nil {
		return nil, fmt.Errorf("load %s model %s: %w", format, path, err)
	}
	return m, nil
}

// Detect names the format of a model file from its extension, or from its
// first bytes when the extension says nothing: ".onnx" is onnx; a LightGBM
// text model starts with "tree"; XGBoost's JSON model is an object with
// "learner", LightGBM's JSON dump one with "tree_info"; ".ubj" (XGBoost's
// UBJSON) is refused; anything else is taken for XGBoost's old binary
// format.
func Detect(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".onnx":
		return "onnx", nil
	case ".ubj":
		return "", fmt.Errorf("%s: XGBoost's UBJSON format is not read: save the model as JSON (a file name ending in .json)", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("detect model format: %w", err)
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := f.Read(head)
	head = head[:n]
	trimmed := strings.TrimLeft(string(head), " \t\r\n")
	switch {
	case strings.HasPrefix(trimmed, "tree\n") || strings.HasPrefix(trimmed, "tree\r\n"):
		return "lightgbm", nil
	case strings.HasPrefix(trimmed, "{") && strings.Contains(trimmed, `"learner"`):
		return "xgboost-json", nil
	case strings.HasPrefix(trimmed, "{") && strings.Contains(trimmed, `"tree_info"`):
		return "lightgbm-json", nil
	case strings.HasPrefix(trimmed, "{"):
		return "", fmt.Errorf("detect model format of %s: a JSON file that is neither an XGBoost model nor a LightGBM dump; name the format with --format", path)
	}
	return "xgboost", nil
}

// Select returns the outputs named in names (all when names is empty) in
// the order of specs; loaders compute every output and use it to pick.
func Select(all []*tensor.Tensor, names []string) []*tensor.Tensor {
	if len(names) == 0 {
		return all
	}
	out := make([]*tensor.Tensor, 0, len(names))
	for _, t := range all {
		if slices.Contains(names, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

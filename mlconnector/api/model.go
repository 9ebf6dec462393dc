// Package api holds the wire types of the ML connector's REST API, their
// validation and its paths: what the server, its Go client and the mls CLI
// share. Model bodies keep upstream's key names (modelname, featurelist,
// ...) so that upstream clients keep working.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Scalar is a JSON string, number, boolean or null, kept as written.
// Upstream declared some of these values as integers; models carry
// learning rates and names too.
type Scalar json.RawMessage

// MarshalJSON implements json.Marshaler.
func (s Scalar) MarshalJSON() ([]byte, error) {
	if len(s) == 0 {
		return []byte("null"), nil
	}
	return s, nil
}

// UnmarshalJSON accepts any JSON scalar and refuses objects and arrays.
func (s *Scalar) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return &json.UnmarshalTypeError{Value: map[byte]string{'{': "object", '[': "array"}[t[0]], Type: reflect.TypeOf(Scalar(nil))}
	}
	*s = append((*s)[:0], t...)
	return nil
}

// JSONTypeName names the type in "wrong type" problems.
func (Scalar) JSONTypeName() string { return "a string, number, boolean or null" }

// String returns the scalar as text: a string's value, else its JSON.
func (s Scalar) String() string {
	var str string
	if json.Unmarshal(s, &str) == nil {
		return str
	}
	return string(s)
}

// Hyperparameter is one training hyperparameter.
type Hyperparameter struct {
	Parameter string `json:"parameter"`
	Value     Scalar `json:"value,omitempty"`
}

// Performance is one quality metric of the model.
type Performance struct {
	Metric    string   `json:"metric"`
	Order     *int     `json:"order,omitempty"`
	Threshold *float64 `json:"threshold,omitempty"`
}

// Resource is a resource used to train or run the model.
type Resource struct {
	ResourceName string `json:"resource_name"`
	Value        Scalar `json:"value,omitempty"`
	Deploy       Scalar `json:"deploy,omitempty"`
}

// Feature types and kinds, as upstream writes them.
const (
	FeatureContinuous  = "cont"
	FeatureCategorical = "cat"
	FeatureInput       = 0
	FeatureTarget      = 1
)

// Feature is one column the model reads (kind 0) or predicts (kind 1).
// Inputs are fed to the model in the order of the list.
type Feature struct {
	FeatureName string `json:"feature_name"`
	// Type is "cont" (continuous) or "cat" (categorical).
	Type string `json:"type"`
	// Kind is 0 for an input, 1 for the target.
	Kind  int    `json:"kind"`
	Units Scalar `json:"units,omitempty"`
}

// Inference is an inference setting.
type Inference struct {
	Type  string `json:"type"`
	Value Scalar `json:"value,omitempty"`
}

// Drift methods, as upstream numbers them.
const (
	DriftMeanShift = 0
	DriftMMD       = 1
	DriftKS        = 2
)

// DriftDetection switches drift detection on (IsTrue 1) with a method: 0
// mean shift (Welch's t-test), 1 MMD, 2 Kolmogorov–Smirnov. Categorical
// features are always tested with chi-squared.
type DriftDetection struct {
	IsTrue int `json:"is_true"`
	Method int `json:"method"`
}

// ModelSpec is what a user says about a model: the body of POST
// /v1/models and POST /model/add (upstream's MLModelCreate).
type ModelSpec struct {
	ModelName        string           `json:"modelname"`
	ModelKind        string           `json:"modelkind"`
	Hyperparameter   []Hyperparameter `json:"hyperparameter,omitempty"`
	ModelPerformance []Performance    `json:"modelperformance,omitempty"`
	TrainingResource []Resource       `json:"trainingresource,omitempty"`
	RunResource      []Resource       `json:"runresource,omitempty"`
	FeatureList      []Feature        `json:"featurelist,omitempty"`
	Inference        []Inference      `json:"inference,omitempty"`
	// DriftDetection is a list in upstream's form; a single object is
	// accepted too.
	DriftDetection DriftList `json:"drift_detection"`
	ModelTags      []string  `json:"modeltags,omitempty"`
	// Format of the model files (onnx, lightgbm, xgboost, ...); found
	// from the uploaded file when empty.
	Format string `json:"format,omitempty"`
}

// DriftList is drift_detection: upstream sends a list (or null); one
// object is read as a list of one.
type DriftList []DriftDetection

// UnmarshalJSON implements json.Unmarshaler.
func (d *DriftList) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '{' {
		var one DriftDetection
		if err := json.Unmarshal(t, &one); err != nil {
			return err
		}
		*d = DriftList{one}
		return nil
	}
	var list []DriftDetection
	if err := json.Unmarshal(t, &list); err != nil {
		return err
	}
	*d = list
	return nil
}

// Enabled reports whether drift detection is on, and its method.
func (d DriftList) Enabled() (bool, int) {
	for _, x := range d {
		if x.IsTrue == 1 {
			return true, x.Method
		}
	}
	return false, 0
}

// Model is a registered model (upstream's MLModel plus the registry's
// fields).
type Model struct {
	ModelID string `json:"modelid"`
	ModelSpec
	// Owner registered the model.
	Owner string `json:"owner,omitempty"`
	// LatestVersion is the newest version; 0 before the first model file.
	LatestVersion int `json:"latest_version"`
	// Aliases map a name (production, staging) to a version.
	Aliases   map[string]int `json:"aliases,omitempty"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// Inputs returns the input features in order.
func (m *ModelSpec) Inputs() []Feature {
	var out []Feature
	for _, f := range m.FeatureList {
		if f.Kind == FeatureInput {
			out = append(out, f)
		}
	}
	return out
}

// File kinds of an upload (upstream's file_kind).
const (
	FileModel = "model"
	FileData  = "data"
	FileCode  = "code"
	FileEnv   = "env"
)

// FileKinds are the kinds of files a model has.
var FileKinds = []string{FileModel, FileData, FileCode, FileEnv}

// Artifact is one uploaded file.
type Artifact struct {
	ID      string `json:"id"`
	ModelID string `json:"modelid"`
	// Kind is model, data, code or env (upstream's filekind).
	Kind string `json:"filekind"`
	// Revision counts the uploads of this kind; a model file's revision
	// is its version.
	Revision    int       `json:"revision"`
	FileName    string    `json:"filename"`
	ContentType string    `json:"contenttype"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	CreatedBy   string    `json:"created_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// Version is one version of a model: one uploaded model file.
type Version struct {
	ModelID  string   `json:"modelid"`
	Version  int      `json:"version"`
	Format   string   `json:"format"`
	Artifact Artifact `json:"artifact"`
	// Aliases pointing at this version.
	Aliases   []string  `json:"aliases,omitempty"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Uploaded answers an upload: the artifact, upstream's FileSchema fields,
// and the new version when a model file was uploaded.
type Uploaded struct {
	Artifact
	Version *Version `json:"version,omitempty"`
}

// AliasRequest points an alias at a version.
type AliasRequest struct {
	Version int `json:"version"`
}

// ModelFormats the built-in model server reads. Other formats need a
// runtime registered for them.
var ModelFormats = []string{"onnx", "lightgbm", "xgboost"}

// DetectFormat guesses a model file's format from its name and first
// bytes; "" when unknown.
func DetectFormat(fileName string, head []byte) string {
	name := strings.ToLower(fileName)
	switch {
	case strings.HasSuffix(name, ".onnx"):
		return "onnx"
	case bytes.HasPrefix(head, []byte("tree\n")), bytes.Contains(head[:min(len(head), 64)], []byte("version=v")):
		return "lightgbm"
	case strings.HasSuffix(name, ".json") && bytes.Contains(head, []byte(`"learner"`)),
		strings.HasSuffix(name, ".ubj"), strings.HasSuffix(name, ".xgb"), strings.HasSuffix(name, ".bst"):
		return "xgboost"
	}
	return ""
}

// String describes a file for messages.
func (a Artifact) String() string {
	return fmt.Sprintf("%s file %s (revision %d, %d bytes)", a.Kind, a.FileName, a.Revision, a.Size)
}

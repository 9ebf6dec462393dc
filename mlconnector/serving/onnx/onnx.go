//go:build cgo

package onnx

import (
	"context"
	"fmt"
	"slices"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Available reports whether this build can run ONNX models.
const Available = true

var (
	envOnce sync.Once
	envErr  error
)

// Register adds the "onnx" format to r. library is the path of
// libonnxruntime.so (a bare file name is looked up by the dynamic loader,
// through LD_LIBRARY_PATH); ONNX Runtime is loaded at the first model.
func Register(r *model.Registry, library string) {
	r.Register(Format, func(path string, opts model.Options) (model.Model, error) {
		return Load(library, path, opts)
	})
}

// Format is the registry name of ONNX models.
const Format = "onnx"

func initialize(library string) error {
	envOnce.Do(func() {
		ort.SetSharedLibraryPath(library)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			envErr = fmt.Errorf("load ONNX Runtime from %s (set --onnxruntime-lib, or LD_LIBRARY_PATH for a bare name): %w", library, err)
		}
	})
	return envErr
}

// Model is an ONNX model in an ONNX Runtime session.
type Model struct {
	session *ort.DynamicAdvancedSession
	meta    model.Metadata
	names   []string // output names, in session order
}

var _ model.Model = (*Model)(nil)

// Load opens path in a new session.
func Load(library, path string, opts model.Options) (*Model, error) {
	if err := initialize(library); err != nil {
		return nil, err
	}
	ins, outs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("read inputs and outputs: %w", err)
	}
	meta := model.Metadata{Platform: "onnxruntime", Kind: model.Other}
	for _, in := range ins {
		s, err := spec(in)
		if err != nil {
			return nil, fmt.Errorf("input %w", err)
		}
		meta.Inputs = append(meta.Inputs, s)
	}
	for _, out := range outs {
		s, err := spec(out)
		if err != nil {
			return nil, fmt.Errorf("output %w (a scikit-learn classifier must be exported without ZipMap)", err)
		}
		meta.Outputs = append(meta.Outputs, s)
	}
	classify(&meta)
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, err
		}
		if err := so.SetInterOpNumThreads(1); err != nil {
			return nil, err
		}
	}
	m := &Model{meta: meta}
	inNames := make([]string, len(meta.Inputs))
	for i, s := range meta.Inputs {
		inNames[i] = s.Name
	}
	for _, s := range meta.Outputs {
		m.names = append(m.names, s.Name)
	}
	m.session, err = ort.NewDynamicAdvancedSession(path, inNames, m.names, so)
	if err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	return m, nil
}

func spec(info ort.InputOutputInfo) (tensor.Spec, error) {
	if info.OrtValueType != ort.ONNXTypeTensor {
		return tensor.Spec{}, fmt.Errorf("%q is a %v, not a tensor", info.Name, info.OrtValueType)
	}
	var dt tensor.DataType
	switch info.DataType {
	case ort.TensorElementDataTypeFloat:
		dt = tensor.FP32
	case ort.TensorElementDataTypeDouble:
		dt = tensor.FP64
	case ort.TensorElementDataTypeInt64:
		dt = tensor.INT64
	case ort.TensorElementDataTypeInt32:
		dt = tensor.INT32
	case ort.TensorElementDataTypeBool:
		dt = tensor.BOOL
	case ort.TensorElementDataTypeString:
		dt = tensor.BYTES
	default:
		return tensor.Spec{}, fmt.Errorf("%q has element type %v: the server takes %s", info.Name, info.DataType, tensor.SupportedList())
	}
	return tensor.Spec{Name: info.Name, DataType: dt, Shape: slices.Clone([]int64(info.Dimensions))}, nil
}

// classify guesses the kind from the outputs as scikit-learn's converters
// name them: a label and probabilities make a classifier, a single numeric
// output a regressor.
func classify(meta *model.Metadata) {
	var label, probs string
	for _, o := range meta.Outputs {
		switch o.Name {
		case "label", "output_label":
			label = o.Name
		case "probabilities", "output_probability":
			probs = o.Name
		}
	}
	switch {
	case label != "" && probs != "":
		meta.Kind, meta.ExplainOutput = model.Classifier, probs
	case len(meta.Outputs) == 1 && meta.Outputs[0].DataType.Numeric():
		meta.Kind, meta.ExplainOutput = model.Regressor, meta.Outputs[0].Name
	}
}

// Metadata implements model.Model.
func (m *Model) Metadata() model.Metadata { return m.meta }

// Close implements model.Model.
func (m *Model) Close() error { return m.session.Destroy() }

// Infer implements model.Model.
func (m *Model) Infer(_ context.Context, inputs []*tensor.Tensor, outputs []string) ([]*tensor.Tensor, error) {
	byName := map[string]*tensor.Tensor{}
	for _, t := range inputs {
		byName[t.Name] = t
	}
	values := make([]ort.Value, len(m.meta.Inputs))
	defer func() {
		for _, v := range values {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	for i, s := range m.meta.Inputs {
		t, ok := byName[s.Name]
		if !ok {
			return nil, fmt.Errorf("input %q is missing", s.Name)
		}
		v, err := toValue(t)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", s.Name, err)
		}
		values[i] = v
	}
	outs := make([]ort.Value, len(m.names))
	defer func() {
		for _, v := range outs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err := m.session.Run(values, outs); err != nil {
		return nil, fmt.Errorf("ONNX Runtime: %w", err)
	}
	var result []*tensor.Tensor
	for i, v := range outs {
		if len(outputs) > 0 && !slices.Contains(outputs, m.names[i]) {
			continue
		}
		t, err := fromValue(m.names[i], v)
		if err != nil {
			return nil, err
		}
		result = append(result, t)
	}
	return result, nil
}

func toValue(t *tensor.Tensor) (ort.Value, error) {
	shape := ort.NewShape(t.Shape...)
	switch t.DataType {
	case tensor.FP32:
		return ort.NewTensor(shape, t.FP32)
	case tensor.FP64:
		return ort.NewTensor(shape, t.FP64)
	case tensor.INT64:
		return ort.NewTensor(shape, t.Int64)
	case tensor.INT32:
		return ort.NewTensor(shape, t.Int32)
	case tensor.BOOL:
		return ort.NewTensor(shape, t.Bool)
	case tensor.BYTES:
		s, err := ort.NewStringTensor(shape)
		if err != nil {
			return nil, err
		}
		c := make([]string, len(t.Bytes))
		for i, b := range t.Bytes {
			c[i] = string(b)
		}
		if err := s.SetContents(c); err != nil {
			s.Destroy()
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("datatype %s is not supported", t.DataType)
}

func fromValue(name string, v ort.Value) (*tensor.Tensor, error) {
	t := &tensor.Tensor{Name: name}
	switch o := v.(type) {
	case *ort.Tensor[float32]:
		t.DataType, t.FP32 = tensor.FP32, slices.Clone(o.GetData())
	case *ort.Tensor[float64]:
		t.DataType, t.FP64 = tensor.FP64, slices.Clone(o.GetData())
	case *ort.Tensor[int64]:
		t.DataType, t.Int64 = tensor.INT64, slices.Clone(o.GetData())
	case *ort.Tensor[int32]:
		t.DataType, t.Int32 = tensor.INT32, slices.Clone(o.GetData())
	case *ort.Tensor[bool]:
		t.DataType, t.Bool = tensor.BOOL, slices.Clone(o.GetData())
	case *ort.StringTensor:
		c, err := o.GetContents()
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", name, err)
		}
		t.DataType = tensor.BYTES
		for _, s := range c {
			t.Bytes = append(t.Bytes, []byte(s))
		}
	default:
		return nil, fmt.Errorf("output %q has a type the server does not read (%T)", name, v)
	}
	t.Shape = slices.Clone([]int64(v.GetShape()))
	return t, nil
}

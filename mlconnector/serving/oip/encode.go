package oip

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

// Response is an inference response.
type Response struct {
	ModelName    string
	ModelVersion string
	ID           string
	Parameters   map[string]any
	Outputs      []*tensor.Tensor
}

// ErrNotFinite is returned when an output holds NaN or an infinity, which
// JSON cannot carry.
var ErrNotFinite = errors.New("the model's output is not finite (NaN or infinity)")

// AppendResponse appends r as JSON to buf. FP32 data is written with the
// shortest decimal that reads back as the same float32.
func AppendResponse(buf []byte, r *Response) ([]byte, error) {
	buf = append(buf, `{"model_name":`...)
	buf = appendString(buf, r.ModelName)
	if r.ModelVersion != "" {
		buf = append(buf, `,"model_version":`...)
		buf = appendString(buf, r.ModelVersion)
	}
	if r.ID != "" {
		buf = append(buf, `,"id":`...)
		buf = appendString(buf, r.ID)
	}
	if len(r.Parameters) > 0 {
		p, err := json.Marshal(r.Parameters)
		if err != nil {
			return nil, fmt.Errorf("encode parameters: %w", err)
		}
		buf = append(buf, `,"parameters":`...)
		buf = append(buf, p...)
	}
	buf = append(buf, `,"outputs":[`...)
	for i, t := range r.Outputs {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = AppendTensor(buf, t); err != nil {
			return nil, fmt.Errorf("output %q: %w", t.Name, err)
		}
	}
	return append(buf, "]}"...), nil
}

// AppendTensor appends t as an OIP tensor object (name, datatype, shape,
// flat data).
func AppendTensor(buf []byte, t *tensor.Tensor) ([]byte, error) {
	buf = append(buf, `{"name":`...)
	buf = appendString(buf, t.Name)
	buf = append(buf, `,"datatype":"`...)
	buf = append(buf, t.DataType...)
	buf = append(buf, `","shape":[`...)
	for i, d := range t.Shape {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, d, 10)
	}
	buf = append(buf, `],"data":[`...)
	n := t.Len()
	for i := range n {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch t.DataType {
		case tensor.BOOL:
			buf = strconv.AppendBool(buf, t.Bool[i])
		case tensor.INT32:
			buf = strconv.AppendInt(buf, int64(t.Int32[i]), 10)
		case tensor.INT64:
			buf = strconv.AppendInt(buf, t.Int64[i], 10)
		case tensor.FP32:
			v := float64(t.FP32[i])
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, ErrNotFinite
			}
			buf = strconv.AppendFloat(buf, v, 'g', -1, 32)
		case tensor.FP64:
			v := t.FP64[i]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, ErrNotFinite
			}
			buf = strconv.AppendFloat(buf, v, 'g', -1, 64)
		case tensor.BYTES:
			buf = appendString(buf, string(t.Bytes[i]))
		}
	}
	return append(buf, "]}"...), nil
}

func appendString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(buf, b...)
}

// TensorMetadata is one input or output in model metadata.
type TensorMetadata struct {
	Name     string          `json:"name"`
	DataType tensor.DataType `json:"datatype"`
	Shape    []int64         `json:"shape"`
}

// ModelMetadata is the body of GET /v2/models/{name}. Parameters is an
// extension: the model's kind, its feature names and what the explain
// endpoint can do.
type ModelMetadata struct {
	Name       string           `json:"name"`
	Versions   []string         `json:"versions,omitempty"`
	Platform   string           `json:"platform"`
	Inputs     []TensorMetadata `json:"inputs"`
	Outputs    []TensorMetadata `json:"outputs"`
	Parameters map[string]any   `json:"parameters,omitempty"`
}

// Metadata lists specs as TensorMetadata.
func Metadata(specs []tensor.Spec) []TensorMetadata {
	out := make([]TensorMetadata, len(specs))
	for i, s := range specs {
		out[i] = TensorMetadata{Name: s.Name, DataType: s.DataType, Shape: s.Shape}
	}
	return out
}

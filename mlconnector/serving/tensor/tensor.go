// Package tensor holds the typed tensors the model server passes between the
// Open Inference Protocol codec, the model loaders and the explainer.
package tensor

import (
	"fmt"
	"math"
	"strings"
)

// DataType is an Open Inference Protocol tensor datatype.
type DataType string

// The datatypes the model server reads and writes. Other OIP datatypes
// (INT8, UINT16, FP16, ...) are refused with a 400 naming these.
const (
	BOOL  DataType = "BOOL"
	INT32 DataType = "INT32"
	INT64 DataType = "INT64"
	FP32  DataType = "FP32"
	FP64  DataType = "FP64"
	BYTES DataType = "BYTES"
)

// DataTypes lists the supported datatypes in the order error messages name them.
var DataTypes = []DataType{BOOL, INT32, INT64, FP32, FP64, BYTES}

// Supported reports whether d is one of DataTypes.
func (d DataType) Supported() bool {
	for _, s := range DataTypes {
		if d == s {
			return true
		}
	}
	return false
}

// Numeric reports whether d holds numbers (not BOOL or BYTES).
func (d DataType) Numeric() bool { return d == INT32 || d == INT64 || d == FP32 || d == FP64 }

// SupportedList is DataTypes joined for messages.
func SupportedList() string {
	s := make([]string, len(DataTypes))
	for i, d := range DataTypes {
		s[i] = string(d)
	}
	return strings.Join(s, ", ")
}

// Tensor is a named, shaped, row-major tensor. Exactly the slice that
// matches DataType is set.
type Tensor struct {
	Name     string
	DataType DataType
	Shape    []int64

	Bool  []bool
	Int32 []int32
	Int64 []int64
	FP32  []float32
	FP64  []float64
	Bytes [][]byte
}

// Len is the number of elements held.
func (t *Tensor) Len() int {
	switch t.DataType {
	case BOOL:
		return len(t.Bool)
	case INT32:
		return len(t.Int32)
	case INT64:
		return len(t.Int64)
	case FP32:
		return len(t.FP32)
	case FP64:
		return len(t.FP64)
	case BYTES:
		return len(t.Bytes)
	}
	return 0
}

// Float64 returns element i of a numeric tensor as a float64.
func (t *Tensor) Float64(i int) float64 {
	switch t.DataType {
	case INT32:
		return float64(t.Int32[i])
	case INT64:
		return float64(t.Int64[i])
	case FP32:
		return float64(t.FP32[i])
	case FP64:
		return t.FP64[i]
	case BOOL:
		if t.Bool[i] {
			return 1
		}
	}
	return 0
}

// New allocates a tensor of n elements of datatype d.
func New(name string, d DataType, shape []int64) *Tensor {
	t := &Tensor{Name: name, DataType: d, Shape: shape}
	n, _ := Elements(shape)
	switch d {
	case BOOL:
		t.Bool = make([]bool, n)
	case INT32:
		t.Int32 = make([]int32, n)
	case INT64:
		t.Int64 = make([]int64, n)
	case FP32:
		t.FP32 = make([]float32, n)
	case FP64:
		t.FP64 = make([]float64, n)
	case BYTES:
		t.Bytes = make([][]byte, n)
	}
	return t
}

// SetFloat64 sets element i of a numeric tensor, converting v.
func (t *Tensor) SetFloat64(i int, v float64) {
	switch t.DataType {
	case INT32:
		t.Int32[i] = int32(v)
	case INT64:
		t.Int64[i] = int64(v)
	case FP32:
		t.FP32[i] = float32(v)
	case FP64:
		t.FP64[i] = v
	case BOOL:
		t.Bool[i] = v != 0
	}
}

// MaxElements bounds the element count of any one tensor, so that a shape
// cannot make the server allocate without bound.
const MaxElements = 1 << 28

// Elements is the product of shape's dimensions. It fails on a negative
// dimension or a product above MaxElements.
func Elements(shape []int64) (int64, error) {
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is %d: dimensions are not negative", i, d)
		}
		if d != 0 && n > MaxElements/d {
			return 0, fmt.Errorf("more than %d elements", MaxElements)
		}
		n *= d
	}
	return n, nil
}

// Spec describes one model input or output: its datatype and its shape, where
// -1 is a dimension of any size (the batch, usually).
type Spec struct {
	Name     string
	DataType DataType
	Shape    []int64
}

// Finite reports whether every element of a floating-point tensor is finite.
func (t *Tensor) Finite() bool {
	switch t.DataType {
	case FP32:
		for _, v := range t.FP32 {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return false
			}
		}
	case FP64:
		for _, v := range t.FP64 {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}

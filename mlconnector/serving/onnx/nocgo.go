//go:build !cgo

package onnx

import (
	"fmt"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
)

// Available reports whether this build can run ONNX models.
const Available = false

// Format is the registry name of ONNX models.
const Format = "onnx"

// Register adds an "onnx" format that refuses every model: this build has
// no cgo, so no ONNX Runtime.
func Register(r *model.Registry, _ string) {
	r.Register(Format, func(path string, _ model.Options) (model.Model, error) {
		return nil, fmt.Errorf("ONNX models need ONNX Runtime, which this build (without cgo) does not have: serve %s with the cgo image: %w", path, model.ErrUnavailable)
	})
}

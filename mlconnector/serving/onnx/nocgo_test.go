//go:build !cgo

package onnx

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/servingtest"
)

// TestWithoutCgoONNXIsRefusedWithTheReason: the static build serves tree
// models only and says why it cannot serve an ONNX one.
func TestWithoutCgoONNXIsRefusedWithTheReason(t *testing.T) {
	r := model.NewRegistry()
	Register(r, "libonnxruntime.so.1")
	_, err := r.Load("", servingtest.Path("iris_mlp.onnx"), model.Options{})
	if !errors.Is(err, model.ErrUnavailable) || !strings.Contains(err.Error(), "without cgo") {
		t.Fatalf("error %v", err)
	}
}

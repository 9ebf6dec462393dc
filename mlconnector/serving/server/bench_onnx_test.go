//go:build cgo

package server

import (
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/tensor"
)

func BenchmarkONNXModels(b *testing.B) {
	benchModel(b, onnxRegistry(b), "iris_mlp.onnx", "iris_mlp", []tensor.Spec{{Name: "input", DataType: tensor.FP32}})
	benchModel(b, onnxRegistry(b), "diabetes_linear.onnx", "diabetes_linear", []tensor.Spec{
		{Name: "clinical", DataType: tensor.FP64}, {Name: "serum", DataType: tensor.FP64}})
}

// Package onnx serves ONNX models through ONNX Runtime
// (github.com/yalue/onnxruntime_go, cgo; the shared library
// libonnxruntime.so.1 is loaded at run time). Without cgo the package
// builds too and its "onnx" format refuses every model with a clear error,
// so the server still serves tree models (see package trees).
//
// Inputs and outputs are the model's own, with their names, datatypes
// (FP32, FP64, INT32, INT64, BOOL, BYTES) and shapes (-1 for a symbolic
// dimension). A model with a "label" and a "probabilities" (or
// "output_label" and "output_probability") output is a classifier; one with
// a single numeric output a regressor. Non-tensor outputs (scikit-learn's
// ZipMap) are refused at load.
package onnx

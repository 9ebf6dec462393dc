// Package oip is the JSON codec of the Open Inference Protocol v2 (the REST
// form KServe, Triton and MLServer speak): inference requests decoded into
// typed tensors with every problem reported by field path, requests checked
// against a model's input specs, and responses and model metadata encoded.
//
// Request body (POST /v2/models/{name}/infer):
//
//	{"id": "r1", "parameters": {...},
//	 "inputs": [{"name": "input", "shape": [2, 4], "datatype": "FP32",
//	             "data": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}],
//	 "outputs": [{"name": "probabilities"}]}
//
// data is row-major, flat or nested; its element count must equal the
// product of shape. Datatypes: BOOL, INT32, INT64, FP32, FP64, BYTES
// (strings). binary_data extensions are not supported.
package oip

// Package server is the model server's HTTP API: the Open Inference
// Protocol v2 REST endpoints for the one model it serves, an explain
// extension, health and Prometheus metrics.
//
//	GET  /v2/health/live              200 {"live": true}
//	GET  /v2/health/ready             200 {"ready": true} once the model is loaded, 503 before
//	GET  /healthz, /readyz            the same, for Kubernetes probes
//	GET  /v2                          server metadata (name, version, extensions)
//	GET  /v2/models/{name}            model metadata: platform, inputs and outputs
//	                                  (name, datatype, shape with -1 for any size),
//	                                  parameters {kind, features, explain_output}
//	GET  /v2/models/{name}/ready      200 {"name", "ready": true}, 503 while loading
//	POST /v2/models/{name}/infer      OIP inference (see package oip)
//	POST /v2/models/{name}/explain    Shapley values of one input (below)
//	GET  /metrics                     Prometheus metrics
//
// Each /v2/models/{name}/... path also answers under
// /v2/models/{name}/versions/{version}/...; another name or version is a
// 404. Every client error is a 4xx whose body is
// {"error": "...", "problems": [{"field": "inputs[0].shape", "message": "..."}]}:
// 400 for a malformed or invalid request, 404 for an unknown model, 413 for
// a body over the limit, 422 when the model cannot evaluate a valid request
// (its runtime refuses the input, or the result is NaN or infinite), 503
// while the model loads.
//
// Explain request (inputs as for infer, one row):
//
//	{"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}],
//	 "output": "probabilities",  // default: the probabilities of a classifier, the prediction of a regressor
//	 "method": "auto",           // auto (exact up to 10 features, else sampling), exact, sampling
//	 "permutations": 0,          // sampling: permutations to evaluate (0: from a budget of 400,000 rows)
//	 "seed": 0,                  // sampling: seed of the permutations
//	 "background_size": 0}       // rows of the background to use (0: all loaded, --background-size)
//
// Explain response: for each output value k (a class, or the prediction)
// sum_i shapley_values[i][k] = prediction[k] - base_value[k].
//
//	{"model_name": "iris", "model_version": "1", "output": "probabilities",
//	 "method": "exact", "features": ["sepal_length", ...],
//	 "base_value": [0.33, 0.33, 0.34], "prediction": [0.97, 0.02, 0.01],
//	 "shapley_values": [[0.2, -0.1, -0.1], ...],  // [feature][output value]
//	 "standard_errors": [[...], ...],              // sampling only
//	 "permutations": 0, "evaluations": 16384, "background_rows": 16}
package server

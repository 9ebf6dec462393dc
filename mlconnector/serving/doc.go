// Package serving is the root of the model server's packages (see
// README.md beside this file): app (the modelserver command), server (the
// Open Inference Protocol API and the explain extension), oip (the codec),
// tensor, model (formats), onnx, trees, explain (Shapley values) and fetch
// (the init container's downloader).
package serving

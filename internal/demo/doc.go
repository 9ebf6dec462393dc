// Package demo is the project's demo workload: upstream's test application
// (a server and a client exchanging messages, with counters and latency as
// metrics) redone in Go, one binary with two modes.
//
// The client sends a numbered message to the server every interval over a
// TCP connection and waits for the server's reply; it reconnects when the
// connection breaks (the server moved). Both export Prometheus metrics on
// their metrics port (/metrics, plus /healthz and /readyz): counters of
// messages, replies and errors, latency histograms, and gauges over a
// sliding window that QoS targets can name directly:
//
//	demo_server_latency_seconds   mean time the server took per message
//	demo_client_latency_seconds   mean round trip seen by the client
//	demo_client_error_ratio       share of failed exchanges
//
// A window with no message has no mean: the gauge reads NaN, which the
// node agent's scraper skips, so a silent component shows no value rather
// than a perfect one.
//
// Degradation is a knob set at run time and keyed by node name: each pod
// knows its node (NODE_NAME, from the downward API), keeps every setting it
// is given, and applies only its own node's. A setting adds latency (a
// sleep) and CPU burn (a busy loop) to each message the server handles. It
// is given with --degrade node=latency[/burn],... at start, or through the
// admin endpoint PUT /degrade of the metrics port when --admin is set, so
// that a test or a demo can degrade "the node the server runs on" and see
// the agents move it away.
package demo

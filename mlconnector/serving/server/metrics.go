package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rows        prometheus.Counter
	ready       prometheus.Gauge
	evaluations prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, name string) *metrics {
	labels := prometheus.Labels{"model": name}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelserver_requests_total", Help: "Requests to the model endpoints, by endpoint and HTTP status code.",
			ConstLabels: labels}, []string{"endpoint", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modelserver_request_duration_seconds", Help: "Time to answer a model endpoint request, by endpoint.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14)}, []string{"endpoint"}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "modelserver_inference_rows_total", Help: "Rows (batch entries) inferred.", ConstLabels: labels}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modelserver_model_ready", Help: "1 once the model is loaded and served.", ConstLabels: labels}),
		evaluations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "modelserver_explain_evaluations_total", Help: "Model evaluations (rows) made by explanations.", ConstLabels: labels}),
	}
	reg.MustRegister(m.requests, m.duration, m.rows, m.ready, m.evaluations)
	return m
}

func (m *metrics) observe(endpoint string, code int, d time.Duration) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(endpoint).Observe(d.Seconds())
}

package messaging

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one client. Every series carries the agent's JID as a constant
// label, so several clients (tests, benchmarks, a service with two accounts)
// can share a registry.
type metrics struct {
	sent                *prometheus.CounterVec
	received            *prometheus.CounterVec
	acked               prometheus.Counter
	retried             *prometheus.CounterVec
	failed              *prometheus.CounterVec
	droppedUnauthorized *prometheus.CounterVec
	dropped             *prometheus.CounterVec
	duplicates          prometheus.Counter
	reconnects          prometheus.Counter
	connected           prometheus.Gauge
	authFailures        *prometheus.CounterVec
	authFailing         prometheus.Gauge
	handlerErrors       *prometheus.CounterVec
	peerEvents          *prometheus.CounterVec
	probes              *prometheus.CounterVec
	queueDepth          prometheus.GaugeFunc
	transit             *prometheus.HistogramVec
}

func newMetrics(agent string, depth func() float64) *metrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "mlsysops", Subsystem: "messaging", Name: name, Help: help,
			ConstLabels: prometheus.Labels{"agent": agent}}
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(opts(name, help)))
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts(opts(name, help)), labels)
	}
	return &metrics{
		sent:                vec("sent_total", "Messages written to the server, re-sends included.", "type"),
		received:            vec("received_total", "Well-formed messages received, before authorization.", "type"),
		acked:               counter("acked_total", "Reliable messages acknowledged by their receiver."),
		retried:             vec("retried_total", "Re-sends of unacknowledged reliable messages.", "type"),
		failed:              vec("delivery_failed_total", "Messages whose delivery failed, by reason.", "reason"),
		droppedUnauthorized: vec("dropped_unauthorized_total", "Messages refused because the sender may not send them.", "type"),
		dropped:             vec("dropped_total", "Incoming messages dropped for other reasons (malformed, expired, overflow, bounced).", "reason"),
		duplicates:          counter("duplicates_total", "Incoming messages already handled, dropped and acknowledged again."),
		reconnects:          counter("reconnects_total", "Sessions re-established after the previous one ended."),
		connected:           prometheus.NewGauge(prometheus.GaugeOpts(opts("connected", "1 while a session is established."))),
		authFailures:        vec("auth_failures_total", "Failed logins, by reason: refused (by the server: missing account or another password) or no_password (the password file cannot be read).", "reason"),
		authFailing:         prometheus.NewGauge(prometheus.GaugeOpts(opts("auth_failing", "1 from a failed login to the next accepted one."))),
		handlerErrors:       vec("handler_errors_total", "Handlers that returned an error or panicked.", "type"),
		peerEvents:          vec("peer_events_total", "Liveness transitions of parents and children.", "state"),
		probes:              vec("liveness_probes_total", "Pings to children silent for the liveness timeout whose session the server showed up, by result: answered (still there), unreachable (the server answered it is not connected), unanswered or failed.", "result"),
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("queue_depth",
			"Messages held: queued, in flight or awaiting acknowledgement.")), depth),
		transit: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mlsysops", Subsystem: "messaging", Name: "transit_seconds",
			Help: "Time from a message's creation (the sender's clock, re-sends included) to its receipt, by type.",
			// 0.5 ms to 2 minutes.
			Buckets:     prometheus.ExponentialBuckets(0.0005, 2, 19),
			ConstLabels: prometheus.Labels{"agent": agent},
		}, []string{"type"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.sent, m.received, m.acked, m.retried, m.failed, m.droppedUnauthorized,
		m.dropped, m.duplicates, m.reconnects, m.connected, m.authFailures, m.authFailing, m.handlerErrors, m.peerEvents, m.probes, m.queueDepth, m.transit}
}

func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	var errs []error
	for _, c := range m.collectors() {
		if err := r.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				// A client for the same agent was registered before (a
				// restart within one process): the old series live on.
				continue
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *metrics) unregister(r prometheus.Registerer) {
	if r == nil {
		return
	}
	for _, c := range m.collectors() {
		r.Unregister(c)
	}
}

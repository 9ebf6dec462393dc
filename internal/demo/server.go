package demo

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Server answers the client's messages: one line in, one line out, after
// the degradation of its node.
type Server struct {
	log      *slog.Logger
	degrader *Degrader
	window   *window
	work     int

	messages   prometheus.Counter
	processing prometheus.Histogram
}

// NewServer returns a server that computes work rounds of SHA-256 per
// message (see Options.Work), whose metrics are registered on reg.
func NewServer(log *slog.Logger, d *Degrader, work int, span time.Duration, reg prometheus.Registerer) (*Server, error) {
	s := &Server{
		log: log, degrader: d, window: newWindow(span, nil), work: work,
		messages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "demo_server_messages_total", Help: "Messages the server answered.",
		}),
		processing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "demo_server_processing_seconds", Help: "Time the server took to answer one message.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
		}),
	}
	latency := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "demo_server_latency_seconds",
		Help: "Mean time the server took per message over the window; NaN without messages.",
	}, s.window.mean)
	for _, c := range []prometheus.Collector{s.messages, s.processing, latency, degradeCollector(d)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register server metrics: %w", err)
		}
	}
	return s, nil
}

// Serve takes connections on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(ctx, conn)
		}()
	}
}

// handle answers the messages of one connection: "msg <n>" gets "ack <n>"
// once the server did its work and its node's degradation.
func (s *Server) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	r := bufio.NewScanner(conn)
	r.Buffer(make([]byte, 4096), 64<<10)
	for r.Scan() {
		start := time.Now()
		line := strings.TrimSpace(r.Text())
		seq, ok := strings.CutPrefix(line, "msg ")
		if !ok {
			_, _ = fmt.Fprintf(conn, "err want \"msg <n>\"\n")
			continue
		}
		digestSink = digest(seq, s.work)
		s.degrader.Apply(ctx.Done())
		// The time is the server's, taken before the reply: a client that
		// gave up waiting (its timeout) still leaves the slow answer in
		// the metrics, so a starved server shows its latency rather than
		// no value.
		took := time.Since(start).Seconds()
		s.messages.Inc()
		s.processing.Observe(took)
		s.window.add(took)
		if _, err := fmt.Fprintf(conn, "ack %s\n", seq); err != nil {
			return
		}
	}
}

// digest is the server's work on a message: rounds of SHA-256 chained
// from it.
func digest(msg string, rounds int) [sha256.Size]byte {
	sum := sha256.Sum256([]byte(msg))
	for i := 0; i < rounds; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

// digestSink keeps the work from being optimised away.
var digestSink [sha256.Size]byte

// degradeCollector exports the node's degradation:
// demo_degrade_latency_seconds and demo_degrade_burn_seconds.
func degradeCollector(d *Degrader) prometheus.Collector {
	return collectorFunc{
		descs: []*prometheus.Desc{degradeLatencyDesc, degradeBurnDesc},
		collect: func(ch chan<- prometheus.Metric) {
			s := d.Effective()
			ch <- prometheus.MustNewConstMetric(degradeLatencyDesc, prometheus.GaugeValue, s.Latency.Seconds())
			ch <- prometheus.MustNewConstMetric(degradeBurnDesc, prometheus.GaugeValue, s.Burn.Seconds())
		},
	}
}

var (
	degradeLatencyDesc = prometheus.NewDesc("demo_degrade_latency_seconds", "Latency added to each message on this node.", nil, nil)
	degradeBurnDesc    = prometheus.NewDesc("demo_degrade_burn_seconds", "CPU time burnt for each message on this node.", nil, nil)
)

type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

package demo

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Client sends a message to the server every interval and waits for its
// answer, over one connection it opens again when it breaks.
type Client struct {
	log      *slog.Logger
	server   string
	interval time.Duration
	timeout  time.Duration
	rtt      *window

	sent, replies, errs prometheus.Counter
	roundTrip           prometheus.Histogram

	conn   net.Conn
	reader *bufio.Reader
	seq    uint64
	// failing is set while exchanges fail, to log the change only.
	failing bool
}

// NewClient returns a client of server whose metrics are registered on
// reg.
func NewClient(log *slog.Logger, server string, interval, timeout, span time.Duration, reg prometheus.Registerer) (*Client, error) {
	c := &Client{
		log: log, server: server, interval: interval, timeout: timeout, rtt: newWindow(span, nil),
		sent:    prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_client_messages_sent_total", Help: "Messages the client sent."}),
		replies: prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_client_replies_total", Help: "Answers the client received."}),
		errs:    prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_client_errors_total", Help: "Exchanges that failed (connect, send, answer or timeout)."}),
		roundTrip: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "demo_client_round_trip_seconds", Help: "Time from sending a message to its answer.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
		}),
	}
	latency := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "demo_client_latency_seconds", Help: "Mean round trip over the window; NaN without answers.",
	}, c.rtt.mean)
	ratio := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "demo_client_error_ratio", Help: "Share of failed exchanges over the window; NaN without exchanges.",
	}, c.rtt.failureRatio)
	for _, m := range []prometheus.Collector{c.sent, c.replies, c.errs, c.roundTrip, latency, ratio} {
		if err := reg.Register(m); err != nil {
			return nil, fmt.Errorf("register client metrics: %w", err)
		}
	}
	return c, nil
}

// Run exchanges messages until ctx ends.
func (c *Client) Run(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	defer c.close()
	for {
		err := c.exchange(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			c.errs.Inc()
			c.rtt.fail()
			c.close()
			if !c.failing {
				c.log.Warn("exchange with the server failed", "server", c.server, "err", err)
			}
			c.failing = true
		case c.failing:
			c.log.Info("exchanges with the server succeed again", "server", c.server)
			c.failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// exchange sends one message and reads its answer.
func (c *Client) exchange(ctx context.Context) error {
	deadline := time.Now().Add(c.timeout)
	if c.conn == nil {
		d := net.Dialer{Deadline: deadline}
		conn, err := d.DialContext(ctx, "tcp", c.server)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		c.conn, c.reader = conn, bufio.NewReader(conn)
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return err
	}
	c.seq++
	start := time.Now()
	if _, err := fmt.Fprintf(c.conn, "msg %d\n", c.seq); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	c.sent.Inc()
	line, err := c.reader.ReadString('\n')
	if err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if want := fmt.Sprintf("ack %d", c.seq); strings.TrimSpace(line) != want {
		return fmt.Errorf("answer %q, want %q", strings.TrimSpace(line), want)
	}
	took := time.Since(start).Seconds()
	c.replies.Inc()
	c.roundTrip.Observe(took)
	c.rtt.add(took)
	return nil
}

func (c *Client) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn, c.reader = nil, nil
	}
}

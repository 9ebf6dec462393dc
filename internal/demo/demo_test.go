package demo

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
)

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mode   string
		modify func(*Options)
		want   []string
	}{
		"server defaults":       {mode: ModeServer},
		"client with a server":  {mode: ModeClient, modify: func(o *Options) { o.Server = "10.0.0.1:7070" }},
		"client finds its peer": {mode: ModeClient},
		"bad mode":              {mode: "proxy", want: []string{`mode "proxy"`}},
		"everything wrong": {mode: ModeClient, modify: func(o *Options) {
			o.MetricsListen, o.Server, o.Interval, o.Timeout, o.Window, o.Degrade = "9090", "nohost", 0, -1, 0, "edge-1=fast,=1s"
		}, want: []string{"--metrics-listen", "--server", "--interval", "--timeout", "--window", "edge-1: latency", `"=1s"`}},
		"no way to find the server": {mode: ModeClient, modify: func(o *Options) { o.Peer = "" }, want: []string{"--server or --peer"}},
		"server listen":             {mode: ModeServer, modify: func(o *Options) { o.Listen = "7070" }, want: []string{"--listen"}},
		"negative work":             {mode: ModeServer, modify: func(o *Options) { o.Work = -1 }, want: []string{"--work -1"}},
		"too much work":             {mode: ModeServer, modify: func(o *Options) { o.Work = MaxWork + 1 }, want: []string{"--work"}},
		"no work":                   {mode: ModeServer, modify: func(o *Options) { o.Work = 0 }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := NewOptions(tc.mode, func(string) string { return "" })
			if tc.modify != nil {
				tc.modify(o)
			}
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate passed, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestDigest: the work is a fixed computation, so its result depends on
// the message and the rounds only.
func TestDigest(t *testing.T) {
	if digest("1", 100) != digest("1", 100) {
		t.Error("digest is not deterministic")
	}
	if digest("1", 100) == digest("2", 100) || digest("1", 100) == digest("1", 101) {
		t.Error("digest ignores the message or the rounds")
	}
	if digest("1", 0) != sha256.Sum256([]byte("1")) {
		t.Error("zero rounds is not the message's SHA-256")
	}
}

func TestParseSettings(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    map[string]Setting
		wantErr string
	}{
		"empty":            {in: "", want: map[string]Setting{}},
		"latency":          {in: "edge-1=200ms", want: map[string]Setting{"edge-1": {Latency: 200 * time.Millisecond}}},
		"milliseconds":     {in: "edge-1=150", want: map[string]Setting{"edge-1": {Latency: 150 * time.Millisecond}}},
		"latency and burn": {in: " a=1s/20ms , b=0s/5ms", want: map[string]Setting{"a": {Latency: time.Second, Burn: 20 * time.Millisecond}, "b": {Burn: 5 * time.Millisecond}}},
		"negative":         {in: "a=-1s", wantErr: "must not be negative"},
		"too long":         {in: "a=2m", wantErr: "at most 1m"},
		"no node":          {in: "200ms", wantErr: "want node=latency"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSettings(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServerFromEnv(t *testing.T) {
	cases := map[string]struct {
		env  map[string]string
		want string
	}{
		"service links win": {env: map[string]string{"SERVER_SERVICE_HOST": "10.96.0.7", "SERVER_SERVICE_PORT": "7070", "MLSYSOPS_PEER_SERVER_HOST": "server.mls-demo.svc", "MLSYSOPS_PEER_SERVER_PORT": "7070"}, want: "10.96.0.7:7070"},
		"peer variables":    {env: map[string]string{"MLSYSOPS_PEER_SERVER_HOST": "server.mls-demo.svc", "MLSYSOPS_PEER_SERVER_PORT": "7070"}, want: "server.mls-demo.svc:7070"},
		"nothing":           {env: map[string]string{"SERVER_SERVICE_HOST": "10.96.0.7"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ServerFromEnv("server", func(k string) string { return tc.env[k] })
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("ServerFromEnv = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newWindow(5*time.Second, func() time.Time { return now })
	if !math.IsNaN(w.mean()) || !math.IsNaN(w.failureRatio()) {
		t.Fatalf("empty window: mean %v ratio %v, want NaN", w.mean(), w.failureRatio())
	}
	w.add(0.1)
	w.add(0.3)
	w.fail()
	now = now.Add(2 * time.Second)
	w.add(0.2)
	if got := w.mean(); math.Abs(got-0.2) > 1e-9 {
		t.Errorf("mean = %v, want 0.2", got)
	}
	if got := w.failureRatio(); got != 0.25 {
		t.Errorf("failure ratio = %v, want 0.25", got)
	}
	now = now.Add(4 * time.Second) // the first three are older than 5s
	if got := w.mean(); got != 0.2 {
		t.Errorf("mean after expiry = %v, want 0.2", got)
	}
	if got := w.failureRatio(); got != 0 {
		t.Errorf("ratio after expiry = %v, want 0", got)
	}
}

func TestDegraderByNode(t *testing.T) {
	d := NewDegrader("edge-1", map[string]Setting{"edge-2": {Latency: time.Second}})
	if !d.Effective().Zero() {
		t.Fatalf("edge-1 degraded by edge-2's setting: %v", d.Effective())
	}
	srv := newHTTP(t, d)
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"node": "edge-1", "latency": "150ms"}`, 200, `"latency": "150ms"`},
		{`{"latency": "0s", "burn": "2ms"}`, 200, `"burn": "2ms"`},
		{`{"node": "edge-1", "latency": "soon", "burn": "-1s"}`, 400, "latency"},
		{`{"node": "edge-1", "latency": "soon", "burn": "-1s"}`, 400, "burn"},
		{`{"nodes": "edge-1"}`, 400, "unknown field"},
	} {
		status, body := do(t, http.MethodPut, srv+"/degrade", tc.body)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("PUT %s: %d %s; want %d with %q", tc.body, status, body, tc.status, tc.want)
		}
	}
	if got, want := d.Effective(), (Setting{Burn: 2 * time.Millisecond}); got != want {
		t.Errorf("effective = %v, want %v", got, want)
	}
	if status, body := do(t, http.MethodDelete, srv+"/degrade", ""); status != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d %s", status, body)
	}
}

// TestServerAndClient runs both modes on loopback: the client's messages
// are answered, the gauges carry the window's means, and degrading the
// server's node shows in its latency gauge at once.
func TestServerAndClient(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srvPort, srvMetrics, cliMetrics := freePort(t), freePort(t), freePort(t)
	so := NewOptions(ModeServer, func(string) string { return "" })
	so.Node, so.Listen, so.MetricsListen, so.Admin, so.Window = "n1", srvPort, srvMetrics, true, time.Second
	co := NewOptions(ModeClient, func(string) string { return "" })
	co.Node, co.Server, co.MetricsListen, co.Interval, co.Window = "n2", srvPort, cliMetrics, 20*time.Millisecond, time.Second
	done := make(chan error, 2)
	go func() { done <- Run(ctx, so, log) }()
	go func() { done <- Run(ctx, co, log) }()

	waitMetric(t, "http://"+srvMetrics+"/metrics", "demo_server_messages_total", func(v float64) bool { return v >= 5 })
	waitMetric(t, "http://"+cliMetrics+"/metrics", "demo_client_error_ratio", func(v float64) bool { return v == 0 })
	waitMetric(t, "http://"+srvMetrics+"/metrics", "demo_server_latency_seconds", func(v float64) bool { return v < 0.05 })

	if status, body := do(t, http.MethodPut, "http://"+srvMetrics+"/degrade", `{"node": "n1", "latency": "80ms"}`); status != 200 {
		t.Fatalf("degrade: %d %s", status, body)
	}
	waitMetric(t, "http://"+srvMetrics+"/metrics", "demo_server_latency_seconds", func(v float64) bool { return v >= 0.08 })
	waitMetric(t, "http://"+cliMetrics+"/metrics", "demo_client_latency_seconds", func(v float64) bool { return v >= 0.08 })
	waitMetric(t, "http://"+srvMetrics+"/metrics", "demo_degrade_latency_seconds", func(v float64) bool { return v == 0.08 })

	cancel()
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newHTTP(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/degrade", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitMetric polls a metrics endpoint until the metric's value passes ok.
func waitMetric(t *testing.T, url, name string, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last := "not scraped"
	for time.Now().Before(deadline) {
		v, err := scrape(url, name)
		if err == nil && ok(v) {
			return
		}
		last = fmt.Sprintf("%v (err %v)", v, err)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s at %s: last %s", name, url, last)
}

func scrape(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	f, ok := fams[name]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("no %s", name)
	}
	m := f.GetMetric()[0]
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue(), nil
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), nil
	}
	return 0, fmt.Errorf("%s: not a counter or gauge", name)
}

// BenchmarkServerWork is the server's CPU time per message at the default
// work (one core, no contention).
func BenchmarkServerWork(b *testing.B) {
	for i := 0; i < b.N; i++ {
		digestSink = digest(strconv.Itoa(i), DefaultWork)
	}
}

package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestIntervals(t *testing.T) {
	type op struct {
		requester string
		d         time.Duration // zero: remove
		remove    bool
		want      time.Duration
		changed   bool
	}
	cases := map[string]struct {
		fallback time.Duration
		ops      []op
	}{
		"fallback until something is requested": {
			fallback: 5 * time.Second,
			ops: []op{
				{requester: "default", d: 5 * time.Second, want: 5 * time.Second},
				{requester: "policy:cpu", d: time.Second, want: time.Second, changed: true},
				{requester: "policy:relocate", d: 2 * time.Second, want: time.Second},
			},
		},
		"removing the smallest reverts to the next smallest": {
			fallback: 5 * time.Second,
			ops: []op{
				{requester: "default", d: 5 * time.Second, want: 5 * time.Second},
				{requester: "a", d: time.Second, want: time.Second, changed: true},
				{requester: "b", d: 2 * time.Second, want: time.Second},
				{requester: "a", remove: true, want: 2 * time.Second, changed: true},
				{requester: "b", remove: true, want: 5 * time.Second, changed: true},
				{requester: "default", remove: true, want: 5 * time.Second},
			},
		},
		"removing twice is harmless (upstream raised KeyError)": {
			fallback: 5 * time.Second,
			ops: []op{
				{requester: "a", d: time.Second, want: time.Second, changed: true},
				{requester: "a", remove: true, want: 5 * time.Second, changed: true},
				{requester: "a", remove: true, want: 5 * time.Second},
				{requester: "never", remove: true, want: 5 * time.Second},
			},
		},
		"a requester may slow down again": {
			fallback: 10 * time.Second,
			ops: []op{
				{requester: "a", d: time.Second, want: time.Second, changed: true},
				{requester: "a", d: 3 * time.Second, want: 3 * time.Second, changed: true},
			},
		},
		"too short requests are raised to the minimum": {
			fallback: time.Second,
			ops: []op{
				{requester: "zero", d: 0, want: MinInterval, changed: true},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			iv := NewIntervals(tc.fallback)
			for i, o := range tc.ops {
				var changed bool
				if o.remove {
					changed = iv.Remove(o.requester)
				} else {
					changed = iv.Request(o.requester, o.d)
				}
				if got := iv.Current(); got != o.want || changed != o.changed {
					t.Fatalf("op %d (%s): current %s changed %v, want %s changed %v", i, o.requester, got, changed, o.want, o.changed)
				}
			}
		})
	}
}

func TestStore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewStore(10*time.Second, 3)
	s.Append(t0, []Reading{
		{Name: "node_load1", Value: 1},
		{Name: "node_cpu_core_utilisation_ratio", Labels: Labels{"cpu": "1"}, Value: 0.1},
		{Name: "node_cpu_core_utilisation_ratio", Labels: Labels{"cpu": "0"}, Value: 0.2},
	})
	for i := 1; i <= 4; i++ {
		s.Append(t0.Add(time.Duration(i)*time.Second), []Reading{{Name: "node_load1", Value: float64(i + 1)}})
	}

	// At most 3 points per series.
	got := s.Range("node_load1", nil, time.Time{})
	want := []Point{{t0.Add(2 * time.Second), 3}, {t0.Add(3 * time.Second), 4}, {t0.Add(4 * time.Second), 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("range (-want +got):\n%s", diff)
	}
	if p, ok := s.Latest("node_load1", nil); !ok || p.Value != 5 {
		t.Errorf("latest = %v %v, want 5", p, ok)
	}
	// Several series match: the first by key wins; a label picks one.
	if p, _ := s.Latest("node_cpu_core_utilisation_ratio", nil); p.Value != 0.2 {
		t.Errorf("latest of any cpu = %v, want cpu 0's 0.2", p.Value)
	}
	if p, _ := s.Latest("node_cpu_core_utilisation_ratio", Labels{"cpu": "1"}); p.Value != 0.1 {
		t.Errorf("latest of cpu 1 = %v, want 0.1", p.Value)
	}
	if _, ok := s.Latest("node_cpu_core_utilisation_ratio", Labels{"cpu": "7"}); ok {
		t.Error("found a series for cpu 7")
	}
	if diff := cmp.Diff([]string{"node_cpu_core_utilisation_ratio", "node_load1"}, s.Names()); diff != "" {
		t.Errorf("names: %s", diff)
	}
	if sel := s.Select("node_cpu_core_utilisation_ratio", nil, time.Time{}); len(sel) != 2 || sel[0].Labels["cpu"] != "0" {
		t.Errorf("select = %+v", sel)
	}

	// Series not updated within the retention disappear.
	s.Append(t0.Add(12*time.Second), []Reading{{Name: "node_load1", Value: 9}})
	if diff := cmp.Diff([]string{"node_load1"}, s.Names()); diff != "" {
		t.Errorf("names after expiry: %s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"node_load1": 9}, s.Values()); diff != "" {
		t.Errorf("values: %s", diff)
	}
	if diff := cmp.Diff(`m{a="x",b="y \"q\""}`, Key("m", Labels{"b": `y "q"`, "a": "x"})); diff != "" {
		t.Errorf("key: %s", diff)
	}
}

// countingSource counts its collections and returns one reading each.
type countingSource struct {
	name   string
	n      atomic.Int64
	err    error
	mu     sync.Mutex
	wanted []string
}

func (c *countingSource) Name() string { return c.name }
func (c *countingSource) Collect(_ context.Context, wanted []string) ([]Reading, error) {
	n := c.n.Add(1)
	c.mu.Lock()
	c.wanted = wanted
	c.mu.Unlock()
	return []Reading{{Name: c.name + "_count", Value: float64(n)}}, c.err
}

func TestSamplerSample(t *testing.T) {
	ok := &countingSource{name: "ok"}
	bad := &countingSource{name: "bad", err: errors.New("endpoint down")}
	var rounds []time.Time
	s := NewSampler(SamplerOptions{Interval: time.Second, OnSample: func(t time.Time) { rounds = append(rounds, t) }})
	s.AddSource(ok)
	s.AddSource(bad)
	s.Want("policy:a", []string{"b_metric", "a_metric"})
	s.Want("app:x", []string{"a_metric", "qos"})
	s.Want("policy:empty", nil)

	err := s.Sample(context.Background())
	if err == nil || err.Error() != "telemetry source bad: endpoint down" {
		t.Fatalf("error = %v", err)
	}
	// The failing source does not hide the working one.
	if p, found := s.Store().Latest("ok_count", nil); !found || p.Value != 1 {
		t.Errorf("ok_count = %v %v", p, found)
	}
	ok.mu.Lock()
	if diff := cmp.Diff([]string{"a_metric", "b_metric", "qos"}, ok.wanted); diff != "" {
		t.Errorf("wanted: %s", diff)
	}
	ok.mu.Unlock()
	s.Unwant("app:x")
	s.Unwant("app:x")
	if diff := cmp.Diff([]string{"a_metric", "b_metric"}, s.Wanted()); diff != "" {
		t.Errorf("wanted after unwant: %s", diff)
	}
	s.RemoveSource("bad")
	if err := s.Sample(context.Background()); err != nil {
		t.Errorf("sample without the bad source: %v", err)
	}
	if bad.n.Load() != 1 {
		t.Errorf("removed source collected %d times", bad.n.Load())
	}
	if len(rounds) != 2 || rounds[0].IsZero() {
		t.Errorf("OnSample called for rounds %v, want 2", rounds)
	}
}

// The loop keeps sampling across interval changes and stops with its
// context.
func TestSamplerRun(t *testing.T) {
	src := &countingSource{name: "c"}
	s := NewSampler(SamplerOptions{Interval: time.Hour})
	s.AddSource(src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()

	waitFor(t, "first sample at start", func() bool { return src.n.Load() >= 1 })
	// An hour-long interval would never sample again; a request for a
	// short one takes effect without waiting for the hour.
	s.RequestInterval("policy:fast", MinInterval)
	waitFor(t, "sampling at the requested interval", func() bool { return src.n.Load() >= 4 })
	s.RemoveInterval("policy:fast")
	if s.Interval() != time.Hour {
		t.Errorf("interval after removal = %s, want the fallback", s.Interval())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPrometheusSource(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(`# TYPE test_received_success_counter_total counter
test_received_success_counter_total{node_name="edge-1"} 42
# TYPE latency_seconds histogram
latency_seconds_bucket{le="1"} 3
latency_seconds_bucket{le="+Inf"} 4
latency_seconds_sum 2.5
latency_seconds_count 4
# TYPE node_load1 gauge
node_load1 0.7
# TYPE unrelated gauge
unrelated 1
`))
	}))
	defer srv.Close()
	src := NewPrometheusSource("otel", srv.URL, nil)
	got, err := src.Collect(context.Background(), []string{"latency_seconds", "missing", "node_load1", "test_received_success_counter"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Reading{
		{Name: "latency_seconds_count", Value: 4},
		{Name: "latency_seconds_sum", Value: 2.5},
		{Name: "node_load1", Value: 0.7},
		{Name: "test_received_success_counter", Labels: Labels{"node_name": "edge-1"}, Value: 42},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readings (-want +got):\n%s", diff)
	}
	if got, err := src.Collect(context.Background(), nil); err != nil || got != nil {
		t.Errorf("nothing wanted: %v %v", got, err)
	}

	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "collector starting", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	_, err = NewPrometheusSource("otel", broken.URL, nil).Collect(context.Background(), []string{"x"})
	if err == nil || err.Error() != "scrape "+broken.URL+": 503 Service Unavailable: collector starting" {
		t.Errorf("error = %v", err)
	}
}

package demo

import (
	"math"
	"sync"
	"time"
)

// window keeps the observations of the last span: the mean of their
// values and the share of failures. It is safe for concurrent use and
// bounded by max observations (the oldest go first).
type window struct {
	span time.Duration
	now  func() time.Time
	max  int

	mu  sync.Mutex
	obs []observation
}

type observation struct {
	at     time.Time
	value  float64
	failed bool
}

func newWindow(span time.Duration, now func() time.Time) *window {
	if now == nil {
		now = time.Now
	}
	return &window{span: span, now: now, max: 100000}
}

// add records a successful observation of value.
func (w *window) add(value float64) { w.record(observation{value: value}) }

// fail records a failed observation.
func (w *window) fail() { w.record(observation{failed: true}) }

func (w *window) record(o observation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o.at = w.now()
	w.obs = append(w.obs, o)
	if len(w.obs) > w.max {
		w.obs = append(w.obs[:0:0], w.obs[len(w.obs)-w.max:]...)
	}
	w.expireLocked(o.at)
}

func (w *window) expireLocked(now time.Time) {
	cut := now.Add(-w.span)
	i := 0
	for i < len(w.obs) && !w.obs[i].at.After(cut) {
		i++
	}
	if i > 0 {
		w.obs = append(w.obs[:0:0], w.obs[i:]...)
	}
}

// mean is the mean value of the successful observations in the window,
// NaN when there are none.
func (w *window) mean() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expireLocked(w.now())
	sum, n := 0.0, 0
	for _, o := range w.obs {
		if !o.failed {
			sum += o.value
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// failureRatio is the share of failed observations in the window, NaN
// when there are none.
func (w *window) failureRatio() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expireLocked(w.now())
	if len(w.obs) == 0 {
		return math.NaN()
	}
	failed := 0
	for _, o := range w.obs {
		if o.failed {
			failed++
		}
	}
	return float64(failed) / float64(len(w.obs))
}

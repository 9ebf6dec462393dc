package testbed

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Burst is a burst of submissions made at once by concurrent clients (the
// benchmarks' and smoke tests' N applications): when each started, for
// the submission-to-Running latencies.
type Burst struct {
	// Start is when the first submission started.
	Start time.Time

	mu sync.Mutex
	at map[string]time.Time
	wg sync.WaitGroup
}

// StartBurst calls submit for every name in the background, at most
// concurrency at a time (in the order given), and reports a failed one
// to failed. Call Wait before the test ends.
func StartBurst(names []string, concurrency int, submit func(name string) error, failed func(name string, err error)) *Burst {
	b := &Burst{Start: time.Now(), at: make(map[string]time.Time, len(names))}
	sem := make(chan struct{}, max(concurrency, 1))
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for _, name := range names {
			sem <- struct{}{}
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer func() { <-sem }()
				b.mu.Lock()
				b.at[name] = time.Now()
				b.mu.Unlock()
				if err := submit(name); err != nil {
					failed(name, err)
				}
			}()
		}
	}()
	return b
}

// Since returns how long ago name's submission started; false when it
// has not (yet), or is not of the burst.
func (b *Burst) Since(name string) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.at[name]
	if !ok {
		return 0, false
	}
	return time.Since(at), true
}

// At returns when name's submission started; false when it has not
// (yet), or is not of the burst.
func (b *Burst) At(name string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.at[name]
	return at, ok
}

// Wait waits until every submission returned.
func (b *Burst) Wait() { b.wg.Wait() }

// EnvSizes reads the sizes a benchmark measures from the environment
// variable name (positive integers, comma separated), or returns def when
// it is unset; a malformed value fails the benchmark.
func EnvSizes(tb testing.TB, name string, def ...int) []int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			like := make([]string, len(def))
			for i, d := range def {
				like[i] = strconv.Itoa(d)
			}
			tb.Fatalf("%s=%q: want positive sizes, comma separated, like %s", name, v, strings.Join(like, ","))
		}
		out = append(out, n)
	}
	return out
}

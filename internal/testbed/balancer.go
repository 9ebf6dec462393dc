package testbed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Balancer is what a Kubernetes Service gives the replicas of a component
// in tests: one address, requests spread round-robin over the replicas
// whose readiness path answers 200 (checked every 100 ms, as endpoints
// follow readiness), and no retry: a request sent to a replica that drops
// it fails. It stops when the test ends.
type Balancer struct {
	*httptest.Server
	backends []*url.URL
	mu       sync.Mutex
	ready    []bool
	next     atomic.Uint64
	failed   atomic.Int64
}

// NewBalancer balances over the replicas listening on addrs (host:port,
// HTTP) whose readyPath answers 200.
func NewBalancer(t testing.TB, addrs []string, readyPath string) *Balancer {
	t.Helper()
	b := &Balancer{ready: make([]bool, len(addrs))}
	for _, a := range addrs {
		b.backends = append(b.backends, &url.URL{Scheme: "http", Host: a})
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			for i, be := range b.backends {
				rctx, rcancel := context.WithTimeout(ctx, time.Second)
				ok := httpGet(rctx, http.DefaultClient, be.String()+readyPath) == nil
				rcancel()
				b.mu.Lock()
				b.ready[i] = ok
				b.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		be := b.pick()
		if be == nil {
			b.failed.Add(1)
			http.Error(w, "no ready endpoint", http.StatusServiceUnavailable)
			return
		}
		p := httputil.NewSingleHostReverseProxy(be)
		p.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			b.failed.Add(1)
			http.Error(w, "endpoint "+be.Host+": "+err.Error(), http.StatusBadGateway)
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { cancel(); b.Close() })
	return b
}

func (b *Balancer) pick() *url.URL {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := uint64(len(b.backends))
	start := b.next.Add(1)
	for i := uint64(0); i < n; i++ {
		if j := (start + i) % n; b.ready[j] {
			return b.backends[j]
		}
	}
	return nil
}

// Failed is the number of requests the balancer could not forward (no
// ready replica, or the replica dropped the connection).
func (b *Balancer) Failed() int64 { return b.failed.Load() }

// AllReady reports whether every replica's readiness answered 200 at the
// last check.
func (b *Balancer) AllReady() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.ready {
		if !r {
			return false
		}
	}
	return true
}

// HTTPReady is a readiness check for a proc.Process: a GET of url
// answers 200.
func HTTPReady(url string) func(ctx context.Context) error { return httpReady(url) }

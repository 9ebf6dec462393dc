package messaging_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// commands records which of n numbered commands (ComponentPlaced with
// component "c-<number>") a node agent handled, and in which order, for
// the exactly-once tests.
type commands struct {
	n      int
	mu     sync.Mutex
	counts []int
	order  []int
}

// handleCommands registers the recording handler on c.
func handleCommands(c *messaging.Client, n int) *commands {
	r := &commands{n: n, counts: make([]int, n)}
	messaging.HandleFunc(c, func(ctx context.Context, env *messaging.Envelope, m *messaging.ComponentPlaced) (messaging.Message, error) {
		i, err := strconv.Atoi(strings.TrimPrefix(m.ComponentName, "c-"))
		if err != nil || i < 0 || i >= n {
			return nil, fmt.Errorf("unexpected component %q", m.ComponentName)
		}
		r.mu.Lock()
		r.counts[i]++
		r.order = append(r.order, i)
		r.mu.Unlock()
		return nil, nil
	})
	return r
}

// command is command i.
func command(i int) *messaging.ComponentPlaced {
	return &messaging.ComponentPlaced{Name: "app-1", ComponentName: fmt.Sprintf("c-%05d", i)}
}

// handled is the number of commands handled so far.
func (r *commands) handled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order)
}

// check waits for every delivery (the sender closes deliveries, and puts
// its error into sendErr), then wants every command handled exactly once,
// in the order sent.
func (r *commands) check(t *testing.T, ctx context.Context, deliveries <-chan *messaging.Delivery, sendErr <-chan error) {
	t.Helper()
	failed := 0
	for d := range deliveries {
		if err := d.Wait(ctx); err != nil {
			if failed < 5 {
				t.Errorf("delivery %s: %v", d.ID(), err)
			}
			failed++
		}
	}
	select {
	case err := <-sendErr:
		t.Fatal(err)
	default:
	}
	if failed > 0 {
		t.Fatalf("%d of %d deliveries failed", failed, r.n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.counts {
		if c != 1 {
			t.Errorf("command %d handled %d times, want exactly once", i, c)
		}
	}
	for k, i := range r.order {
		if i != k {
			t.Fatalf("handling order broken at position %d: got command %d", k, i)
		}
	}
}

package agent

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// GraceTracker decides which children count as gone: those not online for
// longer than the grace period. A child never seen since this agent
// started is measured from the start, so a restarting parent does not
// judge children before they had time to come back.
type GraceTracker struct {
	grace time.Duration
	start time.Time
	now   func() time.Time

	mu      sync.Mutex
	offline map[string]time.Time // child -> offline since
	online  map[string]bool
	gone    map[string]bool // as last reported through changed
	// changed is called (outside the lock) when the set of gone children
	// changes.
	changed func()
}

// NewGraceTracker tracks the named children; grace 0 disables it (no child
// is ever gone).
func NewGraceTracker(grace time.Duration, children []string, changed func()) *GraceTracker {
	g := &GraceTracker{grace: grace, now: time.Now, offline: map[string]time.Time{}, online: map[string]bool{}, gone: map[string]bool{}, changed: changed}
	g.start = g.now()
	for _, c := range children {
		g.offline[c] = g.start
	}
	return g
}

// Set records a child's liveness change.
func (g *GraceTracker) Set(child string, online bool, at time.Time) {
	g.mu.Lock()
	if online {
		g.online[child] = true
		delete(g.offline, child)
	} else if g.online[child] || g.offline[child].IsZero() {
		delete(g.online, child)
		g.offline[child] = at
	}
	g.mu.Unlock()
	g.check()
}

// Unavailable returns the children gone past the grace period with why.
func (g *GraceTracker) Unavailable() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.unavailableLocked(g.now())
}

func (g *GraceTracker) unavailableLocked(now time.Time) map[string]string {
	out := map[string]string{}
	if g.grace <= 0 {
		return out
	}
	for c, since := range g.offline {
		if d := now.Sub(since); d > g.grace {
			if since.Equal(g.start) {
				out[c] = fmt.Sprintf("its agent has not registered in the %s since this agent started", d.Round(time.Second))
			} else {
				out[c] = fmt.Sprintf("its agent has been gone for %s (grace period %s)", d.Round(time.Second), g.grace)
			}
		}
	}
	return out
}

// check calls changed when the gone set differs from the last one. It
// runs on every liveness change and compares without building the
// reasons: a connection storm of 1,000 children is 1,000 changes.
func (g *GraceTracker) check() {
	g.mu.Lock()
	now, n, same := g.now(), 0, true
	past := func(since time.Time) bool { return g.grace > 0 && now.Sub(since) > g.grace }
	for c, since := range g.offline {
		if past(since) {
			n++
			same = same && g.gone[c]
		}
	}
	same = same && n == len(g.gone)
	if !same {
		g.gone = make(map[string]bool, n)
		for c, since := range g.offline {
			if past(since) {
				g.gone[c] = true
			}
		}
	}
	g.mu.Unlock()
	if !same && g.changed != nil {
		g.changed()
	}
}

// GoneList is the sorted names of the children gone, for /status.
func (g *GraceTracker) GoneList() []string {
	var out []string
	for c := range g.Unavailable() {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Run checks once a second so that grace periods expire on time.
func (g *GraceTracker) Run(ctx context.Context) {
	if g.grace <= 0 {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.check()
		}
	}
}

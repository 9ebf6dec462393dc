package agent

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestGraceTracker(t *testing.T) {
	now := time.Unix(1000, 0)
	var changes atomic.Int32
	g := NewGraceTracker(time.Minute, []string{"a", "b"}, func() { changes.Add(1) })
	g.now = func() time.Time { return now }
	g.start = now
	for c := range g.offline {
		g.offline[c] = now
	}

	g.Set("a", true, now)
	now = now.Add(59 * time.Second)
	if got := g.Unavailable(); len(got) != 0 {
		t.Fatalf("within the grace period: %v", got)
	}
	now = now.Add(2 * time.Second)
	g.check()
	got := g.Unavailable()
	if len(got) != 1 || !strings.Contains(got["b"], "has not registered") {
		t.Fatalf("b never registered past the grace period: %v", got)
	}
	if changes.Load() != 1 {
		t.Errorf("%d change notifications, want 1", changes.Load())
	}
	g.check()
	if changes.Load() != 1 {
		t.Errorf("notified again without a change")
	}

	// a goes: gone only after its own grace period.
	g.Set("a", false, now)
	now = now.Add(30 * time.Second)
	if _, gone := g.Unavailable()["a"]; gone {
		t.Error("a gone before its grace period")
	}
	// A repeated offline event does not restart the clock.
	g.Set("a", false, now)
	now = now.Add(31 * time.Second)
	g.check()
	if why := g.Unavailable()["a"]; !strings.Contains(why, "gone for 1m1s") {
		t.Errorf("a: %q", why)
	}
	// Both come back.
	g.Set("a", true, now)
	g.Set("b", true, now)
	if got := g.Unavailable(); len(got) != 0 {
		t.Errorf("back online yet gone: %v", got)
	}
	if changes.Load() != 4 { // b gone, a gone, a back, b back
		t.Errorf("%d change notifications, want 4", changes.Load())
	}

	off := NewGraceTracker(0, []string{"a"}, nil)
	off.now = func() time.Time { return now.Add(time.Hour) }
	if got := off.Unavailable(); len(got) != 0 {
		t.Errorf("grace 0 must never take a child out: %v", got)
	}
}

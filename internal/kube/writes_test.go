package kube

import (
	"testing"
	"time"
)

func TestWrites(t *testing.T) {
	now := time.Unix(1000, 0)
	w := NewWrites(30 * time.Second)
	w.now = func() time.Time { return now }
	if w.Behind("a", "5") {
		t.Fatal("an object never written is behind")
	}
	w.Wrote("a", "10")
	w.Wrote("b", "20")
	if !w.Behind("a", "9") {
		t.Error("a copy older than the write is not behind")
	}
	if w.Behind("a", "10") {
		t.Error("the written copy is behind")
	}
	// Shown once: the entry is gone, an older copy (another informer's)
	// no longer waits.
	if w.Behind("a", "9") {
		t.Error("the entry outlived the copy that showed the write")
	}
	now = now.Add(29 * time.Second)
	if !w.Behind("b", "19") {
		t.Error("a write made 29 s ago (ttl 30 s) no longer holds an older copy")
	}
	now = now.Add(time.Second)
	if w.Behind("b", "19") {
		t.Error("a write made ttl ago still holds passes")
	}
	w.Wrote("b", "20")
	if w.Behind("b", "x") {
		t.Error("an unreadable resourceVersion waits")
	}
	w.Wrote("c", "30")
	w.Forget("c")
	if w.Behind("c", "1") {
		t.Error("a forgotten key is behind")
	}
	// Entries never asked about again go at the next write past their ttl.
	w.Wrote("d", "40")
	now = now.Add(time.Minute)
	w.Wrote("e", "50")
	if len(w.at) != 1 {
		t.Errorf("%d entries after a later write, want only the new one", len(w.at))
	}
}

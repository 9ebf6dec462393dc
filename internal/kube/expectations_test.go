package kube

import (
	"testing"
	"time"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(1000, 0)
	e := NewExpectations(30 * time.Second)
	e.now = func() time.Time { return now }
	if e.Pending("ns/a") {
		t.Fatal("a key never expected is pending")
	}
	e.Expect("ns/a")
	e.Expect("ns/b")
	if !e.Pending("ns/a") || !e.Pending("ns/b") {
		t.Fatal("created keys are not pending")
	}
	e.Seen("ns/a")
	if e.Pending("ns/a") {
		t.Error("a key the cache showed is still pending")
	}
	now = now.Add(29 * time.Second)
	if !e.Pending("ns/b") {
		t.Error("a key created 29 s ago (ttl 30 s) is not pending")
	}
	now = now.Add(time.Second)
	if e.Pending("ns/b") {
		t.Error("a key created ttl ago is still pending")
	}
	if e.Len() != 0 {
		t.Errorf("%d entries left, want the expired one dropped", e.Len())
	}
	// Entries never asked about again go at the next Expect past their ttl.
	e.Expect("ns/c")
	now = now.Add(time.Minute)
	e.Expect("ns/d")
	if e.Len() != 1 || !e.Pending("ns/d") {
		t.Errorf("%d entries after a later Expect, want only the new one", e.Len())
	}
	e.Expect("other/d")
	e.ForgetPrefix("ns/")
	if e.Pending("ns/d") || !e.Pending("other/d") {
		t.Error("ForgetPrefix(ns/) did not drop exactly the keys of ns")
	}
}

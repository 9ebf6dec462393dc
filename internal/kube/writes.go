package kube

import (
	"strconv"
	"sync"
	"time"
)

// Writes remembers, per key, the resourceVersion an object had after a
// controller's last write to it, for a while (ttl). A pass whose cache
// still shows an older copy would decide again on what that write
// replaced (a placement it made a moment before, say); with Behind, it
// stops instead, and the event of the write, once the cache shows it,
// brings the next pass. The ttl bounds the wait for a write the cache
// never shows (the object deleted and made again).
type Writes struct {
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	at map[string]written
}

type written struct {
	rv string
	at time.Time
}

// NewWrites returns an empty record whose entries last ttl.
func NewWrites(ttl time.Duration) *Writes {
	return &Writes{ttl: ttl, now: time.Now, at: map[string]written{}}
}

// Wrote records that the object of key was at resourceVersion rv after a
// write made now, and drops the entries past their ttl.
func (w *Writes) Wrote(key, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for k, e := range w.at {
		if now.Sub(e.at) >= w.ttl {
			delete(w.at, k)
		}
	}
	w.at[key] = written{rv: rv, at: now}
}

// Behind reports whether a copy of the object of key at resourceVersion
// rv is older than its last write, made less than ttl ago. A copy at or
// after the write drops the entry.
func (w *Writes) Behind(key, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.at[key]
	if !ok {
		return false
	}
	if !older(rv, e.rv) || w.now().Sub(e.at) >= w.ttl {
		delete(w.at, key)
		return false
	}
	return true
}

// older reports whether resourceVersion rv is before since; false when
// either is not an etcd revision (see SameOrNewer): then nothing can be
// told, and nothing waits.
func older(rv, since string) bool {
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(since, 10, 64)
	return errA == nil && errB == nil && a < b
}

// Forget drops key (the object is gone).
func (w *Writes) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.at, key)
}

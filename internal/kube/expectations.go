package kube

import (
	"strings"
	"sync"
	"time"
)

// Expectations remembers objects a controller created and its cache has
// not shown yet, for a while (ttl). A pass that reads the cache before
// it shows them would take them for missing: it decides again what an
// earlier pass decided a moment before, and its create fails
// (AlreadyExists) and is retried every few milliseconds for as long as
// the cache lags, seconds under load. With Pending, the pass stops
// instead and the object's add event brings the next one. The ttl bounds
// the wait for an object deleted before the cache ever showed it.
type Expectations struct {
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	at map[string]time.Time
}

// NewExpectations returns an empty set whose entries last ttl.
func NewExpectations(ttl time.Duration) *Expectations {
	return &Expectations{ttl: ttl, now: time.Now, at: map[string]time.Time{}}
}

// Expect records that key was created now, and drops the entries past
// their ttl (keys no pass asked about again: their objects' owners gone).
func (e *Expectations) Expect(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for k, at := range e.at {
		if now.Sub(at) >= e.ttl {
			delete(e.at, k)
		}
	}
	e.at[key] = now
}

// Seen drops key: the cache shows it.
func (e *Expectations) Seen(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.at, key)
}

// ForgetPrefix drops every key that starts with prefix (the objects of an
// owner that is gone: one made again under its name starts afresh).
func (e *Expectations) ForgetPrefix(prefix string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.at {
		if strings.HasPrefix(k, prefix) {
			delete(e.at, k)
		}
	}
}

// Pending reports whether key was created less than ttl ago and not seen
// since; an older entry is dropped.
func (e *Expectations) Pending(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.at[key]
	if ok && e.now().Sub(at) >= e.ttl {
		delete(e.at, key)
		return false
	}
	return ok
}

// Len is how many keys are pending or expired but not yet dropped.
func (e *Expectations) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.at)
}

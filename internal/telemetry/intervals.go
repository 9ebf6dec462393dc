package telemetry

import (
	"sort"
	"sync"
	"time"
)

// MinInterval is the shortest sampling interval the Sampler accepts; a
// shorter request (a policy asking for "0s") is raised to it so that one
// policy cannot make the monitor spin.
const MinInterval = 100 * time.Millisecond

// Intervals keeps the sampling intervals requesters ask for and yields the
// smallest. The zero value is not usable; use NewIntervals. It is safe for
// concurrent use.
type Intervals struct {
	mu       sync.Mutex
	fallback time.Duration
	requests map[string]time.Duration
}

// NewIntervals returns an empty set whose Current is fallback until
// something is requested.
func NewIntervals(fallback time.Duration) *Intervals {
	if fallback < MinInterval {
		fallback = MinInterval
	}
	return &Intervals{fallback: fallback, requests: map[string]time.Duration{}}
}

// Request records (or replaces) the interval requester asks for and tells
// whether Current changed. Intervals below MinInterval are raised to it.
func (i *Intervals) Request(requester string, d time.Duration) bool {
	if d < MinInterval {
		d = MinInterval
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	before := i.currentLocked()
	i.requests[requester] = d
	return i.currentLocked() != before
}

// Remove forgets requester's request and tells whether Current changed.
// Removing a requester that has no request does nothing, so it is safe to
// call for every policy or application that goes away.
func (i *Intervals) Remove(requester string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.requests[requester]; !ok {
		return false
	}
	before := i.currentLocked()
	delete(i.requests, requester)
	return i.currentLocked() != before
}

// Current returns the smallest requested interval, or the fallback when
// nothing is requested.
func (i *Intervals) Current() time.Duration {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.currentLocked()
}

func (i *Intervals) currentLocked() time.Duration {
	if len(i.requests) == 0 {
		return i.fallback
	}
	var min time.Duration
	for _, d := range i.requests {
		if min == 0 || d < min {
			min = d
		}
	}
	return min
}

// Requests returns a copy of the requests, for reports.
func (i *Intervals) Requests() map[string]time.Duration {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make(map[string]time.Duration, len(i.requests))
	for k, v := range i.requests {
		out[k] = v
	}
	return out
}

// Requesters returns the names of the requesters, sorted.
func (i *Intervals) Requesters() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]string, 0, len(i.requests))
	for k := range i.requests {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

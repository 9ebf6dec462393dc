package policy

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"
)

// The memory governor bounds what a policy call builds step by step
// (appending in a loop, doubling a string). Go cannot count one
// goroutine's allocations, so it watches the process: while calls run it
// samples the heap; when the heap has grown past a call's limit since the
// call started, it collects garbage and, if the live heap is still past
// the limit, stops the calls that have been running since before the
// previous sample. A quick call of another policy (the usual case: calls
// take milliseconds) is thus not blamed for a slow one's growth; a slow
// call running beside a hostile one may be, and fails that one call.

// governorTick is how often the governor samples the heap while calls run.
const governorTick = 5 * time.Millisecond

// governorGCEvery is the least time between two collections the governor
// forces, so that a heap full of others' garbage does not make it collect
// all the time.
const governorGCEvery = 50 * time.Millisecond

type governedCall struct {
	thread *starlark.Thread
	base   uint64 // live heap when the call started
	limit  uint64
	seen   int // samples taken while the call ran
	hit    atomic.Bool
}

type memoryGovernor struct {
	mu     sync.Mutex
	calls  map[*governedCall]struct{}
	wake   chan struct{}
	lastGC time.Time
}

var governor = &memoryGovernor{calls: map[*governedCall]struct{}{}, wake: make(chan struct{}, 1)}

var governorOnce sync.Once

// heapSample reads the heap's objects (live and not yet swept) and the
// live heap at the last collection.
func heapSample() (objects, live uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		objects = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		live = s[1].Value.Uint64()
	}
	return objects, live
}

// watch registers a call; the returned function unregisters it and tells
// whether the governor stopped it.
func (g *memoryGovernor) watch(thread *starlark.Thread, limit uint64) func() bool {
	governorOnce.Do(func() { go g.loop() })
	_, live := heapSample()
	c := &governedCall{thread: thread, base: live, limit: limit}
	g.mu.Lock()
	g.calls[c] = struct{}{}
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return func() bool {
		g.mu.Lock()
		delete(g.calls, c)
		g.mu.Unlock()
		return c.hit.Load()
	}
}

// loop samples while calls run and sleeps otherwise.
func (g *memoryGovernor) loop() {
	t := time.NewTicker(governorTick)
	defer t.Stop()
	for {
		g.mu.Lock()
		idle := len(g.calls) == 0
		g.mu.Unlock()
		if idle {
			<-g.wake
			continue
		}
		<-t.C
		g.check()
	}
}

// check stops the calls past their limit.
func (g *memoryGovernor) check() {
	objects, _ := heapSample()
	g.mu.Lock()
	var suspects []*governedCall
	for c := range g.calls {
		c.seen++
		if objects > c.base+c.limit && c.seen > 1 {
			suspects = append(suspects, c)
		}
	}
	if len(suspects) == 0 || time.Since(g.lastGC) < governorGCEvery {
		g.mu.Unlock()
		return
	}
	g.lastGC = time.Now()
	g.mu.Unlock()

	// The heap counts garbage too: only what survives a collection is
	// the calls' doing.
	runtime.GC()
	_, live := heapSample()
	for _, c := range suspects {
		if live > c.base+c.limit {
			c.hit.Store(true)
			c.thread.Cancel(fmt.Sprintf("the heap grew by %d MiB during the call, the limit is %d MiB", (live-c.base)>>20, c.limit>>20))
		}
	}
}

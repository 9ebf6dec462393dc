package messaging

import (
	"container/list"
	"sync"
	"time"
)

// pushResult says what a sequencer did with a message.
type pushResult int

const (
	pushReady     pushResult = iota // the message (and maybe buffered ones) can be delivered
	pushBuffered                    // it arrived early and waits for a gap to fill
	pushDuplicate                   // it was seen before
	pushOverflow                    // the reorder buffer is full; the sender will re-send
)

// sequencer restores the order of one sender stream and drops duplicates.
type sequencer struct {
	expected uint64 // next sequence number to deliver; 0 before the first message
	buf      map[uint64]delivery
	max      int
}

func newSequencer(max int) *sequencer {
	return &sequencer{buf: map[uint64]delivery{}, max: max}
}

// push returns the deliveries that became possible, in order.
func (s *sequencer) push(d delivery) ([]delivery, pushResult) {
	e := d.env
	if s.expected == 0 {
		s.expected = e.Base
	}
	if e.Base > s.expected {
		// The sender gave up on everything below Base: stop waiting for it,
		// and drop early arrivals below it too, since the sender reported
		// them as failed.
		for seq := range s.buf {
			if seq < e.Base {
				delete(s.buf, seq)
			}
		}
		s.expected = e.Base
	}
	switch {
	case e.Seq < s.expected:
		return nil, pushDuplicate
	case e.Seq > s.expected:
		if _, ok := s.buf[e.Seq]; ok {
			return nil, pushDuplicate
		}
		if len(s.buf) >= s.max || e.Seq-s.expected > uint64(4*s.max) {
			return nil, pushOverflow
		}
		s.buf[e.Seq] = d
		return nil, pushBuffered
	}
	ready := []delivery{d}
	s.expected++
	for {
		n, ok := s.buf[s.expected]
		if !ok {
			break
		}
		delete(s.buf, s.expected)
		ready = append(ready, n)
		s.expected++
	}
	return ready, pushReady
}

// idCache remembers delivered message ids, bounded in size and age.
type idCache struct {
	max int
	ttl time.Duration
	ll  *list.List
	m   map[string]*list.Element
}

type idEntry struct {
	id string
	at time.Time
}

func newIDCache(max int, ttl time.Duration) *idCache {
	return &idCache{max: max, ttl: ttl, ll: list.New(), m: map[string]*list.Element{}}
}

func (c *idCache) seen(id string, now time.Time) bool {
	el, ok := c.m[id]
	if !ok {
		return false
	}
	if now.Sub(el.Value.(idEntry).at) > c.ttl {
		c.ll.Remove(el)
		delete(c.m, id)
		return false
	}
	return true
}

func (c *idCache) add(id string, now time.Time) {
	if el, ok := c.m[id]; ok {
		c.ll.MoveToFront(el)
		el.Value = idEntry{id: id, at: now}
		return
	}
	c.m[id] = c.ll.PushFront(idEntry{id: id, at: now})
	for c.ll.Len() > c.max {
		c.evictOldest()
	}
}

func (c *idCache) expire(now time.Time) {
	for c.ll.Len() > 0 && now.Sub(c.ll.Back().Value.(idEntry).at) > c.ttl {
		c.evictOldest()
	}
}

func (c *idCache) evictOldest() {
	el := c.ll.Back()
	c.ll.Remove(el)
	delete(c.m, el.Value.(idEntry).id)
}

type streamKey struct{ from, stream string }

// streamIn is the receive state of one sender stream.
type streamIn struct {
	key      streamKey
	seq      *sequencer
	ackUpto  uint64
	rejected []Rejection
	dirty    bool
	lastUsed time.Time
	// unacked counts messages handled since the last ack was scheduled.
	unacked int
}

// ackEvery bounds how many handled messages one ack may cover while more of
// the sender's messages wait to be handled; when none wait, the ack goes at
// once. Under a burst this cuts the acks (stanzas through the server) by
// that factor without delaying an ack when the sender is idle.
const ackEvery = 32

// pruneRejected forgets refusals the sender has settled.
func (st *streamIn) pruneRejected(base uint64) {
	keep := st.rejected[:0]
	for _, r := range st.rejected {
		if r.Seq >= base {
			keep = append(keep, r)
		}
	}
	st.rejected = keep
}

// delivery is one message on its way to a handler.
type delivery struct {
	env *Envelope
	// reject, when set, refuses the message instead of handling it.
	reject string
}

type senderQueue struct {
	items   []delivery
	running bool
}

// inbox turns incoming envelopes into ordered, de-duplicated deliveries per
// sender and collects the acknowledgements to send back.
type inbox struct {
	mu      sync.Mutex
	window  int
	streams map[streamKey]*streamIn
	queues  map[string]*senderQueue
	dedup   *idCache
	dirty   []*streamIn
	// deferred holds, per sender, streams with handled messages whose ack
	// waits for the sender's queue to drain.
	deferred map[string]map[*streamIn]struct{}
	wake     func()
}

func newInbox(window, dedupSize int, dedupTTL time.Duration, wake func()) *inbox {
	return &inbox{
		window: window, streams: map[streamKey]*streamIn{}, queues: map[string]*senderQueue{},
		dedup: newIDCache(dedupSize, dedupTTL), deferred: map[string]map[*streamIn]struct{}{}, wake: wake,
	}
}

// receive files an incoming envelope. It returns the result and whether a
// worker must be started for the sender. reject, when set, makes the message
// a refusal that still takes its place in the stream order.
func (in *inbox) receive(from string, e *Envelope, reject string, now time.Time) (pushResult, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.dedup.seen(e.ID, now) {
		if e.Reliable() {
			in.markDirty(in.stream(from, e.Stream, now))
		}
		return pushDuplicate, false
	}
	if !e.Reliable() {
		return pushReady, in.enqueue(from, []delivery{{env: e, reject: reject}})
	}
	st := in.stream(from, e.Stream, now)
	st.pruneRejected(e.Base)
	ready, res := st.seq.push(delivery{env: e, reject: reject})
	switch res {
	case pushDuplicate:
		// The sender missed our ack: send it again.
		in.markDirty(st)
		return res, false
	case pushReady:
		return res, in.enqueue(from, ready)
	}
	return res, false
}

func (in *inbox) stream(from, stream string, now time.Time) *streamIn {
	k := streamKey{from, stream}
	st := in.streams[k]
	if st == nil {
		st = &streamIn{key: k, seq: newSequencer(in.window)}
		in.streams[k] = st
	}
	st.lastUsed = now
	return st
}

func (in *inbox) enqueue(from string, ds []delivery) bool {
	q := in.queues[from]
	if q == nil {
		q = &senderQueue{}
		in.queues[from] = q
	}
	q.items = append(q.items, ds...)
	if q.running {
		return false
	}
	q.running = true
	return true
}

// take returns the next delivery for from's worker; ok is false when the
// queue is empty, and the worker must exit.
func (in *inbox) take(from string) (delivery, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	q := in.queues[from]
	if q == nil || len(q.items) == 0 {
		if q != nil {
			q.running = false
			delete(in.queues, from)
		}
		return delivery{}, false
	}
	d := q.items[0]
	q.items[0] = delivery{}
	q.items = q.items[1:]
	return d, true
}

// done records that e was handled (or refused with reason), so it is
// acknowledged and never handled again.
func (in *inbox) done(from string, e *Envelope, reason string, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.dedup.add(e.ID, now)
	if !e.Reliable() {
		return
	}
	st := in.stream(from, e.Stream, now)
	if e.Seq > st.ackUpto {
		st.ackUpto = e.Seq
	}
	st.unacked++
	if reason != "" {
		st.rejected = append(st.rejected, Rejection{Seq: e.Seq, ID: e.ID, Reason: reason})
	}
	if q := in.queues[from]; reason == "" && st.unacked < ackEvery && q != nil && len(q.items) > 0 {
		d := in.deferred[from]
		if d == nil {
			d = map[*streamIn]struct{}{}
			in.deferred[from] = d
		}
		d[st] = struct{}{}
		return
	}
	in.markDirty(st)
	// The sender's queue drained: acknowledge everything handled.
	for other := range in.deferred[from] {
		in.markDirty(other)
	}
	delete(in.deferred, from)
}

func (in *inbox) markDirty(st *streamIn) {
	if st.ackUpto == 0 || st.dirty {
		return
	}
	st.unacked = 0
	st.dirty = true
	in.dirty = append(in.dirty, st)
	in.wake()
}

// takeAck returns one pending acknowledgement, if any.
func (in *inbox) takeAck() (to string, a *Ack, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(in.dirty) > 0 {
		st := in.dirty[0]
		in.dirty[0] = nil
		in.dirty = in.dirty[1:]
		if !st.dirty {
			continue
		}
		st.dirty = false
		// Rejections stay listed until the sender shows, through Base, that
		// it has settled them, so a lost ack cannot turn a refusal into a
		// success.
		a := &Ack{Stream: st.key.stream, Upto: st.ackUpto, Rejected: append([]Rejection(nil), st.rejected...)}
		return st.key.from, a, true
	}
	return "", nil, false
}

// pending reports whether acknowledgements wait to be sent.
func (in *inbox) pending() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.dirty) > 0
}

// expire forgets streams idle for longer than idle and old delivered ids.
func (in *inbox) expire(now time.Time, idle time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.dedup.expire(now)
	for k, st := range in.streams {
		if now.Sub(st.lastUsed) > idle && !st.dirty && len(st.seq.buf) == 0 {
			delete(in.streams, k)
		}
	}
}

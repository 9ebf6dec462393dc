package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Errors reported to senders.
var (
	// ErrDeliveryTimeout: the message was not acknowledged before its
	// deadline. It may or may not have been applied.
	ErrDeliveryTimeout = errors.New("delivery deadline passed without acknowledgement")
	// ErrClosed: the client was closed before the message was acknowledged.
	ErrClosed = errors.New("messaging client closed")
)

// RejectedError is returned when the receiver refused a message (not
// authorized, malformed payload, no handler).
type RejectedError struct {
	Peer, ID, Reason string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("message %s rejected by %s: %s", e.ID, e.Peer, e.Reason)
}

// Delivery tracks one message handed to the client.
type Delivery struct {
	id   string
	done chan struct{}
	err  error
}

// ID returns the message id.
func (d *Delivery) ID() string { return d.id }

// Done is closed when the message was acknowledged (reliable), written
// (best-effort) or failed.
func (d *Delivery) Done() <-chan struct{} { return d.done }

// Err returns the outcome once Done is closed: nil when acknowledged.
func (d *Delivery) Err() error {
	select {
	case <-d.done:
		return d.err
	default:
		return nil
	}
}

// Wait blocks until the delivery completes or ctx ends.
func (d *Delivery) Wait(ctx context.Context) error {
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return fmt.Errorf("wait for delivery of %s: %w", d.id, ctx.Err())
	}
}

type outEntry struct {
	env      *Envelope
	to       string
	reliable bool
	deadline time.Time
	// queued is set while the entry sits in a send list.
	queued   bool
	sentAt   time.Time
	attempts int
	finished bool
	d        *Delivery
}

type peerOut struct {
	jid     string
	nextSeq uint64
	// low is the lowest sequence number that may still be outstanding.
	low     uint64
	entries map[uint64]*outEntry
	fresh   []*outEntry // never sent, in sequence order
	retry   []*outEntry // to re-send, in sequence order
	inRing  bool
	// srtt and rttvar estimate the time to acknowledgement (RFC 6298, with
	// Karn's rule: re-sent messages give no sample), so that a slow peer or
	// a loaded server does not trigger needless re-sends.
	srtt, rttvar time.Duration
	// progress is when an ack last completed messages of this peer. While
	// acks keep coming, later messages are queued behind, not lost: the
	// re-send timer of a message runs from its send or the last progress,
	// whichever is later.
	progress time.Time
}

// rto is the peer's re-send timeout estimate, or 0 before any sample.
func (p *peerOut) rto() time.Duration {
	if p.srtt == 0 {
		return 0
	}
	return p.srtt + 4*p.rttvar
}

func (p *peerOut) sample(rtt time.Duration) {
	if p.srtt == 0 {
		p.srtt, p.rttvar = rtt, rtt/2
		return
	}
	d := p.srtt - rtt
	if d < 0 {
		d = -d
	}
	p.rttvar = (3*p.rttvar + d) / 4
	p.srtt = (7*p.srtt + rtt) / 8
}

// outbox holds every outgoing message until it is acknowledged (reliable),
// written (best-effort) or failed. It is shared by all connections of a
// client, so nothing queued is lost when a connection drops.
type outbox struct {
	mu       sync.Mutex
	stream   string
	capacity int
	window   uint64
	retry    func(attempts int) time.Duration
	maxRetry time.Duration
	count    int
	peers    map[string]*peerOut
	ring     []*peerOut
	notes    []*outEntry
	space    chan struct{} // closed and replaced whenever capacity frees up
	wake     func()
	closed   bool

	// hooks for metrics; called with mu held, must not block.
	onRetry   func(*outEntry)
	onFinish  func(*outEntry, error)
	onExpired func(*outEntry)
}

func newOutbox(stream string, capacity, window int, retry func(int) time.Duration, maxRetry time.Duration, wake func()) *outbox {
	return &outbox{
		stream: stream, capacity: capacity, window: uint64(window), retry: retry, maxRetry: maxRetry,
		peers: map[string]*peerOut{}, space: make(chan struct{}), wake: wake,
		onRetry: func(*outEntry) {}, onFinish: func(*outEntry, error) {}, onExpired: func(*outEntry) {},
	}
}

// depth returns the number of messages held.
func (o *outbox) depth() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.count
}

// add queues e, waiting for space while the outbox is full (back-pressure).
func (o *outbox) add(ctx context.Context, e *outEntry) error {
	o.mu.Lock()
	for o.count >= o.capacity && !o.closed {
		space := o.space
		o.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return fmt.Errorf("queue full (%d messages): %w", o.capacity, ctx.Err())
		}
		o.mu.Lock()
	}
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	o.count++
	if !e.reliable {
		e.queued = true
		o.notes = append(o.notes, e)
		o.wake()
		return nil
	}
	p := o.peer(e.to)
	e.env.Stream = o.stream
	e.env.Seq = p.nextSeq
	p.nextSeq++
	p.entries[e.env.Seq] = e
	e.queued = true
	p.fresh = append(p.fresh, e)
	o.schedule(p)
	o.wake()
	return nil
}

func (o *outbox) peer(to string) *peerOut {
	p := o.peers[to]
	if p == nil {
		p = &peerOut{jid: to, nextSeq: 1, low: 1, entries: map[uint64]*outEntry{}}
		o.peers[to] = p
	}
	return p
}

// sendable reports whether p has something it may send now.
func (o *outbox) sendable(p *peerOut) bool {
	o.trim(p)
	if len(p.retry) > 0 {
		return true
	}
	return len(p.fresh) > 0 && p.fresh[0].env.Seq < p.low+o.window
}

// trim drops finished entries from the heads of p's lists.
func (o *outbox) trim(p *peerOut) {
	for len(p.retry) > 0 && p.retry[0].finished {
		p.retry = p.retry[1:]
	}
	for len(p.fresh) > 0 && p.fresh[0].finished {
		p.fresh = p.fresh[1:]
	}
}

func (o *outbox) schedule(p *peerOut) {
	if !p.inRing && o.sendable(p) {
		p.inRing = true
		o.ring = append(o.ring, p)
	}
}

// next returns the next message to write and its encoded envelope, or nil.
// Best-effort messages go first; peers take turns for reliable ones.
func (o *outbox) next(now time.Time) (*outEntry, []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.notes) > 0 {
		e := o.notes[0]
		o.notes[0] = nil
		o.notes = o.notes[1:]
		if e.finished {
			continue
		}
		e.queued = false
		if now.After(e.deadline) {
			o.onExpired(e)
			o.finish(e, ErrDeliveryTimeout)
			continue
		}
		data, err := json.Marshal(e.env)
		if err != nil {
			o.finish(e, fmt.Errorf("encode envelope: %w", err))
			continue
		}
		// A best-effort message is done once handed to the connection.
		o.finish(e, nil)
		return e, data
	}
	for len(o.ring) > 0 {
		p := o.ring[0]
		o.ring[0] = nil
		o.ring = o.ring[1:]
		p.inRing = false
		if !o.sendable(p) {
			continue
		}
		var e *outEntry
		if len(p.retry) > 0 {
			e, p.retry = p.retry[0], p.retry[1:]
		} else {
			e, p.fresh = p.fresh[0], p.fresh[1:]
		}
		e.queued = false
		e.sentAt = now
		e.attempts++
		if e.attempts > 1 {
			o.onRetry(e)
		}
		e.env.Base = p.low
		data, err := json.Marshal(e.env)
		o.schedule(p)
		if err != nil {
			o.finish(e, fmt.Errorf("encode envelope: %w", err))
			continue
		}
		return e, data
	}
	return nil, nil
}

// finish completes e; mu must be held.
func (o *outbox) finish(e *outEntry, err error) {
	if e.finished {
		return
	}
	e.finished = true
	e.d.err = err
	close(e.d.done)
	o.count--
	close(o.space)
	o.space = make(chan struct{})
	o.onFinish(e, err)
	if !e.reliable {
		return
	}
	p := o.peers[e.to]
	delete(p.entries, e.env.Seq)
	for p.low < p.nextSeq && p.entries[p.low] == nil {
		p.low++
	}
	o.schedule(p)
}

// ack applies an acknowledgement from peer for our stream: everything up to
// and including upto was handled, except rejected ones which were refused.
func (o *outbox) ack(peer string, a *Ack, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if a.Stream != o.stream {
		return // an ack for an earlier incarnation of this agent
	}
	p := o.peers[peer]
	if p == nil {
		return
	}
	for _, r := range a.Rejected {
		if e := p.entries[r.Seq]; e != nil && e.env.ID == r.ID {
			o.finish(e, &RejectedError{Peer: peer, ID: r.ID, Reason: r.Reason})
		}
	}
	upto := a.Upto
	if upto >= p.nextSeq {
		upto = p.nextSeq - 1
	}
	var newest *outEntry
	for s := p.low; s <= upto; s++ {
		if e := p.entries[s]; e != nil {
			if e.attempts == 1 && !e.sentAt.IsZero() {
				newest = e
			}
			o.finish(e, nil)
			p.progress = now
		}
	}
	if newest != nil {
		// A cumulative ack times the newest message it covers.
		p.sample(now.Sub(newest.sentAt))
	}
	o.wake()
}

// tick fails messages past their deadline and, when connected, schedules
// re-sends of unacknowledged ones.
func (o *outbox) tick(now time.Time, connected bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.notes {
		if !e.finished && now.After(e.deadline) {
			o.onExpired(e)
			o.finish(e, ErrDeliveryTimeout)
		}
	}
	woke := false
	for _, p := range o.peers {
		var resend []*outEntry
		for _, e := range p.entries {
			switch {
			case now.After(e.deadline):
				o.onExpired(e)
				o.finish(e, ErrDeliveryTimeout)
			case connected && !e.queued && !e.sentAt.IsZero() && now.Sub(later(e.sentAt, p.progress)) >= o.retryDelay(p, e.attempts):
				resend = append(resend, e)
			}
		}
		if len(resend) > 0 {
			o.requeue(p, resend)
			woke = true
		}
	}
	if woke {
		o.wake()
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// retryDelay is the configured delay, stretched to the peer's measured
// re-send timeout (doubled per attempt) when that is longer.
func (o *outbox) retryDelay(p *peerOut, attempts int) time.Duration {
	d := o.retry(attempts)
	if rto := p.rto(); rto > 0 {
		if attempts > 1 && attempts < 16 {
			rto <<= attempts - 1
		}
		if rto > d {
			d = min(rto, o.maxRetry)
		}
	}
	return d
}

// requeue puts sent entries back for re-sending, in sequence order.
func (o *outbox) requeue(p *peerOut, es []*outEntry) {
	for _, e := range es {
		e.queued = true
	}
	p.retry = append(p.retry, es...)
	sort.Slice(p.retry, func(i, j int) bool { return p.retry[i].env.Seq < p.retry[j].env.Seq })
	o.schedule(p)
}

// resendAll re-sends everything sent and not acknowledged, towards one peer
// (peer != "") or all. Called after a reconnect, when anything written to
// the old connection may be lost, and when a peer comes back online.
func (o *outbox) resendAll(peer string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for jid, p := range o.peers {
		if peer != "" && jid != peer {
			continue
		}
		var resend []*outEntry
		for _, e := range p.entries {
			if !e.queued && !e.sentAt.IsZero() {
				resend = append(resend, e)
			}
		}
		if len(resend) > 0 {
			o.requeue(p, resend)
		}
	}
	o.wake()
}

// close fails everything still held.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	for _, e := range o.notes {
		o.finish(e, ErrClosed)
	}
	o.notes = nil
	for _, p := range o.peers {
		for _, e := range p.entries {
			o.finish(e, ErrClosed)
		}
	}
}

// knows reports whether we ever sent a reliable message to peer, so its acks
// are worth reading.
func (o *outbox) knows(peer string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peers[peer] != nil
}

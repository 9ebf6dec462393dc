package messaging

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func seqEnv(seq, base uint64) *Envelope {
	return &Envelope{V: 1, ID: fmt.Sprint("s-", seq), Type: TypePing, Stream: "s", Seq: seq, Base: base}
}

func seqs(ds []delivery) []uint64 {
	var out []uint64
	for _, d := range ds {
		out = append(out, d.env.Seq)
	}
	return out
}

func TestSequencer(t *testing.T) {
	type push struct {
		seq, base uint64
		want      pushResult
		ready     []uint64
	}
	cases := map[string]struct {
		max    int
		pushes []push
	}{
		"in order": {max: 8, pushes: []push{
			{1, 1, pushReady, []uint64{1}}, {2, 1, pushReady, []uint64{2}}, {3, 3, pushReady, []uint64{3}},
		}},
		"gap filled releases the buffer in order": {max: 8, pushes: []push{
			{1, 1, pushReady, []uint64{1}}, {3, 2, pushBuffered, nil}, {4, 2, pushBuffered, nil}, {2, 2, pushReady, []uint64{2, 3, 4}},
		}},
		"duplicates": {max: 8, pushes: []push{
			{1, 1, pushReady, []uint64{1}}, {1, 1, pushDuplicate, nil}, {3, 2, pushBuffered, nil}, {3, 2, pushDuplicate, nil},
		}},
		"first message sets the start from its base": {max: 8, pushes: []push{
			{12, 10, pushBuffered, nil}, {10, 10, pushReady, []uint64{10}}, {11, 10, pushReady, []uint64{11, 12}},
		}},
		"base moves past abandoned messages": {max: 8, pushes: []push{
			{1, 1, pushReady, []uint64{1}}, {3, 2, pushBuffered, nil}, {5, 4, pushBuffered, nil},
			// 2 and 3 were abandoned by the sender: 3 is dropped, 4 is awaited.
			{4, 4, pushReady, []uint64{4, 5}}, {3, 2, pushDuplicate, nil},
		}},
		"overflow": {max: 2, pushes: []push{
			{1, 1, pushReady, []uint64{1}}, {3, 2, pushBuffered, nil}, {4, 2, pushBuffered, nil}, {5, 2, pushOverflow, nil},
		}},
		"far ahead": {max: 2, pushes: []push{
			{1, 1, pushReady, []uint64{1}}, {100, 2, pushOverflow, nil},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSequencer(tc.max)
			for i, p := range tc.pushes {
				ready, res := s.push(delivery{env: seqEnv(p.seq, p.base)})
				if res != p.want {
					t.Fatalf("push %d (seq %d): result %d, want %d", i, p.seq, res, p.want)
				}
				if diff := cmp.Diff(p.ready, seqs(ready)); diff != "" {
					t.Fatalf("push %d (seq %d): ready (-want +got):\n%s", i, p.seq, diff)
				}
			}
		})
	}
}

func TestIDCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newIDCache(2, time.Minute)
	c.add("a", now)
	c.add("b", now)
	if !c.seen("a", now) || !c.seen("b", now) {
		t.Fatal("added ids not seen")
	}
	c.add("c", now) // evicts the oldest, a
	if c.seen("a", now) || !c.seen("c", now) {
		t.Error("size bound not applied")
	}
	if c.seen("b", now.Add(2*time.Minute)) {
		t.Error("expired id still seen")
	}
	c.add("d", now)
	c.expire(now.Add(2 * time.Minute))
	if c.ll.Len() != 0 || len(c.m) != 0 {
		t.Errorf("expire left %d entries", c.ll.Len())
	}
}

func newTestOutbox(capacity, window int) (*outbox, *int) {
	wakes := 0
	o := newOutbox("stream-1", capacity, window, func(a int) time.Duration { return retryDelay(time.Second, 8*time.Second, a) }, 8*time.Second, func() { wakes++ })
	return o, &wakes
}

func addN(t *testing.T, o *outbox, to string, n int, deadline time.Time) []*outEntry {
	t.Helper()
	var es []*outEntry
	for i := 0; i < n; i++ {
		e := &outEntry{env: &Envelope{ID: fmt.Sprintf("%s-%d", to, i), Type: TypePing}, to: to, reliable: true,
			deadline: deadline, d: &Delivery{done: make(chan struct{})}}
		if err := o.add(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// drain returns (peer, seq, base) of everything next() hands out.
func drain(o *outbox, now time.Time) []string {
	var out []string
	for {
		e, data := o.next(now)
		if e == nil {
			return out
		}
		if len(data) == 0 {
			panic("no data")
		}
		out = append(out, fmt.Sprintf("%s#%d/%d", e.to, e.env.Seq, e.env.Base))
	}
}

func TestOutboxWindowAndAcks(t *testing.T) {
	now := time.Unix(1000, 0)
	o, _ := newTestOutbox(100, 2)
	es := addN(t, o, "a", 4, now.Add(time.Hour))
	if diff := cmp.Diff([]string{"a#1/1", "a#2/1"}, drain(o, now)); diff != "" {
		t.Fatalf("first window (-want +got):\n%s", diff)
	}
	o.ack("a", &Ack{Stream: "stream-1", Upto: 1}, now)
	if es[0].d.Err() != nil || !isDone(es[0].d) || isDone(es[1].d) {
		t.Fatal("ack 1 did not complete exactly message 1")
	}
	if diff := cmp.Diff([]string{"a#3/2"}, drain(o, now)); diff != "" {
		t.Fatalf("after ack 1 (-want +got):\n%s", diff)
	}
	// An ack for another incarnation of us changes nothing.
	o.ack("a", &Ack{Stream: "old", Upto: 4}, now)
	if isDone(es[1].d) {
		t.Fatal("ack of another stream applied")
	}
	// 3 rejected, cumulative up to 3.
	o.ack("a", &Ack{Stream: "stream-1", Upto: 3, Rejected: []Rejection{{Seq: 3, ID: "a-2", Reason: "no"}}}, now)
	var rej *RejectedError
	if es[1].d.Err() != nil || !errors.As(es[2].d.Err(), &rej) || rej.Reason != "no" {
		t.Fatalf("after ack 3: %v, %v", es[1].d.Err(), es[2].d.Err())
	}
	if diff := cmp.Diff([]string{"a#4/4"}, drain(o, now)); diff != "" {
		t.Fatalf("after ack 3 (-want +got):\n%s", diff)
	}
	if o.depth() != 1 {
		t.Errorf("depth %d, want 1", o.depth())
	}
}

func isDone(d *Delivery) bool {
	select {
	case <-d.Done():
		return true
	default:
		return false
	}
}

func TestOutboxPeersTakeTurns(t *testing.T) {
	now := time.Unix(1000, 0)
	o, _ := newTestOutbox(100, 10)
	addN(t, o, "a", 3, now.Add(time.Hour))
	addN(t, o, "b", 2, now.Add(time.Hour))
	if diff := cmp.Diff([]string{"a#1/1", "b#1/1", "a#2/1", "b#2/1", "a#3/1"}, drain(o, now)); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}

func TestOutboxRetryAndDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	o, _ := newTestOutbox(100, 10)
	retries := 0
	o.onRetry = func(*outEntry) { retries++ }
	es := addN(t, o, "a", 2, now.Add(10*time.Second))
	drain(o, now)
	o.tick(now.Add(500*time.Millisecond), true)
	if got := drain(o, now); len(got) != 0 {
		t.Fatalf("re-sent before the retry interval: %v", got)
	}
	o.tick(now.Add(time.Second), false)
	if got := drain(o, now); len(got) != 0 {
		t.Fatalf("re-sent while disconnected: %v", got)
	}
	o.tick(now.Add(time.Second), true)
	if diff := cmp.Diff([]string{"a#1/1", "a#2/1"}, drain(o, now.Add(time.Second))); diff != "" {
		t.Fatalf("retry (-want +got):\n%s", diff)
	}
	// The second attempt waits twice as long.
	o.tick(now.Add(2500*time.Millisecond), true)
	if got := drain(o, now); len(got) != 0 {
		t.Fatalf("re-sent before the doubled interval: %v", got)
	}
	o.tick(now.Add(11*time.Second), true)
	for i, e := range es {
		if !errors.Is(e.d.Err(), ErrDeliveryTimeout) {
			t.Errorf("message %d: %v, want ErrDeliveryTimeout", i, e.d.Err())
		}
	}
	if retries != 2 || o.depth() != 0 {
		t.Errorf("retries %d depth %d, want 2 and 0", retries, o.depth())
	}
	// The next message carries a base past the abandoned ones.
	addN(t, o, "a", 1, now.Add(time.Hour))
	if diff := cmp.Diff([]string{"a#3/3"}, drain(o, now)); diff != "" {
		t.Fatalf("after expiry (-want +got):\n%s", diff)
	}
}

func TestOutboxResendAllAndBackPressure(t *testing.T) {
	now := time.Unix(1000, 0)
	o, _ := newTestOutbox(2, 2)
	addN(t, o, "a", 2, now.Add(time.Hour))
	drain(o, now)
	o.resendAll("")
	if diff := cmp.Diff([]string{"a#1/1", "a#2/1"}, drain(o, now)); diff != "" {
		t.Fatalf("resend (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := o.add(ctx, &outEntry{env: &Envelope{ID: "x", Type: TypePing}, to: "a", reliable: true, deadline: now.Add(time.Hour), d: &Delivery{done: make(chan struct{})}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("add to a full outbox: %v, want the context's deadline", err)
	}
	done := make(chan error)
	go func() {
		done <- o.add(context.Background(), &outEntry{env: &Envelope{ID: "y", Type: TypePing}, to: "a", reliable: true, deadline: now.Add(time.Hour), d: &Delivery{done: make(chan struct{})}})
	}()
	o.ack("a", &Ack{Stream: "stream-1", Upto: 1}, now)
	if err := <-done; err != nil {
		t.Fatalf("add after space freed: %v", err)
	}
	o.close()
	if err := o.add(context.Background(), &outEntry{env: &Envelope{ID: "z", Type: TypePing}, to: "a", d: &Delivery{done: make(chan struct{})}}); !errors.Is(err, ErrClosed) {
		t.Errorf("add after close: %v", err)
	}
}

func TestInboxAcks(t *testing.T) {
	now := time.Unix(1000, 0)
	in := newInbox(8, 100, time.Minute, func() {})
	e1, e2, e3 := seqEnv(1, 1), seqEnv(2, 1), seqEnv(3, 1)
	if res, start := in.receive("a", e2, "", now); res != pushBuffered || start {
		t.Fatalf("early message: %d %v", res, start)
	}
	if res, start := in.receive("a", e1, "", now); res != pushReady || !start {
		t.Fatalf("first message: %d %v", res, start)
	}
	if _, _, ok := in.takeAck(); ok {
		t.Fatal("ack before anything was handled")
	}
	var got []uint64
	for {
		d, ok := in.take("a")
		if !ok {
			break
		}
		got = append(got, d.env.Seq)
		in.done("a", d.env, "", now)
	}
	if diff := cmp.Diff([]uint64{1, 2}, got); diff != "" {
		t.Fatalf("delivered (-want +got):\n%s", diff)
	}
	to, a, ok := in.takeAck()
	if !ok || to != "a" || a.Upto != 2 || a.Stream != "s" {
		t.Fatalf("ack = %s %+v %v", to, a, ok)
	}
	// A refused message is acknowledged with its reason until the sender's
	// base passes it.
	in.receive("a", e3, "not allowed", now)
	d, _ := in.take("a")
	in.done("a", d.env, d.reject, now)
	_, a, _ = in.takeAck()
	if a.Upto != 3 || len(a.Rejected) != 1 || a.Rejected[0].Reason != "not allowed" {
		t.Fatalf("ack with rejection: %+v", a)
	}
	// The sender missed that ack and sends 3 again: duplicate, same answer.
	if res, _ := in.receive("a", seqEnv(3, 3), "", now); res != pushDuplicate {
		t.Fatalf("re-sent message: %d", res)
	}
	_, a, _ = in.takeAck()
	if a.Upto != 3 || len(a.Rejected) != 1 {
		t.Fatalf("repeated ack: %+v", a)
	}
	// Its next message's base says it has settled 3.
	in.receive("a", seqEnv(4, 4), "", now)
	d, _ = in.take("a")
	in.done("a", d.env, "", now)
	_, a, _ = in.takeAck()
	if a.Upto != 4 || len(a.Rejected) != 0 {
		t.Fatalf("ack after the sender settled the refusal: %+v", a)
	}
	// Best-effort messages are de-duplicated by id.
	if _, ok := in.take("a"); ok {
		t.Fatal("queue not empty")
	}
	be := &Envelope{V: 1, ID: "hb-1", Type: TypeHeartbeat}
	if res, start := in.receive("a", be, "", now); res != pushReady || !start {
		t.Fatalf("best effort: %d %v", res, start)
	}
	d, _ = in.take("a")
	in.done("a", d.env, "", now)
	if res, _ := in.receive("a", be, "", now); res != pushDuplicate {
		t.Fatalf("best-effort duplicate: %d", res)
	}
}

func TestOutboxRetryFollowsMeasuredRTT(t *testing.T) {
	now := time.Unix(1000, 0)
	o, _ := newTestOutbox(100, 10)
	addN(t, o, "a", 1, now.Add(time.Hour))
	drain(o, now)
	// The ack took 3s: the re-send timeout grows past the configured 1s.
	o.ack("a", &Ack{Stream: "stream-1", Upto: 1}, now.Add(3*time.Second))
	p := o.peers["a"]
	if got := p.rto(); got != 3*time.Second+4*1500*time.Millisecond {
		t.Fatalf("rto after one 3s sample = %v", got)
	}
	t1 := now.Add(10 * time.Second)
	addN(t, o, "a", 1, t1.Add(time.Hour))
	drain(o, t1)
	o.tick(t1.Add(2*time.Second), true)
	if got := drain(o, t1); len(got) != 0 {
		t.Fatalf("re-sent after 2s although acks take 3s: %v", got)
	}
	o.tick(t1.Add(8*time.Second), true) // capped at the 8s maximum
	if diff := cmp.Diff([]string{"a#2/2"}, drain(o, t1)); diff != "" {
		t.Fatalf("re-send at the cap (-want +got):\n%s", diff)
	}
}

func TestOutboxNoResendWhileAcksProgress(t *testing.T) {
	now := time.Unix(1000, 0)
	o, _ := newTestOutbox(100, 10)
	addN(t, o, "a", 3, now.Add(time.Hour))
	drain(o, now)
	// Acks trickle in: message 3 is queued behind, not lost.
	o.ack("a", &Ack{Stream: "stream-1", Upto: 1}, now.Add(900*time.Millisecond))
	o.ack("a", &Ack{Stream: "stream-1", Upto: 2}, now.Add(1800*time.Millisecond))
	o.tick(now.Add(2*time.Second), true)
	if got := drain(o, now); len(got) != 0 {
		t.Fatalf("re-sent while acks progressed: %v", got)
	}
	// Progress stops: 3 goes again once the delay passed since the last ack
	// (stretched by the measured ack time).
	o.tick(now.Add(20*time.Second), true)
	if diff := cmp.Diff([]string{"a#3/3"}, drain(o, now)); diff != "" {
		t.Fatalf("re-send after progress stopped (-want +got):\n%s", diff)
	}
}

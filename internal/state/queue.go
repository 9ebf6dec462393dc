package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// QueueOptions tune a Queue. Zero values take the defaults.
type QueueOptions struct {
	// Block is how long Read waits for new entries. Default 5s.
	Block time.Duration
	// Count is the most entries one Read returns. Default 16.
	Count int64
	// ClaimIdle is how long an entry may stay unacknowledged before another
	// consumer claims it: longer than the slowest handling, shorter than the
	// delay a user would notice. Default 1m.
	ClaimIdle time.Duration
	// MaxDeliveries is how many times an entry is delivered before it is
	// moved to the dead-letter stream instead. Default 10.
	MaxDeliveries int64
	// Workers is how many entries of one read Run handles at once
	// (entries of one submission ID one after the other, in stream
	// order). Default 1.
	Workers int
}

func (o QueueOptions) withDefaults() QueueOptions {
	if o.Block <= 0 {
		o.Block = 5 * time.Second
	}
	if o.Count <= 0 {
		o.Count = 16
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = time.Minute
	}
	if o.MaxDeliveries <= 0 {
		o.MaxDeliveries = 10
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	return o
}

// Entry is one delivered submission.
type Entry struct {
	// ID is the stream entry id, to Ack.
	ID         string
	Submission Submission
	// Deliveries counts how often the entry was delivered, this time
	// included; above 1 it was handed out before and not acknowledged.
	Deliveries int64
}

// Queue reads a collection's submissions as one consumer of a consumer
// group. An entry stays pending until acknowledged; when its consumer
// crashes, another consumer (or the same one after a restart) gets it again
// once it has been idle for ClaimIdle. Handlers must therefore be
// idempotent: a submission is delivered at least once, and exactly once
// unless a consumer dies between handling and Ack.
type Queue struct {
	c        *Collection
	group    string
	consumer string
	opts     QueueOptions
	ownDone  bool
}

// DefaultGroup is the consumer group of the continuum agent.
const DefaultGroup = "continuum"

// Queue returns a consumer of the collection's submissions and creates the
// consumer group if needed. consumer names this process; a stable name (the
// pod name) lets a restarted consumer take back its own pending entries at
// once instead of after ClaimIdle.
func (c *Collection) Queue(ctx context.Context, group, consumer string, opts QueueOptions) (*Queue, error) {
	if group == "" {
		group = DefaultGroup
	}
	if err := checkID("consumer", consumer); err != nil {
		return nil, err
	}
	q := &Queue{c: c, group: group, consumer: consumer, opts: opts.withDefaults()}
	if err := q.ensureGroup(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// ensureGroup creates the group at the start of the stream, so entries
// queued before any consumer existed are delivered too.
func (q *Queue) ensureGroup(ctx context.Context) error {
	err := q.c.s.rdb.XGroupCreateMkStream(ctx, q.c.k.stream(), q.group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("create consumer group %s on %s: %w", q.group, q.c.k.stream(), err)
	}
	return nil
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// Read returns the next entries: first this consumer's own pending entries
// (left by a previous run), then entries other consumers left idle for
// longer than ClaimIdle, then new entries, waiting up to Block for them.
// Entries delivered more than MaxDeliveries times go to the dead-letter
// stream instead.
func (q *Queue) Read(ctx context.Context) ([]Entry, error) {
	entries, err := q.read(ctx)
	if isNoGroup(err) {
		// The stream or group vanished (Redis lost its data): recreate and
		// go on with what is there.
		q.c.s.log.Warn("consumer group missing; recreating it", "stream", q.c.k.stream(), "group", q.group)
		if gerr := q.ensureGroup(ctx); gerr != nil {
			return nil, gerr
		}
		entries, err = q.read(ctx)
	}
	return entries, err
}

func (q *Queue) read(ctx context.Context) ([]Entry, error) {
	if q.c.s.replicaAcks <= 0 {
		return q.readOn(ctx, q.c.s.rdb)
	}
	// Entries are read on a connection of their own to the master of the
	// stream and handed out only once the replicas hold them: an entry
	// read from a master that dies before its replica has it would be
	// handled, then vanish with the failover, and its submission, retried
	// by the user, would be handled a second time.
	node, err := q.c.s.masterFor(ctx, q.c.k.stream())
	if err != nil {
		return nil, err
	}
	conn := node.Conn()
	defer conn.Close()
	rs, err := q.c.s.replicasOf(ctx, conn)
	if err == nil {
		var es []Entry
		es, err = q.readOn(ctx, conn)
		if err == nil && len(es) > 0 && rs.expected > 0 {
			err = q.c.s.awaitReplicas(ctx, conn, q.c.k.stream(), rs)
		}
		if err == nil {
			return es, nil
		}
	}
	// The entries read, if any, stay pending for this consumer: take them
	// back first on the next read.
	q.ownDone = false
	if cc, ok := q.c.s.rdb.(*redis.ClusterClient); ok && notExecuted(err) {
		cc.ReloadState(ctx)
	}
	return nil, err
}

// readOn reads the next entries through c (see Read).
func (q *Queue) readOn(ctx context.Context, c redis.Cmdable) ([]Entry, error) {
	if !q.ownDone {
		es, err := q.readOwn(ctx, c)
		if err != nil {
			return nil, err
		}
		if len(es) > 0 {
			return es, nil
		}
		q.ownDone = true
	}
	es, err := q.claimIdle(ctx, c)
	if err != nil || len(es) > 0 {
		return es, err
	}
	streams, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: q.group, Consumer: q.consumer, Streams: []string{q.c.k.stream(), ">"},
		Count: q.opts.Count, Block: q.opts.Block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", q.c.k.stream(), err)
	}
	var msgs []redis.XMessage
	for _, s := range streams {
		msgs = append(msgs, s.Messages...)
	}
	counts := make(map[string]int64, len(msgs))
	for _, m := range msgs {
		counts[m.ID] = 1
	}
	return q.entries(ctx, msgs, counts)
}

// readOwn takes back this consumer's pending entries. XCLAIM (rather than
// re-reading the history) counts the delivery, so an entry that crashes
// its consumer every time ends in the dead-letter stream.
func (q *Queue) readOwn(ctx context.Context, c redis.Cmdable) ([]Entry, error) {
	pend, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: q.c.k.stream(), Group: q.group, Start: "-", End: "+", Count: q.opts.Count, Consumer: q.consumer,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("pending entries of %s: %w", q.consumer, err)
	}
	if len(pend) == 0 {
		return nil, nil
	}
	ids := make([]string, len(pend))
	counts := make(map[string]int64, len(pend))
	for i, p := range pend {
		ids[i] = p.ID
		counts[p.ID] = p.RetryCount + 1
	}
	msgs, err := c.XClaim(ctx, &redis.XClaimArgs{
		Stream: q.c.k.stream(), Group: q.group, Consumer: q.consumer, MinIdle: 0, Messages: ids,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("reclaim pending entries of %s: %w", q.consumer, err)
	}
	return q.entries(ctx, msgs, counts)
}

// claimIdle takes over entries idle for longer than ClaimIdle.
func (q *Queue) claimIdle(ctx context.Context, c redis.Cmdable) ([]Entry, error) {
	msgs, _, err := c.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: q.c.k.stream(), Group: q.group, Consumer: q.consumer,
		MinIdle: q.opts.ClaimIdle, Start: "0-0", Count: q.opts.Count,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("claim idle entries of %s: %w", q.c.k.stream(), err)
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	// XAUTOCLAIM does not say how often an entry was delivered; XPENDING
	// over the claimed range does.
	pend, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: q.c.k.stream(), Group: q.group, Start: msgs[0].ID, End: msgs[len(msgs)-1].ID,
		Count: max(int64(len(msgs))*4, 1000), Consumer: q.consumer,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("delivery counts of claimed entries: %w", err)
	}
	counts := make(map[string]int64, len(pend))
	for _, p := range pend {
		counts[p.ID] = p.RetryCount
	}
	q.c.s.log.Info("claimed idle submissions", "stream", q.c.k.stream(), "consumer", q.consumer, "count", len(msgs))
	return q.entries(ctx, msgs, counts)
}

// entries decodes messages and dead-letters the poisoned ones.
func (q *Queue) entries(ctx context.Context, msgs []redis.XMessage, counts map[string]int64) ([]Entry, error) {
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		e := Entry{ID: m.ID, Deliveries: counts[m.ID]}
		raw, _ := m.Values[streamField].(string)
		reason := ""
		if err := json.Unmarshal([]byte(raw), &e.Submission); err != nil || e.Submission.ID == "" {
			reason = fmt.Sprintf("undecodable submission: %v", err)
		} else if e.Deliveries > q.opts.MaxDeliveries {
			reason = fmt.Sprintf("delivered %d times without acknowledgement", e.Deliveries)
		}
		if reason != "" {
			// The status first: once the entry has left the stream
			// nothing would redeliver it, so a stop between the two
			// steps would leave its status Queued for ever. Failed first,
			// a stop in between redelivers the entry, which is
			// dead-lettered again (its status no longer Queued, the
			// second call leaves it alone).
			if err := q.failDeadLettered(ctx, e.Submission.ID, m.ID, reason); err != nil {
				return out, err
			}
			if err := q.deadLetter(ctx, m, reason); err != nil {
				return out, err
			}
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// failDeadLettered marks the status of a dead-lettered submission Failed,
// when it is still that submission's (the generation read guards the
// write against one accepted meanwhile): Queued would never end, or end
// in a sweep that takes the entry's absence from the stream for its
// handling and forgets an accepted submission.
func (q *Queue) failDeadLettered(ctx context.Context, id, entry, reason string) error {
	if id == "" {
		return nil
	}
	st, err := q.c.Status(ctx, id)
	if errors.Is(err, ErrNotFound) || err == nil && (st.StreamID != entry || st.Phase != mlsysopsv1.AppQueued) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = q.c.SetStatus(ctx, id, StatusUpdate{Phase: mlsysopsv1.AppFailed, Message: "the submission could not be handled: " + reason, Generation: st.Generation})
	if errors.Is(err, ErrStale) || errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func (q *Queue) deadLetter(ctx context.Context, m redis.XMessage, reason string) error {
	q.c.s.log.Error("submission moved to the dead-letter stream", "stream", q.c.k.stream(), "entry", m.ID, "reason", reason)
	raw, _ := m.Values[streamField].(string)
	_, err := q.c.s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: q.c.k.dead(), Values: map[string]any{
			streamField: raw, "entry": m.ID, "reason": reason, "consumer": q.consumer, "at": formatTime(q.c.s.now()),
		}})
		p.XAck(ctx, q.c.k.stream(), q.group, m.ID)
		p.XDel(ctx, q.c.k.stream(), m.ID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dead-letter entry %s: %w", m.ID, err)
	}
	return nil
}

// Ack acknowledges handled entries and deletes them from the stream (the
// stream has a single consumer group, so an acknowledged entry is of no
// further use; trimming by length instead could drop unhandled ones).
func (q *Queue) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := q.c.s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, q.c.k.stream(), q.group, ids...)
		p.XDel(ctx, q.c.k.stream(), ids...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("ack %d entries of %s: %w", len(ids), q.c.k.stream(), err)
	}
	return nil
}

// Pending returns the number of delivered, unacknowledged entries.
func (q *Queue) Pending(ctx context.Context) (int64, error) {
	p, err := q.c.s.rdb.XPending(ctx, q.c.k.stream(), q.group).Result()
	if err != nil {
		return 0, fmt.Errorf("pending entries of %s: %w", q.c.k.stream(), err)
	}
	return p.Count, nil
}

// DeadLetters returns up to count entries of the dead-letter stream.
func (q *Queue) DeadLetters(ctx context.Context, count int64) ([]redis.XMessage, error) {
	msgs, err := q.c.s.rdb.XRangeN(ctx, q.c.k.dead(), "-", "+", count).Result()
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return msgs, nil
}

// Run reads entries and hands them to h until ctx ends, up to Workers at
// once; the entries of one submission ID are handled one after the
// other, in stream order, so a removal never overtakes the deploy before
// it. An entry is acknowledged when h returns nil; when h fails, it stays
// pending and comes back after ClaimIdle. Redis errors (a restart, a
// failover) are logged and retried with backoff.
func (q *Queue) Run(ctx context.Context, h func(context.Context, Entry) error) error {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		entries, err := q.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			q.c.s.log.Warn("reading submissions failed; retrying", "stream", q.c.k.stream(), "err", err, "retry_in", wait)
			sleepCtx(ctx, wait+time.Duration(rand.Int64N(int64(wait))))
			wait = min(2*wait, 10*time.Second)
			continue
		}
		wait = 100 * time.Millisecond
		done := q.handle(ctx, entries, h)
		// An Ack lost to a Redis outage only means one more delivery.
		if err := q.Ack(ctx, done...); err != nil && ctx.Err() == nil {
			q.c.s.log.Warn("ack failed; the entries will be delivered again", "entries", len(done), "err", err)
		}
	}
	return nil
}

// handle hands entries to h, Workers submission IDs at a time, and
// returns the ids of the entries h handled.
func (q *Queue) handle(ctx context.Context, entries []Entry, h func(context.Context, Entry) error) []string {
	var order []string
	byID := map[string][]Entry{}
	for _, e := range entries {
		if _, ok := byID[e.Submission.ID]; !ok {
			order = append(order, e.Submission.ID)
		}
		byID[e.Submission.ID] = append(byID[e.Submission.ID], e)
	}
	var (
		mu   sync.Mutex
		done []string
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, q.opts.Workers)
	for _, id := range order {
		sem <- struct{}{}
		wg.Add(1)
		go func(list []Entry) {
			defer wg.Done()
			defer func() { <-sem }()
			for _, e := range list {
				if err := h(ctx, e); err != nil {
					q.c.s.log.Error("handling a submission failed; it will be delivered again",
						"id", e.Submission.ID, "kind", e.Submission.Kind, "entry", e.ID, "deliveries", e.Deliveries, "err", err)
					// As one by one: the later entries go on (the failed
					// one's redelivery finds itself superseded by them).
					continue
				}
				mu.Lock()
				done = append(done, e.ID)
				mu.Unlock()
			}
		}(byID[id])
	}
	wg.Wait()
	return done
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// InStream reports which of the given stream entries of the collection
// are still in its stream: not handled yet, or being handled. A consumer
// acknowledges an entry once it has handled it, and acknowledging deletes
// it (Ack), so an entry that has left the stream was handled (or
// dead-lettered).
func (c *Collection) InStream(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make([]*redis.XMessageSliceCmd, len(ids))
	_, err := c.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.XRange(ctx, c.k.stream(), id, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the %s stream: %w", c.name, err)
	}
	for i, id := range ids {
		out[id] = len(cmds[i].Val()) > 0
	}
	return out, nil
}

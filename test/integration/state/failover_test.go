package state_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// TestMasterKilledMidBurst: clients submit a burst of applications (each
// retrying a failed submission with the same request id, as the
// northbound's Idempotency-Key lets a user do) while a consumer handles
// them; in the middle of the burst the Redis master that holds the
// submissions is killed with SIGKILL. A Sentinel group or a Cluster fails
// over to the replica; a single server is started again. Then every
// submission was accepted, queued once (generation 1, one stream entry)
// and handled; none is lost, none doubled.
func TestMasterKilledMidBurst(t *testing.T) {
	const (
		n       = 300
		clients = 6
		killAt  = n / 3
	)
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()

	// The consumer: an idempotent handler, as the continuum's intake is,
	// records the stream entry that carried each submission.
	q, err := apps.Queue(ctx, "", "continuum-0", state.QueueOptions{Block: 200 * time.Millisecond, ClaimIdle: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	entries := map[string]map[string]bool{} // app id -> stream entries handled
	deliveries, redelivered := 0, 0
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		_ = q.Run(cctx, func(_ context.Context, en state.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			if entries[en.Submission.ID] == nil {
				entries[en.Submission.ID] = map[string]bool{}
			}
			entries[en.Submission.ID][en.ID] = true
			deliveries++
			if en.Deliveries > 1 {
				redelivered++
			}
			return nil
		})
	}()
	t.Cleanup(func() { stopConsumer(); <-consumerDone })

	// The clients.
	var accepted, retries, notReplicated atomic.Int64
	var killedAt atomic.Int64 // unix nanos
	var firstAfterKill atomic.Int64
	receipts := make([]state.Receipt, n)
	kill := make(chan struct{})
	var killOnce sync.Once
	work := make(chan int)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				sub := state.Submission{ID: fmt.Sprintf("burst-%03d", i), Kind: state.KindDeploy, Spec: appSpec(i), RequestID: fmt.Sprintf("req-%03d", i)}
				deadline := time.Now().Add(time.Minute)
				for {
					began := time.Now().UnixNano()
					actx, cancel := context.WithTimeout(ctx, 5*time.Second)
					r, err := apps.Submit(actx, sub)
					cancel()
					if err == nil {
						receipts[i] = r
						if k := killedAt.Load(); k != 0 && began > k {
							firstAfterKill.CompareAndSwap(0, time.Now().UnixNano())
						}
						if accepted.Add(1) == killAt {
							killOnce.Do(func() { close(kill) })
						}
						break
					}
					if errors.Is(err, state.ErrNotReplicated) {
						notReplicated.Add(1)
					}
					if time.Now().After(deadline) {
						t.Errorf("%s: not accepted within a minute: %v", sub.ID, err)
						break
					}
					retries.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	go func() {
		defer close(work)
		for i := 0; i < n; i++ {
			select {
			case work <- i:
			case <-ctx.Done():
				return
			}
		}
	}()

	// The kill.
	const key = "{apps}"
	<-kill
	victim, err := e.redis.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	killedAt.Store(start.UnixNano())
	t.Logf("killed the master %s after %d submissions were accepted", victim.Addr(), killAt)
	if e.redis.Mode == state.ModeSingle {
		for victim.Running() {
			time.Sleep(20 * time.Millisecond)
		}
		if err := victim.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("single server restarted after %s", time.Since(start).Round(time.Millisecond))
	} else {
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		now, err := e.redis.WaitFailover(fctx, key, victim)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("failover: %s is master %s after the kill", now.Addr(), time.Since(start).Round(time.Millisecond))
	}
	wg.Wait()
	if f := firstAfterKill.Load(); f != 0 {
		t.Logf("first submission begun after the kill accepted %s after it", time.Duration(f-start.UnixNano()).Round(time.Millisecond))
	}
	if e.redis.Mode != state.ModeSingle {
		// The old master comes back as a replica of the new one.
		if err := victim.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.redis.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Every accepted submission is handled, under exactly one entry, and
	// acknowledged.
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		got := len(entries)
		mu.Unlock()
		p, err := q.Pending(ctx)
		if got == n && err == nil && p == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopConsumer()
	<-consumerDone
	lost, doubled := 0, 0
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("burst-%03d", i)
		switch len(entries[id]) {
		case 0:
			lost++
			t.Errorf("%s (accepted as entry %s) was never handled", id, receipts[i].StreamID)
		case 1:
		default:
			doubled++
			t.Errorf("%s was queued %d times: entries %v", id, len(entries[id]), entries[id])
		}
		st, err := apps.Status(ctx, id)
		if err != nil || st.Generation != 1 || st.Phase != mlsysopsv1.AppQueued || st.RequestID != fmt.Sprintf("req-%03d", i) {
			t.Errorf("status of %s: %+v, %v; want generation 1, Queued, its request id", id, st, err)
		}
	}
	if accepted.Load() != n {
		t.Errorf("%d of %d submissions accepted", accepted.Load(), n)
	}
	t.Logf("%s: %d submissions accepted, %d lost, %d queued twice; %d client retries (%d not confirmed by a replica); %d deliveries, %d marked redelivered",
		e.redis.Mode, accepted.Load(), lost, doubled, retries.Load(), notReplicated.Load(), deliveries, redelivered)
	if p, err := q.Pending(ctx); err != nil || p != 0 {
		t.Errorf("pending after handling everything: %d, %v", p, err)
	}
}

// TestEntryHandedOutOnceReplicated: the consumer reads a submission from
// the master while the master's replica is paused (SIGSTOP), so the
// replica does not hold it. Had the consumer handled it then, a failover
// at that moment would promote the replica without the entry, and the
// user's retry of the unconfirmed submission would be handled a second
// time. The entry is handed out only once the replica has it: while the
// replica is paused the entry is delivered (pending) but not handled;
// resumed, the replica catches up and the entry is handled, once.
// Runs against a Sentinel group when the package runs on a single server.
func TestEntryHandedOutOnceReplicated(t *testing.T) {
	e := replicatedEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	_, replica := onlyReplica(t, ctx, e)
	pid, ok := replica.Pid()
	if !ok {
		t.Fatal("the replica does not run")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)

	sub := state.Submission{ID: "paused-replica", Kind: state.KindDeploy, Spec: appSpec(1), RequestID: "req-paused"}
	if _, err := apps.Submit(ctx, sub); !errors.Is(err, state.ErrNotReplicated) {
		t.Fatalf("submit with the replica paused: %v; want %v", err, state.ErrNotReplicated)
	}

	q, err := apps.Queue(ctx, "", "continuum-0", state.QueueOptions{Block: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	var mu sync.Mutex
	var entries []string
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = q.Run(cctx, func(_ context.Context, en state.Entry) error {
			mu.Lock()
			entries = append(entries, en.ID)
			mu.Unlock()
			handled.Add(1)
			return nil
		})
	}()
	t.Cleanup(func() { stop(); <-done })

	// The consumer has read the entry from the master (it is pending)...
	testbed.Poll(t, "the entry delivered", 50*time.Millisecond, time.Minute, func(ctx context.Context) error {
		if n, err := q.Pending(ctx); err != nil || n == 0 && handled.Load() == 0 {
			return fmt.Errorf("%d pending, %v", n, err)
		}
		return nil
	})
	// ...and has not handled it while the replica lacks it.
	if n := handled.Load(); n != 0 {
		t.Fatalf("the entry was handled %d time(s) while the replica did not hold it", n)
	}
	resume()
	testbed.Poll(t, "the entry handled after the replica resumed", 50*time.Millisecond, time.Minute, func(context.Context) error {
		if handled.Load() == 0 {
			return errors.New("not handled")
		}
		return nil
	})
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(entries) != 1 {
		t.Errorf("handled entries %v; want one", entries)
	}
}

// TestWriteWaitsForReplicaThatLeft: the master's only replica is killed,
// so the master counts no connected replica. Sentinel or the Cluster could
// still promote that replica (it left a moment ago) if the master died
// now, so a submission the master takes meanwhile must not be
// acknowledged as if the master were alone: it is reported unconfirmed
// while the replica stays away, and confirmed once it is back, applied
// once. Runs against a Sentinel group when the package runs on a single
// server.
func TestWriteWaitsForReplicaThatLeft(t *testing.T) {
	e := replicatedEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	master, replica := onlyReplica(t, ctx, e)
	// A first submission with the replica there: the store sees it.
	if _, err := apps.Submit(ctx, state.Submission{ID: "before", Kind: state.KindDeploy, Spec: appSpec(1), RequestID: "req-before"}); err != nil {
		t.Fatal(err)
	}
	if err := replica.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !replica.Running() {
			_ = replica.Start(context.Background())
		}
	})
	// The precondition: the master itself counts no replica now.
	testbed.Poll(t, "the master sees its replica gone", 50*time.Millisecond, time.Minute, func(ctx context.Context) error {
		info, err := master.Info(ctx, "replication")
		if err != nil {
			return err
		}
		if n := info["connected_slaves"]; n != "0" {
			return fmt.Errorf("connected_slaves %s", n)
		}
		return nil
	})

	sub := state.Submission{ID: "while-away", Kind: state.KindDeploy, Spec: appSpec(2), RequestID: "req-away"}
	if _, err := apps.Submit(ctx, sub); !errors.Is(err, state.ErrNotReplicated) {
		t.Fatalf("submit while the replica is away: %v; want %v (acknowledged with no copy that a failover would keep)", err, state.ErrNotReplicated)
	}

	if err := replica.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The user's retry, with the same request id, is confirmed once the
	// replica is back and holds it.
	testbed.Poll(t, "the retried submission confirmed", 200*time.Millisecond, time.Minute, func(ctx context.Context) error {
		_, err := apps.Submit(ctx, sub)
		return err
	})
	st, err := apps.Status(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing was consumed: the stream holds each submission once.
	if n, err := apps.Backlog(ctx); err != nil || n != 2 {
		t.Errorf("stream length %d, %v; want 2 (before, and the retried submission applied once)", n, err)
	}
	if st.StreamID == "" {
		t.Errorf("status of %s names no stream entry: %+v", sub.ID, st)
	}
}

// replicatedEnv runs on the package's Redis mode, or on a Sentinel group
// when that is a single server: what it tests needs a replica.
func replicatedEnv(t *testing.T) *env {
	mode := testbed.TestRedisMode(t)
	if mode == state.ModeSingle {
		mode = state.ModeSentinel
	}
	return envOn(t, testbed.StartRedisDeployment(t, mode))
}

// onlyReplica returns the master of the applications' keys and its one
// replica.
func onlyReplica(t *testing.T, ctx context.Context, e *env) (master, replica *services.Redis) {
	t.Helper()
	master, err := e.redis.MasterFor(ctx, "{apps}")
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := e.redis.ReplicasOf(ctx, master)
	if err != nil || len(replicas) != 1 {
		t.Fatalf("replicas of the master %s: %v, %v; want one", master.Addr(), replicas, err)
	}
	return master, replicas[0]
}

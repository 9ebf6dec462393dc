package state_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
)

// TestNoSubmissionLostAcrossRedisRestart queues 100 submissions; a consumer
// handles a few, leaves some delivered but unacknowledged, and never reads
// the rest. Redis is then restarted (gracefully, and killed) and a fresh
// consumer with the same name must get every unacknowledged submission, none
// twice, and the statuses must be intact.
func TestNoSubmissionLostAcrossRedisRestart(t *testing.T) {
	for _, mode := range []string{"stop", "kill"} {
		t.Run(mode, func(t *testing.T) {
			const n = 100
			e := newEnv(t)
			ctx := ctxT(t)
			apps := e.store.Applications()
			for i := 0; i < n; i++ {
				if _, err := apps.Submit(ctx, state.Submission{ID: fmt.Sprintf("app-%03d", i), Kind: state.KindDeploy, Spec: appSpec(i)}); err != nil {
					t.Fatal(err)
				}
			}
			q, err := apps.Queue(ctx, "", "continuum-0", state.QueueOptions{Count: 30, Block: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			first, err := q.Read(ctx)
			if err != nil || len(first) != 30 {
				t.Fatalf("first read: %d entries, %v", len(first), err)
			}
			handled := map[string]int{}
			for _, en := range first[:10] {
				handled[en.Submission.ID]++
				if err := q.Ack(ctx, en.ID); err != nil {
					t.Fatal(err)
				}
			}

			switch mode {
			case "stop":
				if err := e.redis.Stop(ctx); err != nil {
					t.Fatal(err)
				}
			case "kill":
				if err := e.redis.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.redis.Start(ctx); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, e)

			// The consumer process restarted too: a new Queue, same name.
			q2, err := apps.Queue(ctx, "", "continuum-0", state.QueueOptions{Count: 50, Block: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			redelivered := 0
			for empty := 0; empty < 3; {
				es, err := q2.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) == 0 {
					empty++
					continue
				}
				for _, en := range es {
					if en.Deliveries > 1 {
						redelivered++
					}
					handled[en.Submission.ID]++
					if err := q2.Ack(ctx, en.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := 0; i < n; i++ {
				id := fmt.Sprintf("app-%03d", i)
				if handled[id] != 1 {
					t.Errorf("%s handled %d times, want once", id, handled[id])
				}
				st, err := apps.Status(ctx, id)
				if err != nil || st.Phase != mlsysopsv1.AppQueued || st.Generation != 1 {
					t.Errorf("status of %s after restart: %+v, %v", id, st, err)
				}
			}
			if redelivered != 20 {
				t.Errorf("%d entries were marked as redelivered, want the 20 read but not acknowledged", redelivered)
			}
			if p, err := q2.Pending(ctx); err != nil || p != 0 {
				t.Errorf("pending after handling everything: %d, %v", p, err)
			}
		})
	}
}

// TestCrashedConsumerEntryRedelivered: a consumer reads entries and dies
// before acknowledging them; another consumer gets them once they are idle
// for ClaimIdle, and not before.
//
// Redis measures the idle time, so the test holds no window of its own:
// the consumer that must not claim uses a ClaimIdle no run comes near, and
// the one that claims is checked against the time that passed since the
// first read began, which bounds every idle time Redis can have seen.
func TestCrashedConsumerEntryRedelivered(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	for i := 0; i < 3; i++ {
		if _, err := apps.Submit(ctx, state.Submission{ID: fmt.Sprintf("app-%03d", i), Kind: state.KindDeploy, Spec: appSpec(i)}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := apps.Queue(ctx, "", "continuum-a", state.QueueOptions{Block: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	readAt := time.Now()
	got, err := a.Read(ctx)
	if err != nil || len(got) != 3 {
		t.Fatalf("a read %d entries, %v", len(got), err)
	}
	// a "crashes" here: it never acknowledges.

	// While a's entries are fresh, another consumer sees nothing.
	patient, err := apps.Queue(ctx, "", "continuum-b", state.QueueOptions{ClaimIdle: time.Hour, Block: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if es, err := patient.Read(ctx); err != nil || len(es) != 0 {
		t.Fatalf("b read %d entries idle for less than its ClaimIdle (err %v); it must not steal a live consumer's work", len(es), err)
	}
	// The same consumer with a short ClaimIdle gets them once Redis has
	// seen them idle that long.
	const idle = 2 * time.Second
	opts := state.QueueOptions{ClaimIdle: idle, Block: 50 * time.Millisecond}
	b, err := apps.Queue(ctx, "", "continuum-b", opts)
	if err != nil {
		t.Fatal(err)
	}
	var claimed []state.Entry
	deadline := time.Now().Add(30 * time.Second)
	for len(claimed) < 3 && time.Now().Before(deadline) {
		es, err := b.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) > 0 && time.Since(readAt) < idle {
			t.Fatalf("b claimed %d entries %v after a began reading them, before they could be idle for %v", len(es), time.Since(readAt), idle)
		}
		claimed = append(claimed, es...)
	}
	if len(claimed) != 3 {
		t.Fatalf("b claimed %d of a's 3 entries", len(claimed))
	}
	var ids, wantIDs []string
	for i, en := range claimed {
		ids = append(ids, en.ID)
		wantIDs = append(wantIDs, got[i].ID)
		if en.Deliveries != 2 {
			t.Errorf("entry %s: deliveries %d, want 2", en.ID, en.Deliveries)
		}
	}
	sort.Strings(ids)
	sort.Strings(wantIDs)
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("claimed entries (-a read +b claimed):\n%s", diff)
	}
	if err := b.Ack(ctx, ids...); err != nil {
		t.Fatal(err)
	}
	if p, _ := b.Pending(ctx); p != 0 {
		t.Errorf("%d entries still pending after b acknowledged", p)
	}
	// a comes back (a restarted process with the same name): nothing left.
	a2, err := apps.Queue(ctx, "", "continuum-a", opts)
	if err != nil {
		t.Fatal(err)
	}
	if es, err := a2.Read(ctx); err != nil || len(es) != 0 {
		t.Errorf("a read %d entries after b handled them (err %v)", len(es), err)
	}
}

// TestPoisonSubmissionDeadLettered: an entry whose handling fails every time
// goes to the dead-letter stream after MaxDeliveries, and the queue moves on.
func TestPoisonSubmissionDeadLettered(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	for _, id := range []string{"poison", "good"} {
		if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindDeploy, Spec: appSpec(0)}); err != nil {
			t.Fatal(err)
		}
	}
	q, err := apps.Queue(ctx, "", "continuum-0", state.QueueOptions{ClaimIdle: 10 * time.Millisecond, Block: 20 * time.Millisecond, MaxDeliveries: 3})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = q.Run(rctx, func(ctx context.Context, en state.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			attempts[en.Submission.ID]++
			if en.Submission.ID == "poison" {
				return errors.New("cannot place this one")
			}
			return nil
		})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		dead, err := q.DeadLetters(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) == 1 {
			if dead[0].Values["reason"] == "" {
				t.Error("dead letter without a reason")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the poison entry never reached the dead-letter stream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if attempts["poison"] != 3 || attempts["good"] != 1 {
		t.Errorf("attempts = %v, want poison 3 (MaxDeliveries) and good 1", attempts)
	}
	if p, _ := q.Pending(ctx); p != 0 {
		t.Errorf("%d entries still pending", p)
	}
	// Its status ends Failed, with the reason: left Queued, it would
	// never end (or be swept once its entry left the stream).
	if st, err := apps.Status(ctx, "poison"); err != nil || st.Phase != mlsysopsv1.AppFailed || !strings.Contains(st.Message, "delivered") {
		t.Errorf("status of the dead-lettered submission: %+v (%v), want Failed with the reason", st, err)
	}
}

// TestSubmissionRules covers duplicate detection (atomic under
// concurrency), idempotent retries, update and removal rules, and status
// updates with generations.
func TestSubmissionRules(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()

	t.Run("concurrent deploys of one id: exactly one wins", func(t *testing.T) {
		const racers = 20
		var wg sync.WaitGroup
		results := make([]error, racers)
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, results[i] = apps.Submit(ctx, state.Submission{ID: "race", Kind: state.KindDeploy, Spec: appSpec(i), RequestID: fmt.Sprint("req-", i)})
			}(i)
		}
		wg.Wait()
		wins := 0
		for _, err := range results {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, state.ErrConflict):
				t.Errorf("unexpected error %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d deploys won, want 1", wins)
		}
		n, err := apps.Backlog(ctx)
		if err != nil || n != 1 {
			t.Errorf("stream holds %d entries (%v), want 1", n, err)
		}
	})

	t.Run("retry with the same request id is idempotent", func(t *testing.T) {
		sub := state.Submission{ID: "retry", Kind: state.KindDeploy, Spec: appSpec(1), RequestID: "req-1"}
		r1, err := apps.Submit(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := apps.Submit(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		if !r2.Existing || r2.StreamID != r1.StreamID || r2.Generation != r1.Generation {
			t.Errorf("retry receipt %+v, want the first one %+v marked existing", r2, r1)
		}
		st, err := apps.Status(ctx, "retry")
		if err != nil || st.StreamID != r1.StreamID || st.Phase != mlsysopsv1.AppQueued {
			t.Errorf("status %+v, %v: want Queued at stream entry %s", st, err, r1.StreamID)
		}
		spec, err := apps.Spec(ctx, "retry")
		if err != nil || string(spec) != string(appSpec(1)) {
			t.Errorf("spec %s, %v", spec, err)
		}
	})

	t.Run("lifecycle", func(t *testing.T) {
		if _, err := apps.Submit(ctx, state.Submission{ID: "ghost", Kind: state.KindRemove}); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("removing an unknown app: %v, want ErrNotFound", err)
		}
		r, err := apps.Submit(ctx, state.Submission{ID: "life", Kind: state.KindDeploy, Spec: appSpec(2)})
		if err != nil {
			t.Fatal(err)
		}
		placement := map[string]string{"infer": "cluster-1/node-1"}
		st, err := apps.SetStatus(ctx, "life", state.StatusUpdate{Phase: mlsysopsv1.AppRunning, Message: "all components ready", Placement: placement, Generation: r.Generation})
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase != mlsysopsv1.AppRunning || !cmp.Equal(st.Placement, placement) || st.UpdatedAt.Before(st.SubmittedAt) {
			t.Errorf("status after update: %+v", st)
		}
		up, err := apps.Submit(ctx, state.Submission{ID: "life", Kind: state.KindUpdate, Spec: appSpec(3)})
		if err != nil || up.Generation != r.Generation+1 || up.Phase != mlsysopsv1.AppQueued {
			t.Fatalf("update: %+v, %v", up, err)
		}
		if _, err := apps.SetStatus(ctx, "life", state.StatusUpdate{Phase: mlsysopsv1.AppFailed, Generation: r.Generation}); !errors.Is(err, state.ErrStale) {
			t.Errorf("status update for the superseded generation: %v, want ErrStale", err)
		}
		rm, err := apps.Submit(ctx, state.Submission{ID: "life", Kind: state.KindRemove})
		if err != nil || rm.Phase != mlsysopsv1.AppRemoving {
			t.Fatalf("remove: %+v, %v", rm, err)
		}
		var ce *state.ConflictError
		if _, err := apps.Submit(ctx, state.Submission{ID: "life", Kind: state.KindRemove}); !errors.As(err, &ce) || ce.Phase != mlsysopsv1.AppRemoving {
			t.Errorf("second removal: %v, want a conflict with phase Removing", err)
		}
		if _, err := apps.Submit(ctx, state.Submission{ID: "life", Kind: state.KindDeploy, Spec: appSpec(4)}); !errors.Is(err, state.ErrConflict) {
			t.Errorf("deploy while removing: %v, want ErrConflict", err)
		}
		// A late report of the old deployment does not undo the removal.
		if st, err := apps.SetStatus(ctx, "life", state.StatusUpdate{Phase: mlsysopsv1.AppRunning, Message: "running on cloud-1"}); err != nil ||
			st.Phase != mlsysopsv1.AppRemoving || st.Message != "" {
			t.Errorf("status report while removing: %+v, %v; want it to stay Removing", st, err)
		}
		page, err := apps.Page(ctx, state.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range page.Items {
			ids = append(ids, s.ID)
		}
		if diff := cmp.Diff([]string{"life", "race", "retry"}, ids); diff != "" || page.Total != 3 || page.Next != "" {
			t.Errorf("Page ids (-want +got):\n%s (total %d, next %q)", diff, page.Total, page.Next)
		}
		if err := apps.Forget(ctx, "life"); err != nil {
			t.Fatal(err)
		}
		if _, err := apps.Status(ctx, "life"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("status after Forget: %v", err)
		}
		phases, err := apps.Phases(ctx)
		if err != nil || phases["life"] != "" || len(phases) != 2 {
			t.Errorf("phases after Forget: %v, %v", phases, err)
		}
		again, err := apps.Submit(ctx, state.Submission{ID: "life", Kind: state.KindDeploy, Spec: appSpec(5)})
		if err != nil || again.Generation != 1 {
			t.Fatalf("deploy after removal: %+v, %v", again, err)
		}
		st, _ = apps.Status(ctx, "life")
		if st.Placement != nil {
			t.Errorf("a new deployment kept the old placement %v", st.Placement)
		}
		if _, err := apps.SetStatus(ctx, "life", state.StatusUpdate{Phase: "Scheduled"}); err == nil {
			t.Error("a phase outside mlsysopsv1.AppPhases was accepted")
		}
	})

	t.Run("tracking an application deployed without a submission", func(t *testing.T) {
		created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		if _, err := apps.SetStatus(ctx, "kubectl-app", state.StatusUpdate{Phase: mlsysopsv1.AppRunning}); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("untracked status update: %v, want ErrNotFound", err)
		}
		st, err := apps.SetStatus(ctx, "kubectl-app", state.StatusUpdate{Phase: mlsysopsv1.AppRunning, Message: "running on [cloud-1]",
			Placement: map[string]string{"web": "cloud-1/cloud-1"}, TrackSince: created})
		if err != nil || st.Phase != mlsysopsv1.AppRunning || st.Kind != state.KindDeploy || st.Generation != 0 || !st.SubmittedAt.Equal(created) || !st.Written {
			t.Fatalf("tracked: %+v, %v (want Written: it is in Karmada)", st, err)
		}
		again, err := apps.SetStatus(ctx, "kubectl-app", state.StatusUpdate{Phase: mlsysopsv1.AppRunning, Message: "running on [cloud-1]", TrackSince: created})
		if err != nil || !again.UpdatedAt.Equal(st.UpdatedAt) {
			t.Errorf("the same status again rewrote it: %+v, %v", again, err)
		}
		if _, err := apps.Spec(ctx, "kubectl-app"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("a tracked application has a spec: %v", err)
		}
		rm, err := apps.Submit(ctx, state.Submission{ID: "kubectl-app", Kind: state.KindRemove})
		if err != nil || rm.Phase != mlsysopsv1.AppRemoving || rm.Generation != 1 {
			t.Errorf("removing a tracked application: %+v, %v", rm, err)
		}
		if err := apps.Forget(ctx, "kubectl-app"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("written once in Karmada, until forgotten", func(t *testing.T) {
		submitOK := func(sub state.Submission) state.Receipt {
			t.Helper()
			r, err := apps.Submit(ctx, sub)
			if err != nil {
				t.Fatalf("%s written: %v", sub.Kind, err)
			}
			return r
		}
		st := submitOK(state.Submission{ID: "written", Kind: state.KindDeploy, Spec: appSpec(6)})
		if got, _ := apps.Status(ctx, "written"); got.Written {
			t.Fatalf("a queued deploy is Written: %+v", got)
		}
		got, err := apps.SetStatus(ctx, "written", state.StatusUpdate{Phase: mlsysopsv1.AppScheduling, Generation: st.Generation + 1, Written: true})
		if !errors.Is(err, state.ErrStale) || got.Written {
			t.Fatalf("a stale update marked it Written: %+v, %v", got, err)
		}
		if got, err = apps.SetStatus(ctx, "written", state.StatusUpdate{Phase: mlsysopsv1.AppScheduling, Written: true}); err != nil || !got.Written {
			t.Fatalf("after the intake wrote it: %+v, %v", got, err)
		}
		submitOK(state.Submission{ID: "written", Kind: state.KindUpdate, Spec: appSpec(7)})
		if got, err = apps.SetStatus(ctx, "written", state.StatusUpdate{Phase: mlsysopsv1.AppRunning}); err != nil || !got.Written || got.Kind != state.KindUpdate {
			t.Errorf("an update and a status without Written cleared it: %+v, %v", got, err)
		}
		if err := apps.Forget(ctx, "written"); err != nil {
			t.Fatal(err)
		}
		submitOK(state.Submission{ID: "written", Kind: state.KindDeploy, Spec: appSpec(8)})
		if got, _ := apps.Status(ctx, "written"); got.Written {
			t.Errorf("a deploy after the status was forgotten is Written: %+v", got)
		}
		if err := apps.Forget(ctx, "written"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ML deployments are a separate collection", func(t *testing.T) {
		ml := e.store.MLDeployments()
		if _, err := ml.Submit(ctx, state.Submission{ID: "race", Kind: state.KindDeploy, Spec: appSpec(9)}); err != nil {
			t.Errorf("an ML deployment named like an application: %v", err)
		}
		n, err := ml.Backlog(ctx)
		if err != nil || n != 1 {
			t.Errorf("ML stream holds %d entries (%v), want 1", n, err)
		}
	})
}

// TestPagedList pages 250 ids in three phases through the sorted-set
// indexes, with and without a phase filter, and checks the indexes follow
// phase changes and Forget.
func TestPagedList(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	const n = 250
	want := map[mlsysopsv1.AppPhase][]string{}
	var all []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("app-%03d", i)
		if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindDeploy, Spec: appSpec(i)}); err != nil {
			t.Fatal(err)
		}
		phase := mlsysopsv1.AppQueued
		switch i % 5 {
		case 0:
			phase = mlsysopsv1.AppRunning
		case 1:
			phase = mlsysopsv1.AppFailed
		}
		if phase != mlsysopsv1.AppQueued {
			if _, err := apps.SetStatus(ctx, id, state.StatusUpdate{Phase: phase}); err != nil {
				t.Fatal(err)
			}
		}
		want[phase] = append(want[phase], id)
		all = append(all, id)
	}
	pages := func(o state.ListOptions) (ids []string, totals []int64, count int) {
		t.Helper()
		for {
			p, err := apps.Page(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			count++
			totals = append(totals, p.Total)
			for _, st := range p.Items {
				ids = append(ids, st.ID)
				if len(o.Phases) > 0 && st.Phase != o.Phases[0] && (len(o.Phases) < 2 || st.Phase != o.Phases[1]) {
					t.Errorf("%s is %s, outside %v", st.ID, st.Phase, o.Phases)
				}
			}
			if p.Next == "" {
				return ids, totals, count
			}
			if len(p.Items) != o.Limit {
				t.Errorf("a page before the last has %d items, want %d", len(p.Items), o.Limit)
			}
			o.After = p.Next
		}
	}
	ids, totals, count := pages(state.ListOptions{Limit: 100})
	if diff := cmp.Diff(all, ids); diff != "" || count != 3 || totals[0] != n || totals[2] != n {
		t.Errorf("every id (-want +got):\n%s\n%d pages, totals %v", diff, count, totals)
	}
	ids, totals, _ = pages(state.ListOptions{Limit: 20, Phases: []mlsysopsv1.AppPhase{mlsysopsv1.AppRunning}})
	if diff := cmp.Diff(want[mlsysopsv1.AppRunning], ids); diff != "" || totals[0] != int64(len(want[mlsysopsv1.AppRunning])) {
		t.Errorf("Running ids (-want +got):\n%s\ntotals %v", diff, totals)
	}
	two := append(append([]string{}, want[mlsysopsv1.AppRunning]...), want[mlsysopsv1.AppFailed]...)
	sort.Strings(two)
	ids, totals, _ = pages(state.ListOptions{Limit: 7, Phases: []mlsysopsv1.AppPhase{mlsysopsv1.AppFailed, mlsysopsv1.AppRunning}})
	if diff := cmp.Diff(two, ids); diff != "" || totals[0] != int64(len(two)) {
		t.Errorf("Running and Failed ids (-want +got):\n%s\ntotals %v", diff, totals)
	}
	if p, err := apps.Page(ctx, state.ListOptions{Phases: []mlsysopsv1.AppPhase{mlsysopsv1.AppDegraded}}); err != nil || p.Total != 0 || len(p.Items) != 0 {
		t.Errorf("no Degraded id: %+v, %v", p, err)
	}

	// A phase change moves the id between phases; Forget drops it.
	if _, err := apps.SetStatus(ctx, "app-000", state.StatusUpdate{Phase: mlsysopsv1.AppDegraded}); err != nil {
		t.Fatal(err)
	}
	if err := apps.Forget(ctx, "app-005"); err != nil {
		t.Fatal(err)
	}
	p, err := apps.Page(ctx, state.ListOptions{Limit: 2, Phases: []mlsysopsv1.AppPhase{mlsysopsv1.AppRunning}})
	if err != nil || p.Total != int64(len(want[mlsysopsv1.AppRunning])-2) || len(p.Items) != 2 || p.Items[0].ID != "app-010" || p.Next != "app-015" {
		t.Errorf("Running after a move and a Forget: %+v, %v", p, err)
	}
	if p, err := apps.Page(ctx, state.ListOptions{Limit: 1, After: "app-249"}); err != nil || len(p.Items) != 0 || p.Next != "" || p.Total != n-1 {
		t.Errorf("after the last id: %+v, %v", p, err)
	}
	phases, err := apps.Phases(ctx)
	if err != nil || len(phases) != n-1 || phases["app-000"] != mlsysopsv1.AppDegraded || phases["app-001"] != mlsysopsv1.AppFailed || phases["app-002"] != mlsysopsv1.AppQueued {
		t.Errorf("phases: %d ids, app-000 %s, app-001 %s, %v", len(phases), phases["app-000"], phases["app-001"], err)
	}
}

// ForgetIf forgets a status only while no submission was accepted since
// it was read.
func TestForgetIfKeepsAResubmission(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	for _, id := range []string{"kept", "gone"} {
		if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindDeploy, Spec: appSpec(1)}); err != nil {
			t.Fatal(err)
		}
	}
	read := map[string]state.Status{}
	for _, id := range []string{"kept", "gone"} {
		st, err := apps.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		read[id] = st
	}
	// An update of "kept" is accepted after its status was read.
	if _, err := apps.Submit(ctx, state.Submission{ID: "kept", Kind: state.KindUpdate, Spec: appSpec(2)}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"kept": false, "gone": true} {
		forgot, err := apps.ForgetIf(ctx, id, read[id].StreamID)
		if err != nil || forgot != want {
			t.Errorf("ForgetIf(%s) = %v, %v; want %v", id, forgot, err, want)
		}
		_, err = apps.Status(ctx, id)
		if errors.Is(err, state.ErrNotFound) != want {
			t.Errorf("status of %s after ForgetIf: %v", id, err)
		}
	}
	if phases, err := apps.Phases(ctx); err != nil || len(phases) != 1 || phases["kept"] != mlsysopsv1.AppQueued {
		t.Errorf("phases after ForgetIf: %v, %v", phases, err)
	}
	// Forgetting what is gone already forgets nothing.
	if forgot, err := apps.ForgetIf(ctx, "gone", read["gone"].StreamID); err != nil || forgot {
		t.Errorf("ForgetIf of a forgotten id = %v, %v", forgot, err)
	}
}

// TestQueueWorkers: with several workers, a read's entries of different
// applications are handled at once, those of one application one after
// the other in the order they were submitted, and every one is
// acknowledged.
func TestQueueWorkers(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	apps := e.store.Applications()
	const ids = 6
	var want []string
	for i := range ids {
		id := fmt.Sprintf("w%d", i)
		if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindDeploy, Spec: appSpec(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ids {
		id := fmt.Sprintf("w%d", i)
		if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindUpdate, Spec: appSpec(i + 10)}); err != nil {
			t.Fatal(err)
		}
		if _, err := apps.Submit(ctx, state.Submission{ID: id, Kind: state.KindRemove}); err != nil {
			t.Fatal(err)
		}
		want = append(want, string(state.KindDeploy), string(state.KindUpdate), string(state.KindRemove))
	}
	q, err := apps.Queue(ctx, "", "continuum-0", state.QueueOptions{Block: 20 * time.Millisecond, Count: 3 * ids, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu             sync.Mutex
		order          = map[string][]string{}
		inFlight, most int
		handled        int
		rctx, cancel   = context.WithCancel(ctx)
		done           = make(chan struct{})
	)
	go func() {
		defer close(done)
		_ = q.Run(rctx, func(ctx context.Context, en state.Entry) error {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			order[en.Submission.ID] = append(order[en.Submission.ID], string(en.Submission.Kind))
			handled++
			return nil
		})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := handled
		mu.Unlock()
		p, err := q.Pending(ctx)
		if err == nil && n == 3*ids && p == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d entries handled, %d pending (err %v)", n, 3*ids, p, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i := range ids {
		id := fmt.Sprintf("w%d", i)
		if diff := cmp.Diff(want[:3], order[id]); diff != "" {
			t.Errorf("%s handled out of order (-want +got):\n%s", id, diff)
		}
	}
	if most < 2 || most > 4 {
		t.Errorf("at most %d entries in flight at once, want 2 to 4 (Workers 4)", most)
	}
}

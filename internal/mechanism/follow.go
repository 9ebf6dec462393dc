package mechanism

import (
	"context"
	"sync"
	"time"
)

// Follower watches the work of pending plans: each followed plan is
// checked every Poll until nothing is left to wait for, the check fails,
// or Timeout passes, and its outcome is delivered once. Close stops every
// follow without an outcome (the engine times those plans out).
type Follower struct {
	Timeout, Poll time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewFollower returns a follower; zero durations take the defaults given.
func NewFollower(timeout, poll, defaultTimeout time.Duration) *Follower {
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	if poll <= 0 {
		poll = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Follower{Timeout: timeout, Poll: poll, ctx: ctx, cancel: cancel}
}

// Follow starts following one plan. check says what the plan still waits
// for ("" when done) or fails it; each call gets 30 s. done receives nil,
// check's error, or timedOut's error built from what was still awaited.
func (f *Follower) Follow(check func(ctx context.Context) (waiting string, err error), timedOut func(waiting string) error, done func(error)) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		deadline := time.Now().Add(f.Timeout)
		t := time.NewTicker(f.Poll)
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(f.ctx, 30*time.Second)
			waiting, err := check(ctx)
			cancel()
			if f.ctx.Err() != nil {
				return // the agent stops; the engine times the plan out
			}
			switch {
			case err != nil:
				done(err)
				return
			case waiting == "":
				done(nil)
				return
			case time.Now().After(deadline):
				done(timedOut(waiting))
				return
			}
			select {
			case <-f.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops every follow and waits for them.
func (f *Follower) Close() {
	f.cancel()
	f.wg.Wait()
}

// FollowTimeout is how long a placement mechanism follows a plan, given
// how long the engine waits for pending plans (mape.Config.PendingTimeout):
// a little less, so that the mechanism's reason is the one recorded. Zero
// leaves the mechanism's default.
func FollowTimeout(pending time.Duration) time.Duration {
	if pending <= 0 {
		return 0 // the mechanism's default
	}
	return pending - pending/10
}

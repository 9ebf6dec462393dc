package messaging

import (
	"errors"
	"math/rand/v2"
	"time"

	"mellium.im/xmpp/stream"
)

// backoff is a jittered exponential backoff ("full jitter": a uniform delay
// between 0 and min(max, min·2^attempt)), so a thousand agents reconnecting
// after a server restart spread out instead of arriving together.
type backoff struct {
	min, max time.Duration
	attempt  int
	rand     func() float64
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, rand: rand.Float64}
}

// next returns the delay before the next attempt and counts the attempt.
func (b *backoff) next() time.Duration {
	ceiling := b.max
	if b.attempt < 32 {
		if d := b.min << b.attempt; d > 0 && d < b.max {
			ceiling = d
		}
	}
	b.attempt++
	d := time.Duration(b.rand() * float64(ceiling))
	if d < b.min {
		d = b.min
	}
	return d
}

// reset starts the sequence again after a stable session.
func (b *backoff) reset() { b.attempt = 0 }

// disconnectKind classifies why a session ended, which decides the wait
// before the next attempt.
type disconnectKind int

const (
	disconnectOther    disconnectKind = iota
	disconnectShutdown                // server announced system-shutdown or reset
	disconnectConflict                // another session took over our resource
	disconnectAuth                    // the server refused our credentials, or we had none
)

func (k disconnectKind) String() string {
	switch k {
	case disconnectShutdown:
		return "shutdown"
	case disconnectConflict:
		return "conflict"
	case disconnectAuth:
		return "auth"
	}
	return "other"
}

func classifyDisconnect(err error) disconnectKind {
	var se stream.Error
	if errors.As(err, &se) {
		switch se.Err {
		case stream.SystemShutdown.Err, stream.Reset.Err:
			return disconnectShutdown
		case stream.Conflict.Err:
			return disconnectConflict
		}
	}
	if errors.Is(err, errAuth) || errors.Is(err, errNoCredentials) {
		return disconnectAuth
	}
	return disconnectOther
}

// retryDelay returns the re-send delay after attempts sends of one message:
// base doubled per attempt, capped at max.
func retryDelay(base, max time.Duration, attempts int) time.Duration {
	if attempts <= 1 {
		return base
	}
	if attempts > 32 {
		return max
	}
	d := base << (attempts - 1)
	if d <= 0 || d > max {
		return max
	}
	return d
}

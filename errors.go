package ratelimit

import (
	"context"
	"errors"
)

// Errors returned by the Limiter. Each is matched with errors.Is; the
// returned error's message says what exactly was wrong.
var (
	// ErrInvalidRule means a Rule cannot be enforced: an empty or too long
	// name, Rate < 1, Window < 1µs, a Penalty outside its documented ranges,
	// an unknown Kind or Period, a Limit field the rule's Kind does not take,
	// or a GCRA bucket too large to keep exactly.
	ErrInvalidRule = errors.New("ratelimit: invalid rule")
	// ErrInvalidKey means the key is empty, or AllowGroup's group is empty or
	// longer than MaxKeyLength.
	ErrInvalidKey = errors.New("ratelimit: invalid key")
	// ErrInvalidN means AllowN was asked for n < 1 or n > Rate (n > Burst
	// for a GCRA rule).
	ErrInvalidN = errors.New("ratelimit: invalid n")
	// ErrClosed means the Limiter was closed.
	ErrClosed = errors.New("ratelimit: limiter closed")
	// ErrNilContext means a method was given a nil context.Context: pass
	// context.Background(), or the request's context, instead. Every
	// method that takes a context returns it, on every path.
	ErrNilContext = errors.New("ratelimit: nil context.Context (pass context.Background() or the request's context)")
	// ErrInvalidBan means Ban was asked to ban under a rule without a
	// Penalty, or for less than a microsecond.
	ErrInvalidBan = errors.New("ratelimit: invalid ban")
	// ErrInvalidOptions means New or Dial was given Options out of range.
	ErrInvalidOptions = errors.New("ratelimit: invalid options")
	// ErrUnavailable means Redis could not be used for a call that has no
	// local substitute (Reset and Ban, which then change the local state
	// only, until the write-back brings them to Redis). The error wraps the
	// cause.
	ErrUnavailable = errors.New("ratelimit: redis unavailable")
	// ErrRedis wraps an error reply that means misuse rather than an outage
	// (WRONGTYPE on a key another program wrote, a script error). Such
	// replies are returned, not decided locally, and do not trip the breaker.
	ErrRedis = errors.New("ratelimit: redis error")
)

// usable returns the error of a call that must not go on: ErrClosed after
// Close, ErrNilContext for a nil ctx. Every method that takes a context
// asks it first, so both paths, Redis and local, answer alike.
func (l *Limiter) usable(ctx context.Context) error {
	if l.closed.Load() {
		return ErrClosed
	}
	if ctx == nil {
		return ErrNilContext
	}
	return nil
}

package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// sleeper is a Clock that can also tell when a duration has passed on it,
// as ratelimittest.Clock can. Wait sleeps on such a clock; on any other it
// sleeps in real time.
type sleeper interface {
	After(d time.Duration) <-chan time.Time
}

// Wait blocks until one event for key is allowed under rule (and records
// it), or ctx ends. It is for clients pacing their own calls: after each
// rejection it sleeps for the Result's RetryAfter, so it asks Redis once per
// chance rather than polling it. It returns the allowing Result; a rejection
// counts a violation as Allow's would, so Wait suits rules without a
// Penalty best.
//
// When ctx has a deadline before the call could pass (RetryAfter from now),
// Wait returns the rejection at once with an error wrapping
// context.DeadlineExceeded. With Options.Clock set to a clock that has an
// After method (as ratelimittest.Clock has), Wait sleeps on that clock;
// ctx's deadline is still real time.
func (l *Limiter) Wait(ctx context.Context, rule Rule, key string) (Result, error) {
	for {
		r, err := l.Allow(ctx, rule, key)
		if err != nil || r.Allowed {
			return r, err
		}
		wait := max(r.RetryAfter, time.Microsecond)
		if err := l.sleep(ctx, wait); err != nil {
			return r, fmt.Errorf("rule %q allows key %q in %v: %w", rule.Name, key, wait, err)
		}
	}
}

// sleep waits for d on the limiter's clock, or until ctx ends. When ctx's
// deadline comes before d has passed, it returns at once: waiting could
// only end in the deadline.
func (l *Limiter) sleep(ctx context.Context, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return fmt.Errorf("%w: the wait ends after the context's deadline", context.DeadlineExceeded)
	}
	var wake <-chan time.Time
	if s, ok := l.set.Clock.(sleeper); ok {
		wake = s.After(d)
	} else {
		t := time.NewTimer(d)
		defer t.Stop()
		wake = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
		return nil
	}
}

// Package ratelimittest helps users test code that uses package ratelimit.
//
// Its Clock is a fake clock that moves only when the test says so. Pass it as
// ratelimit.Options.Clock and every decision, on Redis and in the local
// fallback, is made at the time the test chose:
//
//	clk := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	lim, _ := ratelimit.New(client, ratelimit.Options{Clock: clk})
//	// ... exhaust the limit ...
//	clk.Advance(time.Minute) // the window has slid past every event
package ratelimittest

import (
	"time"

	"github.com/ratelimit-go/ratelimit/internal/clock"
)

// Clock is a fake clock for tests: it reads the time it was last set to. It
// satisfies ratelimit.Clock and is safe for concurrent use.
type Clock struct {
	fake *clock.Fake
}

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock {
	return &Clock{fake: clock.NewFake(start)}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time { return c.fake.Now() }

// Advance moves the clock forward by d (backwards when d is negative) and
// returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time { return c.fake.Advance(d) }

// Set moves the clock to t, which may be earlier than its current time.
func (c *Clock) Set(t time.Time) { c.fake.Set(t) }

// After returns a channel that receives the clock's time once the clock
// has been moved to d after now or later. Limiter.Wait sleeps on it, so a
// test drives Wait by moving the clock.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.fake.After(d) }

// Sleepers returns how many channels from After have not fired yet: a test
// can wait until a goroutine in Limiter.Wait is asleep before it moves the
// clock.
func (c *Clock) Sleepers() int { return c.fake.Waiters() }

// Package clock holds the limiter's clocks: the process clock (Process),
// its time when ratelimit.Options.Clock is nil, and the fake clock behind
// ratelimittest.Clock (Fake), which moves only when a test moves it and
// wakes the sleepers whose time has come.
package clock

import (
	"sync"
	"time"
)

// Fake is a clock that moves only when told to. The zero value reads as the
// zero time; a Fake is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex // guards now and waiters
	now     time.Time
	waiters []waiter
}

// waiter is a channel After handed out, due at a fake time.
type waiter struct {
	at time.Time
	c  chan time.Time
}

// NewFake returns a Fake that reads start until it is moved.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake forward by d (backwards when d is negative) and
// returns the new time.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.wake()
	return f.now
}

// Set moves the fake to t, which may be earlier than its current time.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
	f.wake()
}

// After returns a channel that receives the fake's time once the fake has
// been moved to d after now or later (at once when d <= 0).
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan time.Time, 1)
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), c: c})
	f.wake()
	return c
}

// Waiters returns how many channels from After have not fired yet, so a
// test can wait until a goroutine is asleep before it moves the clock.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// wake fires the waiters that are due. The caller holds f.mu.
func (f *Fake) wake() {
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.After(f.now) {
			kept = append(kept, w)
			continue
		}
		w.c <- f.now
	}
	clear(f.waiters[len(kept):])
	f.waiters = kept
}

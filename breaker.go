package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerState is the state of the circuit breaker in front of Redis.
type BreakerState int

const (
	// BreakerClosed: calls go to Redis.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: one call probes Redis; the others are decided locally.
	BreakerHalfOpen
	// BreakerOpen: every call is decided locally until Options.ProbeAfter
	// has passed.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

func fromGobreaker(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// breaker wraps a gobreaker with a lock-free check of its state: while it is
// open and not yet due for a probe, calls skip the gobreaker (and its mutex)
// altogether.
type breaker struct {
	cb         *gobreaker.CircuitBreaker[decision]
	state      atomic.Int32 // a BreakerState, copied from OnStateChange
	openedAt   atomic.Int64 // process clock, UnixNano, of the last opening
	probeAfter time.Duration
	changes    *changeQueue
}

func newBreaker(s *settings, changes *changeQueue) *breaker {
	b := &breaker{probeAfter: s.ProbeAfter, changes: changes}
	trip := uint32(s.TripAfter)
	b.cb = gobreaker.NewCircuitBreaker[decision](gobreaker.Settings{
		Name:        "redis",
		MaxRequests: 1,
		Timeout:     s.ProbeAfter,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= trip },
		// Runs under the gobreaker's mutex: only atomics and a queue here.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.openedAt.Store(time.Now().UnixNano())
			}
			b.state.Store(int32(fromGobreaker(to)))
			changes.push(fromGobreaker(from), fromGobreaker(to))
		},
		// The request functions return a *callError unwrapped, or nil.
		IsSuccessful: func(err error) bool {
			ce, ok := err.(*callError)
			return err == nil || ok && ce.kind == misuse
		},
		IsExcluded: func(err error) bool {
			ce, ok := err.(*callError)
			return ok && ce.kind == callerGone
		},
	})
	return b
}

// resting reports whether the breaker is open and not yet due for a probe.
func (b *breaker) resting() bool {
	return BreakerState(b.state.Load()) == BreakerOpen &&
		time.Now().UnixNano() < b.openedAt.Load()+int64(b.probeAfter)
}

// untilProbe returns how long until the breaker lets Redis be tried again.
func (b *breaker) untilProbe() time.Duration {
	if BreakerState(b.state.Load()) != BreakerOpen {
		return b.probeAfter
	}
	left := time.Duration(b.openedAt.Load() + int64(b.probeAfter) - time.Now().UnixNano())
	return max(left, time.Millisecond)
}

// stateChange is one transition of the breaker.
type stateChange struct{ from, to BreakerState }

// changeQueue hands breaker state changes from under the gobreaker's mutex
// to a goroutine that calls the user's hook and logs them, in order.
type changeQueue struct {
	mu      sync.Mutex // guards pending
	pending []stateChange
	wake    chan struct{}
}

func newChangeQueue() *changeQueue {
	return &changeQueue{wake: make(chan struct{}, 1)}
}

func (q *changeQueue) push(from, to BreakerState) {
	q.mu.Lock()
	q.pending = append(q.pending, stateChange{from, to})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run delivers changes to handle until done is closed, then delivers what
// is left.
func (q *changeQueue) run(done <-chan struct{}, handle func(stateChange)) {
	for {
		select {
		case <-q.wake:
		case <-done:
			q.drain(handle)
			return
		}
		q.drain(handle)
	}
}

func (q *changeQueue) drain(handle func(stateChange)) {
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		q.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, c := range batch {
			handle(c)
		}
	}
}

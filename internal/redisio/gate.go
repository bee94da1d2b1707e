// Package redisio holds what the library's Redis calls go through besides
// the client: admission control per master (Gate), the shared deadline
// that bounds every call by the Timeout without a timer of its own
// (SharedDeadline), and the Redis Cluster slot of a key (KeySlot). Each is
// safe for concurrent use.
package redisio

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Admission control bounds the calls in flight to one Redis master, so that
// a load spike against a healthy Redis never queues calls inside the client
// past their budget. A call that finds the bound full waits for a slot, in
// order of arrival, for at most the latency target; if none frees up by
// then, Redis cannot serve it in time and it is shed: decided by the rule's
// degraded policy (PathShed), instead of timing out and tripping the
// breaker. Under ordinary concurrency slots free up within a round trip, so
// nothing is shed and every decision stays exact on Redis.
//
// The bound adapts to the latency it measures, as Netflix's gradient
// concurrency limit and Envoy's adaptive concurrency filter do, so that
// nobody has to tune it. By Little's law the calls in flight are the
// throughput times the latency, so the bound that keeps the latency at a
// goal is the bound now times goal / latency now. Once per interval (the
// latency target, at least minSamples calls) the Gate takes the mean
// latency of the calls admitted in it (a call that failed as an outage
// counts as a whole Timeout) and multiplies the bound by goal / mean, at
// most doubling or halving it; it grows only when the interval used
// three quarters of the bound. The goal is half the latency target (a
// tenth of Options.Timeout): a mean, not a worst case, so that the tail of
// the calls still ends well within Timeout. A single slow reply (a pause
// of the collector, a busy core) moves a mean a little and the bound not
// at all by itself.
//
// Admitted calls thus take about the goal on average. A call waits for a
// slot at most the target, and its wait counts against its Timeout. The
// wait is what keeps callers in a closed loop from spinning: a call shed at
// once would be back at once, and thousands of them would take the CPU
// from the goroutines that read Redis' replies.
const (
	initialAdmission = 64     // the bound before anything is measured
	minAdmission     = 4      // calls in flight a master is always allowed
	maxAdmission     = 65_536 // beyond this, in-flight calls gain nothing
	minSamples       = 16     // calls an interval needs before it moves the bound
	maxStep          = 2.0    // the most one interval multiplies or divides the bound by
)

// Gate is the admission control of one Redis master.
type Gate struct {
	inflight atomic.Int64 // admitted calls not yet released
	limit    atomic.Int64 // the bound: ceil(est)
	queued   atomic.Int64 // entries in queue, for release's check without mu

	target time.Duration // latency target; also the longest wait for a slot

	mu    sync.Mutex // guards what follows
	queue []*waiter  // calls waiting for a slot, oldest first, from head on
	head  int
	est   float64 // the bound, with its fraction
	// The interval under way: when it began (process clock, UnixNano),
	// its calls, the sum of their latencies and the most calls in flight
	// at the end of one of them.
	began   int64
	samples int64
	sum     time.Duration
	busiest int64
}

// waiter is a call waiting for a slot. granted and gone are guarded by the
// Gate's mu: granted means a slot was taken for it (and ready closed), gone
// that it stopped waiting first.
type waiter struct {
	ready   chan struct{}
	granted bool
	gone    bool
}

// NewGate returns the gate of a master whose calls have timeout: its
// latency target is a fifth of it.
func NewGate(timeout time.Duration) *Gate {
	g := &Gate{target: timeout / 5, est: initialAdmission}
	g.limit.Store(initialAdmission)
	return g
}

// Acquire admits one call, waiting for a slot up to the latency target, or
// until ctx ends. It reports whether the call was admitted; an admitted
// call must be released.
func (g *Gate) Acquire(ctx context.Context) bool {
	if g.TryAcquire() {
		return true
	}
	g.mu.Lock()
	if g.TryAcquire() { // a slot freed up meanwhile (see admitWaiting)
		g.mu.Unlock()
		return true
	}
	w := &waiter{ready: make(chan struct{})}
	g.queue = append(g.queue, w)
	g.queued.Add(1)
	g.mu.Unlock()

	t := time.NewTimer(g.target)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted { // a slot came as the wait ended: it is this call's
		return true
	}
	w.gone = true
	return false
}

// AcquireSpare admits one call of background work (the write-back of
// decisions made without Redis, heartbeats) only when a slot is to spare:
// it never takes the last free slot, never passes a call that waits for
// one, and never waits itself. It reports whether the call was admitted;
// an admitted call must be released.
func (g *Gate) AcquireSpare() bool {
	for {
		n := g.inflight.Load()
		if n+1 >= g.limit.Load() || g.queued.Load() > 0 {
			return false
		}
		if g.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// TryAcquire admits one call if fewer than the bound are in flight,
// without waiting. It reports whether the call was admitted; an admitted
// call must be released.
func (g *Gate) TryAcquire() bool {
	for {
		n := g.inflight.Load()
		if n >= g.limit.Load() {
			return false
		}
		if g.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// admitWaiting hands free slots to waiting calls, oldest first. It is
// called after a slot is freed and after the bound grows; the caller holds
// g.mu.
func (g *Gate) admitWaiting() {
	for g.head < len(g.queue) {
		w := g.queue[g.head]
		if !w.gone {
			if !g.TryAcquire() {
				break
			}
			w.granted = true
			close(w.ready)
		}
		g.queue[g.head] = nil
		g.head++
		g.queued.Add(-1)
	}
	if g.head == len(g.queue) {
		g.queue, g.head = g.queue[:0], 0
	} else if g.head > len(g.queue)/2 {
		n := copy(g.queue, g.queue[g.head:])
		clear(g.queue[n:])
		g.queue, g.head = g.queue[:n], 0
	}
}

// Release ends an admitted call that took took (from admission to its
// reply or failure); overloaded reports a failure that counts as an outage
// (no reply within the budget, a network error). Calls that ended because
// their caller gave up, or that the breaker refused, say nothing about
// load: pass measured false and they only free their slot.
func (g *Gate) Release(took time.Duration, measured, overloaded bool) {
	busy := g.inflight.Add(-1) + 1 // calls in flight while this one ended
	grew := measured && g.learn(time.Now().UnixNano(), took, overloaded, busy)
	if grew || g.queued.Load() > 0 {
		g.mu.Lock()
		g.admitWaiting()
		g.mu.Unlock()
	}
}

// learn adds one latency sample, taken at now (process clock, UnixNano)
// with busy calls in flight, to the interval under way; at the interval's
// end it moves the bound (see the top of this file) and reports whether
// the bound grew.
func (g *Gate) learn(now int64, took time.Duration, overloaded bool, busy int64) bool {
	if overloaded {
		took = max(took, 5*g.target) // a whole Timeout
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.samples == 0 {
		g.began = now
	}
	g.samples++
	g.sum += took
	g.busiest = max(g.busiest, busy)
	if g.samples < minSamples || now-g.began < int64(g.target) {
		return false
	}
	mean := float64(g.sum) / float64(g.samples)
	step := float64(g.target) / 2 / max(mean, 1)
	step = min(max(step, 1/maxStep), maxStep)
	if step > 1 && float64(g.busiest) < 0.75*g.est {
		step = 1 // the bound was not what held the calls back
	}
	old := g.limit.Load()
	g.est = min(max(g.est*step, minAdmission), maxAdmission)
	g.limit.Store(int64(math.Ceil(g.est)))
	g.samples, g.sum, g.busiest = 0, 0, 0
	return g.limit.Load() > old
}

// InFlight returns the calls admitted and not yet released.
func (g *Gate) InFlight() int64 { return g.inflight.Load() }

// Limit returns the bound: how many calls may be in flight.
func (g *Gate) Limit() int64 { return g.limit.Load() }

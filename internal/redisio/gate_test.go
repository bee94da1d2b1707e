package redisio

import (
	"context"
	"testing"
	"time"
)

// The gate's tests use a Timeout of an hour, so that its latency target (a
// fifth of it, and the length of an interval) is far longer than any test
// runs: every step below is decided by the latencies and times passed in,
// never by how fast the machine is.

func TestGateAdmitsUpToItsBound(t *testing.T) {
	g := NewGate(time.Hour)
	for i := 0; i < initialAdmission; i++ {
		if !g.TryAcquire() {
			t.Fatalf("call %d shed below the bound %d", i+1, initialAdmission)
		}
	}
	if g.TryAcquire() {
		t.Fatalf("call %d admitted above the bound", initialAdmission+1)
	}
	g.Release(time.Millisecond, false, false) // unmeasured: frees its slot only
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("an unmeasured release moved the bound to %d", got)
	}
	if !g.TryAcquire() {
		t.Fatal("the freed slot was not admitted")
	}
}

// interval feeds g one interval of n calls that each took took, with the
// bound full while they ended, and returns the bound after it. The times
// are passed in: an interval ends by the samples' clock, not the machine's.
func interval(g *Gate, now *int64, n int, took time.Duration, overloaded bool) int64 {
	for i := 0; i < n; i++ {
		g.learn(*now, took, overloaded, g.limit.Load())
	}
	*now += int64(g.target)
	g.learn(*now, took, overloaded, g.limit.Load())
	return g.limit.Load()
}

func TestGateMovesTheBoundByGoalOverMeanLatency(t *testing.T) {
	g := NewGate(time.Hour) // target 12m, goal 6m
	var now int64
	goal := g.target / 2
	// Calls that take a quarter of the goal: the bound could be four
	// times larger; one interval at most doubles it.
	if got := interval(g, &now, minSamples, goal/4, false); got != 2*initialAdmission {
		t.Fatalf("after an interval of fast calls the bound is %d, want %d", got, 2*initialAdmission)
	}
	// Calls at 1.6 times the goal: the bound shrinks by as much.
	if got := interval(g, &now, minSamples, goal*8/5, false); got != 80 { // 128 / 1.6
		t.Fatalf("after an interval of slow calls the bound is %d, want 80", got)
	}
	// A mean at the goal leaves it where it is, whatever a single call took.
	for i := 0; i < 99; i++ {
		g.learn(now, goal-goal/99, false, 80)
	}
	now += int64(g.target)
	g.learn(now, 2*goal, false, 80) // one slow call among a hundred
	if got := g.limit.Load(); got != 80 {
		t.Fatalf("one slow call among fast ones moved the bound to %d", got)
	}
	// An outage counts as a whole Timeout: the bound halves at once.
	if got := interval(g, &now, minSamples, time.Millisecond, true); got != 40 {
		t.Fatalf("after an interval of outages the bound is %d, want 40", got)
	}
}

func TestGateWaitsForAWholeInterval(t *testing.T) {
	fast := time.Millisecond
	g := NewGate(time.Hour)
	for i := 0; i < 10*minSamples; i++ { // many calls, no time passed
		g.learn(0, fast, false, initialAdmission)
	}
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("the bound moved to %d before the interval's time was up", got)
	}
	g = NewGate(time.Hour)
	g.learn(0, fast, false, initialAdmission)
	for i := 0; i < minSamples-2; i++ { // time passed, too few calls
		g.learn(int64(g.target), fast, false, initialAdmission)
	}
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("the bound moved to %d on %d calls", got, minSamples-1)
	}
	g.learn(int64(g.target), fast, false, initialAdmission)
	if got := g.limit.Load(); got != 2*initialAdmission {
		t.Fatalf("the bound is %d after a whole interval of fast calls, want %d", got, 2*initialAdmission)
	}
}

func TestGateGrowsOnlyWhenTheBoundIsUsed(t *testing.T) {
	g := NewGate(time.Hour)
	var now int64
	for i := 0; i < 1000; i++ {
		g.TryAcquire()
		g.learn(now, time.Millisecond, false, g.inflight.Load())
		g.inflight.Add(-1) // one call in flight at a time
		now += int64(g.target) / 100
	}
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("an idle gate grew its bound to %d", got)
	}
}

func TestGateNeverFallsBelowItsFloor(t *testing.T) {
	g := NewGate(time.Hour)
	var now int64
	for i := 0; i < 100; i++ {
		interval(g, &now, minSamples, time.Hour, true)
	}
	if got := g.limit.Load(); got != minAdmission {
		t.Fatalf("bound %d after 100 intervals of failures, want the floor %d", got, minAdmission)
	}
}

func TestGateHandsFreedSlotsToWaitersInOrder(t *testing.T) {
	g := NewGate(time.Hour) // waits of up to 12 minutes: only a slot ends them
	for g.TryAcquire() {
	}
	ctx := context.Background()
	admitted := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() {
			if g.Acquire(ctx) {
				admitted <- i
			}
		}()
		for g.queued.Load() != int64(i+1) { // queue them one after the other
			time.Sleep(time.Millisecond)
		}
	}
	g.Release(time.Millisecond, false, false)
	if first := <-admitted; first != 0 {
		t.Fatalf("the second waiter got the first freed slot")
	}
	g.Release(time.Millisecond, false, false)
	<-admitted
	if n, limit := g.inflight.Load(), g.limit.Load(); n != limit {
		t.Fatalf("%d in flight after handing slots over, want the bound %d", n, limit)
	}
}

func TestGateShedsAfterWaitingTheTarget(t *testing.T) {
	g := NewGate(50 * time.Millisecond) // target: 10ms
	for g.TryAcquire() {
	}
	start := time.Now()
	if g.Acquire(context.Background()) {
		t.Fatal("admitted above the bound with no slot freed")
	}
	if waited := time.Since(start); waited < g.target {
		t.Fatalf("shed after %v, before the target %v", waited, g.target)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g.Acquire(ctx) {
		t.Fatal("admitted a caller whose context had ended")
	}
	// Waiters that left are skipped: a freed slot is free again.
	g.Release(time.Millisecond, false, false)
	if !g.TryAcquire() {
		t.Fatal("the freed slot went to a waiter that had left")
	}
	if q := g.queued.Load(); q != 0 {
		t.Fatalf("%d waiters still queued", q)
	}
}

// TestAcquireSpare: background work (heartbeats, the write-back) never
// takes the last slot, nor goes ahead of a waiting call.
func TestAcquireSpare(t *testing.T) {
	g := NewGate(100 * time.Millisecond)
	g.limit.Store(4)
	for i := range 3 {
		if !g.AcquireSpare() {
			t.Fatalf("acquireSpare %d with %d of 4 in flight refused", i+1, i)
		}
	}
	if g.AcquireSpare() {
		t.Fatal("acquireSpare took the last of 4 slots")
	}
	if !g.TryAcquire() {
		t.Fatal("a live call found no slot after the spare ones")
	}
	g.inflight.Store(0)
	g.queued.Store(1)
	if g.AcquireSpare() {
		t.Fatal("acquireSpare went ahead of a waiting call")
	}
	g.queued.Store(0)
}

package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

// The gate's tests use a Timeout of an hour, so that its latency target (a
// fifth of it, and the length of an interval) is far longer than any test
// runs: every step below is decided by the latencies and times passed in,
// never by how fast the machine is.

func TestGateAdmitsUpToItsBound(t *testing.T) {
	g := newGate(time.Hour)
	for i := 0; i < initialAdmission; i++ {
		if !g.tryAcquire() {
			t.Fatalf("call %d shed below the bound %d", i+1, initialAdmission)
		}
	}
	if g.tryAcquire() {
		t.Fatalf("call %d admitted above the bound", initialAdmission+1)
	}
	g.release(time.Millisecond, false, false) // unmeasured: frees its slot only
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("an unmeasured release moved the bound to %d", got)
	}
	if !g.tryAcquire() {
		t.Fatal("the freed slot was not admitted")
	}
}

// interval feeds g one interval of n calls that each took took, with the
// bound full while they ended, and returns the bound after it. The times
// are passed in: an interval ends by the samples' clock, not the machine's.
func interval(g *gate, now *int64, n int, took time.Duration, overloaded bool) int64 {
	for i := 0; i < n; i++ {
		g.learn(*now, took, overloaded, g.limit.Load())
	}
	*now += int64(g.target)
	g.learn(*now, took, overloaded, g.limit.Load())
	return g.limit.Load()
}

func TestGateMovesTheBoundByGoalOverMeanLatency(t *testing.T) {
	g := newGate(time.Hour) // target 12m, goal 6m
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
	g := newGate(time.Hour)
	for i := 0; i < 10*minSamples; i++ { // many calls, no time passed
		g.learn(0, fast, false, initialAdmission)
	}
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("the bound moved to %d before the interval's time was up", got)
	}
	g = newGate(time.Hour)
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
	g := newGate(time.Hour)
	var now int64
	for i := 0; i < 1000; i++ {
		g.tryAcquire()
		g.learn(now, time.Millisecond, false, g.inflight.Load())
		g.inflight.Add(-1) // one call in flight at a time
		now += int64(g.target) / 100
	}
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("an idle gate grew its bound to %d", got)
	}
}

func TestGateNeverFallsBelowItsFloor(t *testing.T) {
	g := newGate(time.Hour)
	var now int64
	for i := 0; i < 100; i++ {
		interval(g, &now, minSamples, time.Hour, true)
	}
	if got := g.limit.Load(); got != minAdmission {
		t.Fatalf("bound %d after 100 intervals of failures, want the floor %d", got, minAdmission)
	}
}

func TestGateHandsFreedSlotsToWaitersInOrder(t *testing.T) {
	g := newGate(time.Hour) // waits of up to 12 minutes: only a slot ends them
	for g.tryAcquire() {
	}
	ctx := context.Background()
	admitted := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() {
			if g.acquire(ctx) {
				admitted <- i
			}
		}()
		for g.queued.Load() != int64(i+1) { // queue them one after the other
			time.Sleep(time.Millisecond)
		}
	}
	g.release(time.Millisecond, false, false)
	if first := <-admitted; first != 0 {
		t.Fatalf("the second waiter got the first freed slot")
	}
	g.release(time.Millisecond, false, false)
	<-admitted
	if n, limit := g.inflight.Load(), g.limit.Load(); n != limit {
		t.Fatalf("%d in flight after handing slots over, want the bound %d", n, limit)
	}
}

func TestGateShedsAfterWaitingTheTarget(t *testing.T) {
	g := newGate(50 * time.Millisecond) // target: 10ms
	for g.tryAcquire() {
	}
	start := time.Now()
	if g.acquire(context.Background()) {
		t.Fatal("admitted above the bound with no slot freed")
	}
	if waited := time.Since(start); waited < g.target {
		t.Fatalf("shed after %v, before the target %v", waited, g.target)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g.acquire(ctx) {
		t.Fatal("admitted a caller whose context had ended")
	}
	// Waiters that left are skipped: a freed slot is free again.
	g.release(time.Millisecond, false, false)
	if !g.tryAcquire() {
		t.Fatal("the freed slot went to a waiter that had left")
	}
	if q := g.queued.Load(); q != 0 {
		t.Fatalf("%d waiters still queued", q)
	}
}

// TestShedCallsAreDecidedByTheDegradedPolicy: a call that finds its master's
// bound full never reaches Redis; it is decided by the rule's degraded
// policy, reported as PathShed, and counted apart from outages.
func TestShedCallsAreDecidedByTheDegradedPolicy(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var paths []Path
	// Timeout 500ms: a call waits 100ms for a slot before it is shed, and a
	// call with a free slot has time to reach miniredis on a busy machine.
	// No heartbeat: the test takes every admission slot by hand, and a
	// heartbeat's release would hand one back.
	l, err := New(client, Options{Timeout: 500 * time.Millisecond, HeartbeatInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnDecision: func(d Decision) { paths = append(paths, d.Path) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := l.conn.Load().breakers.all[0].gate.Load()
	g.inflight.Store(g.limit.Load()) // every slot taken

	ctx := context.Background()
	local := Rule{Name: "shed", Limit: PerMinute(1)}
	deny := Rule{Name: "shed:deny", Limit: PerMinute(1), Degraded: DegradedDeny}
	if r, err := l.Allow(ctx, local, "k"); err != nil || !r.Allowed || !r.Degraded {
		t.Fatalf("shed call under DegradedLocal = %+v, %v; want allowed and degraded", r, err)
	}
	if r, _ := l.Allow(ctx, local, "k"); r.Allowed {
		t.Fatalf("second shed call = %+v; the local log holds the first", r)
	}
	if r, _ := l.Allow(ctx, deny, "k"); r.Allowed || !r.Degraded {
		t.Fatalf("shed call under DegradedDeny = %+v", r)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("shed calls reached Redis: keys %v", keys)
	}
	for i, p := range paths {
		if p != PathShed {
			t.Fatalf("decision %d reported on path %v, want shed", i, p)
		}
	}
	s := l.Stats()
	if s.ShedDecisions != 3 || s.OutageDecisions != 0 || s.BreakersOpen != 0 || s.InFlight != int(g.limit.Load()) {
		t.Fatalf("Stats = %+v; want 3 shed, 0 outage decisions, the breaker closed", s)
	}

	g.inflight.Store(0) // slots free again: back to Redis
	if r, err := l.Allow(ctx, Rule{Name: "shed:back", Limit: PerMinute(1)}, "k"); err != nil || !r.Allowed || r.Degraded {
		t.Fatalf("call with a free slot = %+v, %v", r, err)
	}
	if paths[len(paths)-1] != PathRedis || len(mr.Keys()) == 0 {
		t.Fatalf("the call with a free slot did not reach Redis: %v", paths)
	}
}

// TestShedEventsCountOnRedisDecisions: events a shed call allowed are
// unknown to Redis, so the process' own count (mirror.go's hold) holds the
// next decisions on Redis back until it is under the rate: over shed and Redis
// decisions together, a process admits exactly the rate, and Redis' log
// keeps only what it admitted.
func TestShedEventsCountOnRedisDecisions(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	clk := &fixedClock{at: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	l, err := newUnstarted(client, Options{Clock: clk, Timeout: 500 * time.Millisecond, HeartbeatInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The write-back (not started) comes last, when the test says.
	g := l.conn.Load().breakers.all[0].gate.Load()
	rule := Rule{Name: "sale", Limit: PerMinute(5)}
	ctx := context.Background()
	allow := func() Result {
		t.Helper()
		r, err := l.Allow(ctx, rule, "all")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	allow() // one on Redis
	g.inflight.Store(g.limit.Load())
	for i := 0; i < 3; i++ { // three shed, allowed by the local log
		if r := allow(); !r.Allowed || !r.Degraded {
			t.Fatalf("shed call %d = %+v", i, r)
		}
	}
	g.inflight.Store(0)
	if r := allow(); !r.Allowed || r.Degraded || r.Remaining != 0 {
		t.Fatalf("fifth call = %+v, want the last one allowed on Redis", r)
	}
	for i := 0; i < 3; i++ { // Redis counts 2 and would allow 3 more
		if r := allow(); r.Allowed || r.Degraded || r.RetryAfter != time.Minute {
			t.Fatalf("call %d past the rate = %+v, want rejected on Redis until the shed events leave", i+6, r)
		}
	}
	log := redisKeys(DefaultKeyPrefix, lkey{rule: rule.Name, key: "all"}).meter(algSliding)
	if members, err := mr.ZMembers(log); err != nil || len(members) != 2 {
		t.Fatalf("Redis' log holds %v (%v), want the 2 events it admitted", members, err)
	}
	// The write-back brings the shed events to Redis, which then counts
	// all 5; this process no longer counts them on top.
	for l.writeBack(ctx) {
	}
	if members, err := mr.ZMembers(log); err != nil || len(members) != 5 {
		t.Fatalf("Redis' log after the write-back holds %v (%v), want all 5 events", members, err)
	}
	if r := allow(); r.Allowed || r.Degraded || r.RetryAfter != time.Minute || r.Remaining != 0 {
		t.Fatalf("call after the write-back = %+v, want rejected on Redis", r)
	}
	if s := l.Stats(); s.WrittenBack != 3 || s.WriteBackPending != 0 {
		t.Fatalf("Stats = %+v, want the 3 shed events written back", s)
	}
}

// fixedClock reads one instant.
type fixedClock struct{ at time.Time }

func (c *fixedClock) Now() time.Time { return c.at }

// TestShedEventsCountOnGroups: a group is denied at the first pair whose
// own count, with the events shed calls allowed, leaves it no room, and
// Redis records nothing for the group.
func TestShedEventsCountOnGroups(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	clk := &fixedClock{at: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	l, err := newUnstarted(client, Options{Clock: clk, Timeout: 500 * time.Millisecond, HeartbeatInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := l.conn.Load().breakers.all[0].gate.Load()
	loose := Rule{Name: "loose", Limit: PerMinute(10)}
	tight := Rule{Name: "tight", Limit: PerMinute(2)}
	ctx := context.Background()

	checks := []Check{{Rule: loose, Key: "u"}, {Rule: tight, Key: "u"}}
	g.inflight.Store(g.limit.Load())
	for i := 0; i < 2; i++ { // two shed groups use up the tight rule locally
		if rs, err := l.AllowGroup(ctx, "u", checks); err != nil || len(rs) != 2 || !rs[1].Allowed || !rs[1].Degraded {
			t.Fatalf("shed group %d = %+v, %v", i, rs, err)
		}
	}
	g.inflight.Store(0)
	rs, err := l.AllowGroup(ctx, "u", checks)
	if err != nil || len(rs) != 2 || !rs[0].Allowed || rs[1].Allowed || rs[1].Degraded || rs[1].RetryAfter != time.Minute {
		t.Fatalf("AllowGroup = %+v, %v; want denied at the tight pair, on Redis", rs, err)
	}
	for _, r := range []Rule{loose, tight} {
		k := lkey{rule: r.Name, key: "u", group: "u"}
		log := redisKeys(DefaultKeyPrefix, k).meter(algSliding)
		if members, _ := mr.ZMembers(log); len(members) != 0 {
			t.Errorf("Redis still holds %v for rule %q after the group was denied", members, r.Name)
		}
	}
}

// TestAcquireSpare: background work (heartbeats, the write-back) never
// takes the last slot, nor goes ahead of a waiting call.
func TestAcquireSpare(t *testing.T) {
	g := newGate(100 * time.Millisecond)
	g.limit.Store(4)
	for i := range 3 {
		if !g.acquireSpare() {
			t.Fatalf("acquireSpare %d with %d of 4 in flight refused", i+1, i)
		}
	}
	if g.acquireSpare() {
		t.Fatal("acquireSpare took the last of 4 slots")
	}
	if !g.tryAcquire() {
		t.Fatal("a live call found no slot after the spare ones")
	}
	g.inflight.Store(0)
	g.queued.Store(1)
	if g.acquireSpare() {
		t.Fatal("acquireSpare went ahead of a waiting call")
	}
	g.queued.Store(0)
}

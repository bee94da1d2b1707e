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
// fifth of it) and the interval between cuts are far longer than any test
// runs: every step below is decided by the latencies passed in, never by
// how fast the machine is.

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

func TestGateSlowStartThenAdditiveIncrease(t *testing.T) {
	g := newGate(time.Hour)
	fast := time.Millisecond // well within half the target
	fill := func() {
		for g.tryAcquire() {
		}
	}
	// Slow start: every fast call that ends with the bound nearly full
	// raises it by one.
	fill()
	for i := 0; i < 10; i++ {
		g.release(fast, true, false)
	}
	if got := g.limit.Load(); got != initialAdmission+10 {
		t.Fatalf("slow start: bound %d after 10 fast calls, want %d", got, initialAdmission+10)
	}
	// A slow call cuts the bound by a quarter and ends slow start.
	g.release(time.Hour/5+1, true, false)
	const want = 56 // ceil((64 + 10) × 0.75)
	if got := g.limit.Load(); got != want {
		t.Fatalf("after a slow call the bound is %d, want %d", got, want)
	}
	cut := g.limit.Load()
	// Within the same target-long interval another slow call cuts nothing.
	fill()
	g.release(time.Hour, true, true)
	if got := g.limit.Load(); got != cut {
		t.Fatalf("a second slow call in one interval moved the bound from %d to %d", cut, got)
	}
	// Additive increase: one per bound's worth of fast calls.
	fill()
	for i := int64(0); i < cut; i++ {
		g.release(fast, true, false)
		g.tryAcquire()
	}
	if got := g.limit.Load(); got != cut+1 {
		t.Fatalf("additive increase: bound %d after %d fast calls, want %d", got, cut, cut+1)
	}
}

func TestGateGrowsOnlyWhenTheBoundIsUsed(t *testing.T) {
	g := newGate(time.Hour)
	for i := 0; i < 1000; i++ {
		g.tryAcquire()
		g.release(time.Millisecond, true, false) // one call in flight at a time
	}
	if got := g.limit.Load(); got != initialAdmission {
		t.Fatalf("an idle gate grew its bound to %d", got)
	}
}

func TestGateNeverFallsBelowItsFloor(t *testing.T) {
	g := newGate(time.Hour)
	for i := 0; i < 100; i++ {
		g.tryAcquire()
		g.lastCut = 0 // as if the interval had passed
		g.release(time.Hour, true, true)
	}
	if got := g.limit.Load(); got != minAdmission {
		t.Fatalf("bound %d after 100 failures, want the floor %d", got, minAdmission)
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
	// Timeout 50ms: a call waits 10ms for a slot before it is shed.
	l, err := New(client, Options{Timeout: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
// unknown to Redis, so the next decisions Redis allows are overruled until
// the process' own count is back under the rate: over shed and Redis
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
	l, err := New(client, Options{Clock: clk, Timeout: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
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
	log := redisKeys(DefaultKeyPrefix, lkey{rule: rule.Name, key: "all"})[0]
	if members, err := mr.ZMembers(log); err != nil || len(members) != 2 {
		t.Fatalf("Redis' log holds %v (%v), want the 2 events it admitted", members, err)
	}
}

// fixedClock reads one instant.
type fixedClock struct{ at time.Time }

func (c *fixedClock) Now() time.Time { return c.at }

// TestShedEventsCountOnGroups: a group Redis allows is denied at the first
// pair whose unsynced events leave it no room, and what Redis recorded for
// every pair of the group is taken back.
func TestShedEventsCountOnGroups(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	clk := &fixedClock{at: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	l, err := New(client, Options{Clock: clk, Timeout: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
		log := redisKeys(DefaultKeyPrefix, k)[0]
		if members, _ := mr.ZMembers(log); len(members) != 0 {
			t.Errorf("Redis still holds %v for rule %q after the group was denied", members, r.Name)
		}
	}
}

package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit/internal/redisio"
)

// TestShedCallsAreDecidedByTheDegradedPolicy: a call that finds its master's
// bound full never reaches Redis; it is decided by the rule's degraded
// policy, reported as PathShed, and counted apart from outages.
func TestShedCallsAreDecidedByTheDegradedPolicy(t *testing.T) {
	mr := miniredis.RunT(t)
	client := miniClient(t, mr)
	var paths []Path
	// Timeout 500ms: a call waits 100ms for a slot before it is shed, and a
	// call with a free slot has time to reach miniredis on a busy machine.
	// No heartbeat: the test takes every admission slot by hand, and a
	// heartbeat's release would hand one back.
	l, err := New(client, Options{Timeout: 500 * time.Millisecond, HeartbeatInterval: -1, Logger: discard,
		OnDecision: func(d Decision) { paths = append(paths, d.Path) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := l.conn.Load().breakers.All()[0].Gate()
	taken := takeAll(g) // every slot taken

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
	if s.ShedDecisions != 3 || s.OutageDecisions != 0 || s.BreakersOpen != 0 || s.InFlight != int(g.Limit()) {
		t.Fatalf("Stats = %+v; want 3 shed, 0 outage decisions, the breaker closed", s)
	}

	giveBack(g, taken) // slots free again: back to Redis
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
	client := miniClient(t, mr)
	clk := &fixedClock{at: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	l, err := newUnstarted(client, Options{Clock: clk, Timeout: 500 * time.Millisecond, HeartbeatInterval: -1, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The write-back (not started) comes last, when the test says.
	g := l.conn.Load().breakers.All()[0].Gate()
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
	taken := takeAll(g)
	for i := 0; i < 3; i++ { // three shed, allowed by the local log
		if r := allow(); !r.Allowed || !r.Degraded {
			t.Fatalf("shed call %d = %+v", i, r)
		}
	}
	giveBack(g, taken)
	if r := allow(); !r.Allowed || r.Degraded || r.Remaining != 0 {
		t.Fatalf("fifth call = %+v, want the last one allowed on Redis", r)
	}
	for i := 0; i < 3; i++ { // Redis counts 2 and would allow 3 more
		if r := allow(); r.Allowed || r.Degraded || r.RetryAfter != time.Minute {
			t.Fatalf("call %d past the rate = %+v, want rejected on Redis until the shed events leave", i+6, r)
		}
	}
	log := redisKeys(DefaultKeyPrefix, lkey{Rule: rule.Name, Key: "all"}).Meter(algSliding.redis.letter())
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
	client := miniClient(t, mr)
	clk := &fixedClock{at: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	l, err := newUnstarted(client, Options{Clock: clk, Timeout: 500 * time.Millisecond, HeartbeatInterval: -1, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := l.conn.Load().breakers.All()[0].Gate()
	loose := Rule{Name: "loose", Limit: PerMinute(10)}
	tight := Rule{Name: "tight", Limit: PerMinute(2)}
	ctx := context.Background()

	checks := []Check{{Rule: loose, Key: "u"}, {Rule: tight, Key: "u"}}
	taken := takeAll(g)
	for i := 0; i < 2; i++ { // two shed groups use up the tight rule locally
		if rs, err := l.AllowGroup(ctx, "u", checks); err != nil || len(rs) != 2 || !rs[1].Allowed || !rs[1].Degraded {
			t.Fatalf("shed group %d = %+v, %v", i, rs, err)
		}
	}
	giveBack(g, taken)
	rs, err := l.AllowGroup(ctx, "u", checks)
	if err != nil || len(rs) != 2 || !rs[0].Allowed || rs[1].Allowed || rs[1].Degraded || rs[1].RetryAfter != time.Minute {
		t.Fatalf("AllowGroup = %+v, %v; want denied at the tight pair, on Redis", rs, err)
	}
	for _, r := range []Rule{loose, tight} {
		k := lkey{Rule: r.Name, Key: "u", Group: "u"}
		log := redisKeys(DefaultKeyPrefix, k).Meter(algSliding.redis.letter())
		if members, _ := mr.ZMembers(log); len(members) != 0 {
			t.Errorf("Redis still holds %v for rule %q after the group was denied", members, r.Name)
		}
	}
}

// takeAll takes every free admission slot of g, as calls in flight would,
// and returns how many.
func takeAll(g *redisio.Gate) int { return takeSlots(g, 0) }

// takeSlots takes free admission slots of g until leave are free, and
// returns how many it took.
func takeSlots(g *redisio.Gate, leave int64) (n int) {
	for g.Limit()-g.InFlight() > leave && g.TryAcquire() {
		n++
	}
	return n
}

// giveBack releases n slots taken by takeAll, unmeasured.
func giveBack(g *redisio.Gate, n int) {
	for range n {
		g.Release(0, false, false)
	}
}

// TestShedCallWaitsForItsPairsCallOnTheWay: a call that admission control
// sheds while a call of its pair is on its way to Redis with a seat in the
// pair's crowd waits for that call to land, then goes to Redis, instead of
// being decided Degraded from a healthy Redis (crowd.go), through Allow and
// through AllowGroup. Before, a group was decided Degraded at once: at a
// hot key's cold start on a loaded machine, a crowd's AllowGroup calls came
// back Degraded by the dozen, and the key's first second admitted some 65
// of its 100 on Redis (TestHotKeyCrowd).
func TestShedCallWaitsForItsPairsCallOnTheWay(t *testing.T) {
	rule := Rule{Name: "hot", Limit: PerMinute(10)}
	for _, c := range pairWays(rule) {
		t.Run(c.name, func(t *testing.T) {
			var log pathLog
			// Timeout 2s: the call waits 400ms for a slot before it is
			// shed, and then up to 1s for a seat.
			clk := &fixedClock{at: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
			l, err := New(miniClient(t, miniredis.RunT(t)), Options{Clock: clk, Timeout: 2 * time.Second, HeartbeatInterval: -1, Logger: discard, OnDecision: log.hook})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			// A call of the pair is on its way with one of the crowd's two
			// seats, and every admission slot is taken.
			p, sh, h, cw := crowdOnItsWay(t, l, rule, c, 2)
			g := l.conn.Load().breakers.All()[0].Gate()
			taken := takeAll(g)

			done := c.inBackground(l)
			// Shed, the call gives its seat back and queues for the
			// landing of the call on its way.
			waitUntil(t, sh, done, "the call on its way landed", func() bool { return cw.Flying() == 1 && cw.Full() })
			giveBack(g, taken)
			sh.mu.Lock()
			sh.land(&c.k, h, &held{seated: true}, nil, p.rate)
			sh.mu.Unlock()

			a := <-done
			if a.err != nil || len(a.rs) != c.asked {
				t.Fatalf("after the landing: %+v, %v; want %d Results", a.rs, a.err, c.asked)
			}
			for i, r := range a.rs {
				if !r.Allowed || r.Degraded {
					t.Errorf("Result %d = %+v, want allowed on Redis", i, r)
				}
			}
			paths := log.all()
			for _, path := range paths {
				if path != PathRedis {
					t.Errorf("decided on %v (paths %v), want %v", path, paths, PathRedis)
				}
			}
			if s := l.Stats(); s.ShedDecisions != 0 {
				t.Errorf("Stats.ShedDecisions = %d, want 0", s.ShedDecisions)
			}
		})
	}
}

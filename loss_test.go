package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/ratelimit-go/ratelimit/internal/clock"
	"github.com/ratelimit-go/ratelimit/internal/fleet"
)

// TestLostCountsAsTheMeterWould: what Redis lost at at still counts at
// now as each kind's meter would count it (writeBackKind.lost), at exact
// instants: the exact log and the leases for a Window, a fixed window until
// it ends, the approximate counter through the next window as it weighs
// the previous one, a calendar quota for its period, a GCRA bucket less a
// token every emission interval until a full bucket has refilled.
func TestLostCountsAsTheMeterWould(t *testing.T) {
	const s = int64(time.Second / time.Microsecond)
	const ms = s / 1000
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC).UnixMicro()
	quota := Rule{Name: "q", Kind: CalendarQuota, Limit: Limit{Rate: 100, Period: Day}}
	cases := []struct {
		rule      Rule
		at, now   int64
		events    int64
		want      int64
		wantCount bool
	}{
		{Rule{Name: "log", Limit: PerSecond(100)}, 1700 * ms, 1700 * ms, 40, 40, true},
		{Rule{Name: "log", Limit: PerSecond(100)}, 1700 * ms, 2699 * ms, 40, 40, true},
		{Rule{Name: "log", Limit: PerSecond(100)}, 1700 * ms, 2700 * ms, 40, 0, false},
		{Rule{Name: "leases", Kind: Concurrency, Limit: PerSecond(100)}, 1700 * ms, 2699 * ms, 40, 40, true},
		{Rule{Name: "fixed", Kind: FixedWindow, Limit: PerSecond(100)}, 1700 * ms, 1999 * ms, 40, 40, true},
		{Rule{Name: "fixed", Kind: FixedWindow, Limit: PerSecond(100)}, 1700 * ms, 2000 * ms, 40, 0, false},
		{Rule{Name: "fixed", Kind: FixedWindow, Limit: PerSecond(100)}, 1700 * ms, 1500 * ms, 40, 40, true}, // a clock gone back
		{Rule{Name: "counter", Limit: PerSecond(100), Approximate: true}, 1700 * ms, 1999 * ms, 40, 40, true},
		{Rule{Name: "counter", Limit: PerSecond(100), Approximate: true}, 1700 * ms, 2000 * ms, 40, 40, true},
		{Rule{Name: "counter", Limit: PerSecond(100), Approximate: true}, 1700 * ms, 2250 * ms, 40, 30, true},
		{Rule{Name: "counter", Limit: PerSecond(100), Approximate: true}, 1700 * ms, 2999 * ms, 40, 1, true}, // ceil(40 × 0.001)
		{Rule{Name: "counter", Limit: PerSecond(100), Approximate: true}, 1700 * ms, 3000 * ms, 40, 0, false},
		{Rule{Name: "gcra", Kind: GCRA, Limit: PerSecond(100)}, 1000 * ms, 1000 * ms, 40, 40, true},
		{Rule{Name: "gcra", Kind: GCRA, Limit: PerSecond(100)}, 1000 * ms, 1009 * ms, 40, 40, true},
		{Rule{Name: "gcra", Kind: GCRA, Limit: PerSecond(100)}, 1000 * ms, 1010 * ms, 40, 39, true}, // T = 10ms
		{Rule{Name: "gcra", Kind: GCRA, Limit: PerSecond(100)}, 1000 * ms, 1250 * ms, 40, 15, true},
		{Rule{Name: "gcra", Kind: GCRA, Limit: PerSecond(100)}, 1000 * ms, 1400 * ms, 40, 0, true},
		{Rule{Name: "gcra", Kind: GCRA, Limit: PerSecond(100)}, 1000 * ms, 1999 * ms, 40, 0, true},
		{Rule{Name: "gcra", Kind: GCRA, Limit: PerSecond(100)}, 1000 * ms, 2000 * ms, 40, 0, false}, // a full bucket refilled
		{Rule{Name: "gcra burst", Kind: GCRA, Limit: Limit{Rate: 100, Window: time.Second, Burst: 10}}, 1000 * ms, 1099 * ms, 5, 0, true},
		{Rule{Name: "gcra burst", Kind: GCRA, Limit: Limit{Rate: 100, Window: time.Second, Burst: 10}}, 1000 * ms, 1100 * ms, 5, 0, false},
		{quota, day + 3600*s, day + 86399*s, 40, 40, true},
		{quota, day - 1, day + 86399*s, 40, 0, false},
		{quota, day + 3600*s, day + 86400*s, 40, 0, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s at %d now %d", c.rule.Name, c.at, c.now), func(t *testing.T) {
			p, err := c.rule.compile()
			if err != nil {
				t.Fatal(err)
			}
			if p.alg.rules.timed() {
				p = p.alg.rules.setTime(p, c.now)
			}
			got, counts := p.alg.back.lost(p, c.at, c.now, c.events)
			if got != c.want || counts != c.wantCount {
				t.Fatalf("lost(%d at %d, now %d) = %d, %v; want %d, %v", c.events, c.at, c.now, got, counts, c.want, c.wantCount)
			}
		})
	}
}

// TestFixedWindowLossEndsWithItsWindow: two instances share a fixed window
// of 10 a second, and Redis loses its data. The instance that learns it
// counts, for the rest of the window that held the loss, the other's share
// (5) and its own count of the window on top of Redis' count: its events
// since the loss, which Redis holds as well, count twice, the price
// docs/fallback.md states, and it allows 3. In the next window the lost
// events no longer count, and it allows the whole Rate (before, it counted
// the loss for a Window from when it learnt it, into the next window; and
// its own count took in the reserve with every reply, so that it allowed
// 1 in the loss' window, not 3).
func TestFixedWindowLossEndsWithItsWindow(t *testing.T) {
	mr, t0, clk, a := lossPair(t, "loss:")
	mr.FlushAll() // a restart without persistence
	mr.SetTime(t0.Add(6 * time.Second))
	beat(t, a) // a newer set: Redis lost its data
	if a.fleet.Lost() == nil {
		t.Fatal("the heartbeat after the loss did not tell it")
	}
	rule := Rule{Name: "fixed", Kind: FixedWindow, Limit: PerSecond(10)}
	allowed := func() int { return allowedOnRedis(t, a, rule, 12) }
	if n := allowed(); n != 3 {
		t.Fatalf("in the window of the loss %d allowed, want 3: 10 less the other's share (5) and, twice, its own events since the loss", n)
	}
	clk.Set(t0.Add(time.Second)) // the next window: the lost events no longer count
	if n := allowed(); n != 10 {
		t.Fatalf("in the next window %d allowed, want the whole Rate, 10", n)
	}
}

// TestSetRunOutIsNoLoss: an instances set that ran out (no Limiter
// announced itself for three heartbeat periods: all were cut off from
// Redis, or Redis was paused) is made anew under the fleet's epoch, which
// outlives it by a day: no loss of Redis' data is counted. A FLUSHALL takes
// the epoch too, and is one.
func TestSetRunOutIsNoLoss(t *testing.T) {
	mr := miniredis.RunT(t)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	mr.SetTime(t0)
	a := fleetLimiter(t, mr, "runout:", t0)
	fleetLimiter(t, mr, "runout:", t0)
	mr.SetTime(t0.Add(time.Minute))
	if n := beat(t, a); n != 2 {
		t.Fatalf("counts %d, want 2", n)
	}
	mr.FastForward(4 * time.Hour) // past three periods of an hour: the set runs out
	mr.SetTime(t0.Add(4 * time.Hour))
	if mr.Exists("runout:v1:{instances}") {
		t.Fatal("the instances set outlived three heartbeat periods")
	}
	beat(t, a)
	if a.fleet.Lost() != nil {
		t.Fatal("a set that ran out counted as a loss of Redis' data")
	}
	mr.FlushAll()
	mr.SetTime(t0.Add(5 * time.Hour))
	beat(t, a)
	if a.fleet.Lost() == nil {
		t.Fatal("a FLUSHALL did not count as a loss of Redis' data")
	}
}

// TestLossCoversAGrantsStamps: what Redis lost was recorded by a time its
// heartbeat tells (lua/fleet.lua's KEYS[5]), but a grant stamps its slots
// up to Prefetch past its recording, so the loss counts from that much
// later for a prefetching rule, on Redis' clock and on Options.Clock
// (fleet.Loss.On).
func TestLossCoversAGrantsStamps(t *testing.T) {
	const ms = int64(time.Millisecond / time.Microsecond)
	compile := func(r Rule) plan {
		p, err := r.compile()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := compile(Rule{Name: "log", Limit: PerSecond(100)})
	prefetching := compile(Rule{Name: "log", Limit: PerSecond(100), Prefetch: 20 * time.Millisecond})
	ls := &fleet.Loss{Process: 0, Clock: 5000 * ms, Redis: 9000 * ms, Age: 1000 * ms}
	onRedis, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer onRedis.Close()
	onClock, err := New(nil, Options{Clock: clock.NewFake(time.UnixMicro(6000 * ms))})
	if err != nil {
		t.Fatal(err)
	}
	defer onClock.Close()
	for _, c := range []struct {
		l    *Limiter
		p    plan
		want int64
	}{
		{onRedis, plain, 8000 * ms},       // Redis' TIME less the age
		{onRedis, prefetching, 8020 * ms}, // and a Prefetch later
		{onClock, plain, 5000 * ms},       // the learning on the Limiter's clock
		{onClock, prefetching, 5020 * ms}, // and a Prefetch later
	} {
		if at, _ := ls.On(c.l.sendsNow(c.p.alg.rules.timed()), c.p.prefetch, 6000*ms, c.l.clock.Now()); at != c.want {
			t.Errorf("Clock %v, Prefetch %dµs: the loss at %d, want %d", c.l.set.Clock != nil, c.p.prefetch, at, c.want)
		}
	}
}

// TestOwnEventsSinceALossCountOnce: two instances share an exact log of 20
// a second, and Redis loses its data after instance a allowed 2 events.
// Until the loss leaves the window, a counts the other's share (10) and
// its own 2 events of before the loss on top of Redis' count, so it
// allows 8 more: its events since the loss, which Redis decided and
// holds, count once (lostOwn). Before, its whole own count was added to
// Redis', those events twice, and it allowed 4. A fixed window's own count
// keeps no times, and counts whole (TestFixedWindowLossEndsWithItsWindow).
func TestOwnEventsSinceALossCountOnce(t *testing.T) {
	mr, t0, clk, a := lossPair(t, "own:")
	rule := Rule{Name: "log", Limit: PerSecond(20)}
	allowed := func(tries int) int { return allowedOnRedis(t, a, rule, tries) }
	if n := allowed(2); n != 2 {
		t.Fatalf("before the loss %d allowed, want 2", n)
	}
	mr.FlushAll() // a restart without persistence
	mr.SetTime(t0.Add(6 * time.Second))
	clk.Set(t0.Add(600 * time.Millisecond))
	beat(t, a) // learnt at 600ms on a's clock
	if a.fleet.Lost() == nil {
		t.Fatal("the heartbeat after the loss did not tell it")
	}
	clk.Set(t0.Add(700 * time.Millisecond))
	if n := allowed(12); n != 8 {
		t.Fatalf("after the loss %d allowed, want 8: 20 less the other's share (10) and a's 2 events of before the loss", n)
	}
	clk.Set(t0.Add(1600 * time.Millisecond)) // a Window after the loss: it no longer counts
	if n := allowed(22); n != 12 {
		t.Fatalf("a Window after the loss %d allowed, want 12: 20 less the 8 since the loss", n)
	}
}

// allowedOnRedis makes tries calls of rule on key "k" and returns how many
// were allowed; a degraded one fails the test (Redis is healthy).
func allowedOnRedis(t *testing.T, l *Limiter, rule Rule, tries int) int {
	t.Helper()
	n := 0
	for range tries {
		r, err := l.Allow(context.Background(), rule, "k")
		if err != nil {
			t.Fatal(err)
		}
		if r.Degraded {
			t.Fatalf("a degraded decision on a healthy Redis: %+v", r)
		}
		if r.Allowed {
			n++
		}
	}
	return n
}

// lossPair returns two instances under prefix on a miniredis at t0 + 5s,
// each counting both: a, on a fake clock at t0 + 500ms, and another on a
// clock that stays at t0.
func lossPair(t *testing.T, prefix string) (*miniredis.Miniredis, time.Time, *clock.Fake, *Limiter) {
	t.Helper()
	mr := miniredis.RunT(t)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	mr.SetTime(t0)
	clk := clock.NewFake(t0.Add(500 * time.Millisecond))
	a := fleetLimiter(t, mr, prefix, t0, func(o *Options) { o.Clock = clk })
	fleetLimiter(t, mr, prefix, t0)
	mr.SetTime(t0.Add(5 * time.Second))
	if n := beat(t, a); n != 2 {
		t.Fatalf("counts %d, want 2", n)
	}
	return mr, t0, clk, a
}

// TestBanOutlivesALoss: a ban Redis made, then lost with its data (a
// restart without persistence, here a FLUSHALL), is on record again after
// the next call of the banned key through an instance that saw the ban:
// its shield drops its cached bans when its heartbeat tells the loss, and
// the call's hold hands Redis the ban, which the script writes back (the
// one-pair script and a group's alike). An instance that never saw the ban
// then finds it on Redis (before, the first instance answered the key from
// its shield until the ban ended, and the other allowed it).
func TestBanOutlivesALoss(t *testing.T) {
	rule := Rule{Name: "login", Limit: PerMinute(1), Penalty: &Penalty{BanAfter: 1, BanFor: time.Hour}}
	for _, c := range []struct {
		name   string
		decide func(*Limiter) (Result, error)
	}{
		{"Allow", func(l *Limiter) (Result, error) { return l.Allow(context.Background(), rule, "eve") }},
		{"AllowGroup", func(l *Limiter) (Result, error) {
			rs, err := l.AllowGroup(context.Background(), "eve", []Check{{Rule: rule, Key: "eve"}})
			if err != nil {
				return Result{}, err
			}
			return rs[0], nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
			mr.SetTime(t0)
			clk := clock.NewFake(t0.Add(500 * time.Millisecond))
			onClock := func(o *Options) { o.Clock = clk }
			saw, other := fleetLimiter(t, mr, "ban:", t0, onClock), fleetLimiter(t, mr, "ban:", t0, onClock)
			mr.SetTime(t0.Add(5 * time.Second))
			beat(t, saw)
			decide := func(l *Limiter) Result {
				t.Helper()
				r, err := c.decide(l)
				if err != nil {
					t.Fatal(err)
				}
				if r.Degraded {
					t.Fatalf("a degraded decision on a healthy Redis: %+v", r)
				}
				return r
			}
			if r := decide(saw); !r.Allowed {
				t.Fatalf("the first call: %+v", r)
			}
			if r := decide(saw); !r.Banned {
				t.Fatalf("the violation did not ban: %+v", r)
			}
			mr.FlushAll()
			mr.SetTime(t0.Add(6 * time.Second))
			beat(t, saw)
			if saw.fleet.Lost() == nil {
				t.Fatal("the heartbeat after the loss did not tell it")
			}
			clk.Advance(time.Second)
			left := time.Hour - time.Second
			if r := decide(saw); !r.Banned || r.BannedFor != left {
				t.Fatalf("the instance that saw the ban, after the loss: %+v, want banned for %v", r, left)
			}
			if r := decide(other); r.Allowed || !r.Banned || r.BannedFor != left {
				t.Fatalf("the other instance, after the loss: %+v, want banned for %v as on Redis", r, left)
			}
		})
	}
}

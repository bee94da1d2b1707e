package ratelimit_test

import (
	"context"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// inUseRule has room for every call these tests make.
var inUseRule = ratelimit.Rule{Name: "in-use", Limit: ratelimit.PerMinute(1_000_000)}

// inUseOptions trip the breaker after two failures, probe again soon, and
// send no heartbeat: only the test's calls reach Redis.
func inUseOptions(logs *testkit.SyncBuffer) ratelimit.Options {
	opts := testkit.OutageOptions(testkit.NewClock(), logs, nil)
	opts.HeartbeatInterval = -1
	return opts
}

// wantStats fails the test unless Stats says what the step expects.
func wantStats(t *testing.T, l *ratelimit.Limiter, step string, connected, inUse bool, open int) {
	t.Helper()
	s := l.Stats()
	if s.Connected != connected || s.RedisInUse != inUse || s.BreakersOpen != open {
		t.Fatalf("%s: Connected %v, RedisInUse %v, BreakersOpen %d; want %v, %v, %d",
			step, s.Connected, s.RedisInUse, s.BreakersOpen, connected, inUse, open)
	}
}

// decided makes one call and reports whether Redis decided it.
func decided(t *testing.T, l *ratelimit.Limiter) bool {
	t.Helper()
	return !testkit.Allow(t, l, inUseRule, "k").Degraded
}

// TestRedisInUseThroughAnOutage: Stats.RedisInUse follows whether Redis
// answers, while Connected stays true: false from the first failed call
// (the breaker still closed), false while the breaker is open, true again
// once a call is answered after recovery; for a Redis closed and
// restarted, and for one that refuses every command with NOPERM.
func TestRedisInUseThroughAnOutage(t *testing.T) {
	for _, c := range []struct {
		name       string
		fail, mend func(mr *miniredis.Miniredis)
	}{
		{"closed", func(mr *miniredis.Miniredis) { mr.Close() }, func(mr *miniredis.Miniredis) {
			if err := mr.Restart(); err != nil {
				t.Fatal(err)
			}
		}},
		{"NOPERM", func(mr *miniredis.Miniredis) {
			mr.SetError("NOPERM this user has no permissions to run the 'evalsha' command")
		}, func(mr *miniredis.Miniredis) { mr.SetError("") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			var logs testkit.SyncBuffer
			l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), inUseOptions(&logs))
			wantStats(t, l, "before any call", true, false, 0)
			if !decided(t, l) {
				t.Fatal("the first call was not decided on a healthy Redis")
			}
			wantStats(t, l, "healthy", true, true, 0)
			c.fail(mr)
			if decided(t, l) {
				t.Fatal("a call was decided on Redis while it was unusable")
			}
			wantStats(t, l, "after the first failed call", true, false, 0)
			decided(t, l) // the second failure trips the breaker (TripAfter 2)
			wantStats(t, l, "breaker open", true, false, 1)
			c.mend(mr)
			testkit.Eventually(t, "a call decided on Redis after it recovered", func() bool { return decided(t, l) })
			wantStats(t, l, "recovered", true, true, 0)
		})
	}
}

// TestRedisInUseOutageAtStart: a Limiter whose Redis is down before its
// first call says so, whether New got a client (Connected, not in use) or
// Dial could not connect (neither), and says Redis is in use once a call
// is decided there.
func TestRedisInUseOutageAtStart(t *testing.T) {
	t.Run("New", func(t *testing.T) {
		mr := miniredis.RunT(t)
		client := testkit.NewClient(t, mr.Addr())
		mr.Close()
		var logs testkit.SyncBuffer
		l := testkit.NewLimiter(t, client, inUseOptions(&logs))
		wantStats(t, l, "before any call", true, false, 0)
		if decided(t, l) {
			t.Fatal("a call was decided on a closed Redis")
		}
		wantStats(t, l, "after a failed call", true, false, 0)
		if err := mr.Restart(); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "a call decided on Redis once it is up", func() bool { return decided(t, l) })
		wantStats(t, l, "up", true, true, 0)
	})
	t.Run("Dial", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there until the test starts Redis
		var logs testkit.SyncBuffer
		l, err := ratelimit.Dial(testkit.ClientOption(addr), inUseOptions(&logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		wantStats(t, l, "Redis down at Dial", false, false, 0)
		if r, err := l.Allow(context.Background(), inUseRule, "k"); err != nil || !r.Degraded {
			t.Fatalf("Allow with Redis down = %+v, %v; want degraded", r, err)
		}
		wantStats(t, l, "after a degraded call", false, false, 0)
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr(addr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mr.Close)
		testkit.Eventually(t, "a call decided on Redis once Dial connected", func() bool { return decided(t, l) })
		wantStats(t, l, "connected", true, true, 0)
	})
}

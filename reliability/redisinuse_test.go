package reliability_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestRedisInUseOnRedisServer: Stats.RedisInUse on a real redis-server
// killed (SIGKILL) before the Limiter's first call and restarted, and on
// one that refuses every command with NOPERM and is given its permissions
// back: false from the first failed call (while Connected stays true and
// the breaker is still closed), false while the breaker is open, true once
// a call is decided on Redis again.
func TestRedisInUseOnRedisServer(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	rule := ratelimit.Rule{Name: "in-use", Limit: ratelimit.PerMinute(1_000_000)}
	options := func(logs *testkit.SyncBuffer) ratelimit.Options {
		opts := testkit.OutageOptions(testkit.NewClock(), logs, nil)
		opts.HeartbeatInterval = -1 // only the test's calls reach Redis
		return opts
	}
	decided := func(l *ratelimit.Limiter) bool { return !testkit.Allow(t, l, rule, "k").Degraded }
	want := func(l *ratelimit.Limiter, step string, inUse bool, open int) {
		t.Helper()
		s := l.Stats()
		if !s.Connected || s.RedisInUse != inUse || s.BreakersOpen != open {
			t.Fatalf("%s: Connected %v, RedisInUse %v, BreakersOpen %d; want true, %v, %d",
				step, s.Connected, s.RedisInUse, s.BreakersOpen, inUse, open)
		}
	}

	t.Run("killed before the first call", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		client := testkit.NewClient(t, srv.Addr())
		srv.Kill()
		var logs testkit.SyncBuffer
		l := testkit.NewLimiter(t, client, options(&logs))
		want(l, "before any call", false, 0)
		if decided(l) {
			t.Fatal("a call was decided on a killed Redis")
		}
		want(l, "after the first failed call", false, 0)
		decided(l) // the second failure trips the breaker (TripAfter 2)
		want(l, "breaker open", false, 1)
		srv.Restart()
		testkit.Eventually(t, "a call decided on the restarted Redis", func() bool { return decided(l) })
		want(l, "restarted", true, 0)
	})
	t.Run("NOPERM", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		var logs testkit.SyncBuffer
		l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), options(&logs))
		if !decided(l) {
			t.Fatal("the first call was not decided on a healthy Redis")
		}
		want(l, "healthy", true, 0)
		srv.Forbid(true)
		if decided(l) {
			t.Fatal("a call was decided on Redis while it refused every command")
		}
		want(l, "after the first refused call", false, 0)
		decided(l)
		want(l, "breaker open", false, 1)
		srv.Forbid(false)
		testkit.Eventually(t, "a call decided on Redis with its permissions back", func() bool { return decided(l) })
		want(l, "permissions back", true, 0)
	})
}

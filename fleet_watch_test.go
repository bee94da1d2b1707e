package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit/internal/clock"
	"github.com/redis/rueidis"
)

// TestSilentInstanceLearnsOfARestart: an instance that made no call while
// Redis restarted without its data learns of the restart from its watch's
// connection, which ended with the server: its first decisions on the
// new, empty Redis ask the fleet first, and count the other's share (the
// reserve), 5 of a Rate of 10. Before the watch it learnt of the loss only
// at its next heartbeat (an hour away here), and allowed the whole Rate on
// top of the 10 the other had admitted in the window.
func TestSilentInstanceLearnsOfARestart(t *testing.T) {
	mr := miniredis.RunT(t)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	mr.SetTime(t0)
	// a's client pipelines on one connection, which its PING below
	// renews: see there.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true, PipelineMultiplex: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	clk := clock.NewFake(t0)
	a := fleetLimiterOn(t, c, "silent:", t0, func(o *Options) { o.Clock = clk })
	b := fleetLimiter(t, mr, "silent:", t0)
	if n := beat(t, a); n != 2 {
		t.Fatalf("a counts %d, want 2", n)
	}
	rule := Rule{Name: "r", Limit: PerMinute(10)}
	if n := allowedOnRedis(t, b, rule, 10); n != 10 {
		t.Fatalf("b allowed %d of 10 before the restart", n)
	}

	mr.Close()
	mr.FlushAll() // a restart without persistence
	mr.SetTime(t0.Add(time.Second))
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's watch to see the restart", func() bool { return !a.fleet.Settled() })
	// A real restart takes long enough for a's client to see its own
	// connection end, and dial anew at its next call. Here the client's
	// own PING, on its one connection, finds it closed, so that the
	// Limiter's calls do not fail on it.
	waitFor(t, "a's client to reconnect", func() bool { return c.Do(context.Background(), c.B().Ping().Build()).Error() == nil })

	// a's first call, a Peek, asks the fleet first; a's clock then moves
	// on between its calls, so that its events since the loss, which
	// Redis holds, do not count twice (see lostOwn).
	if r, err := a.Peek(context.Background(), rule, "k"); err != nil || r.Degraded || r.Remaining != 5 {
		t.Fatalf("a's Peek on the empty Redis = %+v, %v; want 5 remaining on Redis: the Rate less b's share", r, err)
	}
	n := 0
	for range 10 {
		clk.Advance(time.Millisecond)
		n += allowedOnRedis(t, a, rule, 1)
	}
	if n != 5 {
		t.Fatalf("a allowed %d on the empty Redis, want 5: the Rate less b's share, since Redis lost b's 10", n)
	}
	if a.fleet.Lost() == nil {
		t.Error("a decided without learning of the loss")
	}
}

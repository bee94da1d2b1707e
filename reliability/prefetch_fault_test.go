package reliability_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestPrefetchAfterOutageCountsOwnEvents: a hot pair of a rule with
// Prefetch (10 a second) allows 8 events without Redis while Redis
// refuses every command (NOPERM: it keeps its data) or is killed and
// restarted without its data. The first calls once Redis is back must
// count those 8, which Redis does not hold until the write-back brings
// them (or which it lost with the rest): at most 2 more in the window,
// whether they come from a grant or from Redis itself.
func TestPrefetchAfterOutageCountsOwnEvents(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	for _, fault := range []string{"noperm", "kill"} {
		t.Run(fault, func(t *testing.T) {
			srv := redistest.Start(t, redistest.Options{})
			var logs testkit.SyncBuffer
			clk := testkit.NewClock()
			opts := testkit.OutageOptions(clk, &logs, nil)
			l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
			rule := ratelimit.Rule{Name: "hot", Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 50 * time.Millisecond}
			switch fault {
			case "noperm":
				srv.Forbid(true)
			case "kill":
				srv.Kill()
			}
			for i := range 8 {
				if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || !r.Degraded {
					t.Fatalf("call %d while Redis cannot be used = %+v, want allowed without Redis", i, r)
				}
			}
			switch fault {
			case "noperm":
				srv.Forbid(false)
			case "kill":
				srv.Restart()
			}
			time.Sleep(2 * opts.ProbeAfter) // the breaker probes again
			clk.Advance(time.Millisecond)
			allowed := 0
			var paths []string
			for range 10 {
				r := testkit.Allow(t, l, rule, "k")
				if r.Allowed {
					allowed++
				}
				paths = append(paths, fmt.Sprintf("%+v", r))
			}
			if allowed > 2 {
				t.Errorf("after the outage %d more allowed in the window that holds 8 already, more than Rate 10 allows (2); stats %+v\n%v\nlog:\n%s", allowed, l.Stats(), paths, logs.String())
			}
		})
	}
}

// TestPrefetchAfterOutageCountsTheFleet: two instances (Limiters) of a
// rule with Prefetch, 10 a second. While Redis refuses every command, A
// allows its share (5) without Redis and cannot write it back (its breaker
// stays open); B only fails. Once Redis is back B's decisions count A's
// share on top of Redis' count (the fleet's reserve, docs/fallback.md),
// grants included: B allows at most 5 in the window, the fleet at most 10.
func TestPrefetchAfterOutageCountsTheFleet(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	clk := testkit.NewClock()
	newInstance := func(probeAfter time.Duration) *ratelimit.Limiter {
		opts := testkit.OutageOptions(clk, &logs, nil)
		opts.KeyPrefix = "pffleet:"
		opts.HeartbeatInterval = 500 * time.Millisecond
		opts.ProbeAfter = probeAfter
		return testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	}
	a, b := newInstance(time.Hour), newInstance(20*time.Millisecond)
	testkit.Eventually(t, "both count two instances", func() bool {
		return a.Stats().Instances == 2 && b.Stats().Instances == 2
	})
	rule := ratelimit.Rule{Name: "hot", Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 50 * time.Millisecond}
	srv.Forbid(true)
	byA := 0
	for range 8 {
		if r := testkit.Allow(t, a, rule, "k"); r.Allowed {
			byA++
		}
	}
	for range 2 { // B fails too, and its breaker opens
		if _, err := b.Peek(t.Context(), rule, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if byA != 5 || a.Stats().BreakersOpen != 1 || b.Stats().BreakersOpen != 1 {
		t.Fatalf("while Redis refused: A allowed %d (want its share, 5); breakers open: A %d, B %d", byA, a.Stats().BreakersOpen, b.Stats().BreakersOpen)
	}
	srv.Forbid(false)
	time.Sleep(2 * 20 * time.Millisecond) // B's breaker probes again; A's stays open
	clk.Advance(time.Millisecond)
	byB := 0
	for range 20 {
		if r := testkit.Allow(t, b, rule, "k"); r.Allowed {
			byB++
		}
	}
	if st := a.Stats(); st.WrittenBack != 0 {
		t.Fatalf("A wrote back %d events: its breaker was to stay open", st.WrittenBack)
	}
	if byB > 5 {
		t.Errorf("once Redis was back B allowed %d in the window where A allowed 5 without Redis: the fleet %d, more than Rate 10; B's stats %+v\nlog:\n%s",
			byB, byA+byB, b.Stats(), logs.String())
	}
}

package reliability_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultRedisPaused holds redis-server still for 2 s, once with
// CLIENT PAUSE (the server runs but serves no client) and once with
// DEBUG SLEEP (its only thread sleeps), while 16 goroutines call Allow on a
// limiter made by Dial (Timeout 100ms, TripAfter 3).
//
//   - No call hangs for the pause: each ends within 10 × Timeout.
//   - The breaker opens after the first timeouts; from then on calls do not
//     touch Redis at all. To prove it, every call that starts once the breaker
//     is open uses a fresh key: had any of them reached the script, Redis
//     would hold its log once it resumes (a first event on a fresh key is
//     always recorded). Redis' own count of script runs (INFO commandstats)
//     over the whole pause is at most the calls made before the breaker
//     opened.
//   - Once the pause is over the limiter returns to Redis.
//
// The worst call latency is logged next to Timeout.
func TestFaultRedisPaused(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	const pause = 2 * time.Second
	for _, how := range []string{"CLIENT PAUSE", "DEBUG SLEEP"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{EnableDebug: true})
			var logs testkit.SyncBuffer
			var states testkit.StateLog
			clk := newRecClock()
			opts := ratelimit.Options{
				Clock:           clk,
				Timeout:         100 * time.Millisecond,
				TripAfter:       3,
				ProbeAfter:      pause + 500*time.Millisecond, // no probe while paused
				KeyPrefix:       "pause:",
				Logger:          quietLogger(&logs),
				OnBreakerChange: states.Hook,
			}
			l, err := ratelimit.Dial(testkit.ClientOption(srv.Addr()), opts)
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			t.Cleanup(l.Close)
			// DegradedAllow records nothing without Redis, so nothing is
			// written back once Redis is back: a key of a call made with the
			// breaker open can then be in Redis only if that call reached it.
			rule := ratelimit.Rule{Name: "p", Limit: ratelimit.PerMinute(1 << 20), Degraded: ratelimit.DegradedAllow}
			bound := hangBound(opts)
			testkit.Eventually(t, "connected", func() bool { return !testkit.Allow(t, l, rule, "warm").Degraded })
			scriptsBefore := scriptCalls(t, srv)

			var breakerOpen atomic.Bool
			load := startLoad(t, l, clk, rule, bound, loadConfig{goroutines: 16, pause: 200 * time.Microsecond,
				keyFor: func(phase int32, n int64) string {
					if breakerOpen.Load() {
						return fmt.Sprintf("open-%d", n) // a fresh key per call
					}
					return "hot"
				}})
			time.Sleep(50 * time.Millisecond)
			load.setPhase(phaseInjecting)
			pausedAt := time.Now()
			if how == "CLIENT PAUSE" {
				srv.Pause(pause)
			} else {
				srv.DebugSleep(pause)
			}
			load.setPhase(phaseFault)
			testkit.Eventually(t, "the breaker opened", func() bool { return strings.Contains(states.String(), "closed->open") })
			breakerOpen.Store(true)
			openedAfter := time.Since(pausedAt)
			// Keep calling until just before the pause ends.
			time.Sleep(pause - time.Since(pausedAt) - 100*time.Millisecond)
			load.setPhase(phaseAfter)
			calls := load.stopLoad()

			checkNoErrorsNoHangs(t, calls, bound)
			injecting := summarize(calls, bound, func(c faultCall) bool { return c.key == "hot" && c.startPhase == phaseInjecting })
			paused := summarize(calls, bound, func(c faultCall) bool { return c.key == "hot" && c.startPhase == phaseFault })
			open := summarize(calls, bound, func(c faultCall) bool { return strings.HasPrefix(c.key, "open-") })
			t.Logf("%s for %v: breaker open %v after it began", how, pause, openedAfter.Round(time.Millisecond))
			t.Logf("calls while the pause was being set up: %v", injecting)
			t.Logf("calls while paused, breaker closed: %v", paused)
			t.Logf("calls while the breaker was open:   %v", open)
			t.Logf("worst call latency while paused: %v (Timeout %v, hang bound %v)", load.lat.Worst(), opts.Timeout, bound)
			if open.calls == 0 || open.degraded != open.calls {
				t.Errorf("calls with the breaker open: %v; want every one degraded", open)
			}
			if paused.calls == 0 || paused.degraded != paused.calls {
				t.Errorf("calls that started once the pause was in place: %v; want every one degraded", paused)
			}

			// Wait for Redis to resume and the limiter to return to it.
			testkit.Eventually(t, "decisions back on redis", func() bool { return !testkit.Allow(t, l, rule, "after").Degraded })
			if n := mustInt(t, srv, "EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "pause:*open-*"); n != 0 {
				t.Errorf("%d of the %d calls made with the breaker open reached Redis", n, open.calls)
			}
			ran := scriptCalls(t, srv) - scriptsBefore
			// Script runs since the pause began: the load's calls before the
			// breaker opened (which Redis ran late, or ran before the pause),
			// at most one probe, and the calls on "after".
			limit := injecting.calls + paused.calls + summarize(calls, bound, func(c faultCall) bool { return c.startPhase == phaseBefore }).calls + 20
			if ran > limit {
				t.Errorf("Redis ran %d scripts since the pause; the calls that could reach it number at most %d", ran, limit)
			}
			t.Logf("Redis ran %d scripts for %d calls; fault figures: calls=%d pauses=1", ran, len(calls)+2, len(calls))
		})
	}
}

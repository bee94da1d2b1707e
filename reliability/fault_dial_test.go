package reliability_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultDialWhileRedisDown dials a real redis-server that is not there:
// once with the server stopped (connection refused), once through a proxy
// that accepts connections and answers nothing. Dial must return a working
// limiter at once (within 10 × Timeout), which decides locally and exactly
// (Degraded), and switches to Redis by itself once Redis is reachable.
func TestFaultDialWhileRedisDown(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	for _, how := range []string{"stopped", "silent"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{})
			addr := srv.Addr()
			var proxy *redistest.Proxy
			if how == "stopped" {
				srv.Stop()
			} else {
				proxy = redistest.NewProxy(t, srv.Addr())
				proxy.BlackHole(true)
				addr = proxy.Addr()
			}
			var logs testkit.SyncBuffer
			clk := testkit.NewClock()
			opts := ratelimit.Options{Clock: clk, Timeout: 100 * time.Millisecond, ProbeAfter: 200 * time.Millisecond,
				KeyPrefix: "dial:", Logger: quietLogger(&logs)}
			start := time.Now()
			l, err := ratelimit.Dial(testkit.ClientOption(addr), opts)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("Dial with redis %s: %v", how, err)
			}
			defer l.Close()
			if took > hangBound(opts) {
				t.Errorf("Dial with redis %s took %v, beyond the hang bound %v", how, took, hangBound(opts))
			}
			t.Logf("Dial with redis %s returned in %v", how, took)

			rule := ratelimit.Rule{Name: "d", Limit: ratelimit.PerMinute(3)}
			for i, want := range []ratelimit.Result{
				{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: time.Minute, Degraded: true},
				{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: time.Minute, Degraded: true},
				{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: time.Minute, Degraded: true},
				{Limit: 3, RetryAfter: time.Minute, ResetAfter: time.Minute, Degraded: true},
			} {
				begin := time.Now()
				got := testkit.Allow(t, l, rule, "k")
				if d := time.Since(begin); d > hangBound(opts) {
					t.Errorf("call %d took %v", i, d)
				}
				if got != want {
					t.Fatalf("call %d with redis %s:\n got %+v\nwant %+v", i, how, got, want)
				}
			}
			if err := l.Reset(context.Background(), rule, "k"); !errors.Is(err, ratelimit.ErrUnavailable) {
				t.Errorf("Reset with redis %s: %v, want ErrUnavailable", how, err)
			}

			if how == "stopped" {
				srv.Restart()
			} else {
				proxy.BlackHole(false)
				proxy.ResetAll() // the swallowed handshake broke the open streams
			}
			testkit.Eventually(t, "decisions on redis", func() bool { return !testkit.Allow(t, l, rule, "probe").Degraded })
			// The local decisions were Reset before Redis was reachable: the
			// write-back brings the Reset, not the events, and a Reset
			// applied late keeps what was recorded from its time on.
			if r := testkit.Allow(t, l, rule, "k"); r.Degraded || !r.Allowed || r.Remaining != 2 {
				t.Errorf("first call on k on redis = %+v, want allowed with Remaining 2", r)
			}
			logKey, _ := layoutKeys(opts.KeyPrefix, rule.Name, "k")
			if n := mustInt(t, srv, "ZCARD", logKey); n != 1 {
				t.Errorf("ZCARD %s = %d, want 1", logKey, n)
			}
			if !strings.Contains(logs.String(), "redis unreachable") {
				t.Errorf("no warning that redis was unreachable in the log:\n%s", logs.String())
			}
		})
	}
}

package reliability_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultScriptCacheLost empties redis-server's script cache, with
// SCRIPT FLUSH while 32 goroutines call Allow and AllowN at one instant, and
// with a restart. The limiter must answer NOSCRIPT by sending the script with
// EVAL: no call fails, none is Degraded, the breaker never moves, and the
// counts are exact (Redis' ZCARD equals the events allowed).
func TestFaultScriptCacheLost(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	clk := testkit.NewClock()
	opts := testkit.Options(clk)
	opts.KeyPrefix = "script:"
	opts.Logger = quietLogger(&logs)
	opts.OnBreakerChange = states.Hook
	l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	ctx := context.Background()
	// A rate no run can reach in the flushes' 120 ms (a fast machine makes
	// thousands of calls), so that the first calls after the restart are
	// allowed and their Remaining shows this process' own count.
	const rate = 1_000_000
	plain := ratelimit.Rule{Name: "plain", Limit: ratelimit.PerMinute(rate)}
	pen := ratelimit.Rule{Name: "pen", Limit: ratelimit.PerMinute(rate), Penalty: &ratelimit.Penalty{BanAfter: 1 << 20, BanFor: time.Hour}}
	plainLog, _ := layoutKeys(opts.KeyPrefix, plain.Name, "k")
	penLog, _ := layoutKeys(opts.KeyPrefix, pen.Name, "k")

	// SCRIPT FLUSH five times while 32 goroutines call.
	var events [2]atomic.Int64
	var calls, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rule, which, n := plain, 0, 1+i%3
				if g%2 == 1 {
					rule, which = pen, 1
				}
				r, err := l.AllowN(ctx, rule, "k", n)
				calls.Add(1)
				if err != nil || r.Degraded {
					failures.Add(1)
					t.Errorf("AllowN(%s, %d) = %+v, %v; want decided on redis", rule.Name, n, r, err)
					return
				}
				if r.Allowed {
					events[which].Add(int64(n))
				}
			}
		}()
	}
	evalBefore := commandCalls(t, srv, "eval")
	for i := 0; i < 5; i++ {
		time.Sleep(20 * time.Millisecond)
		mustDo(t, srv, "SCRIPT", "FLUSH")
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	evals := commandCalls(t, srv, "eval") - evalBefore
	if evals < 5 {
		t.Errorf("EVAL ran %d times after 5 flushes; want at least one per flush", evals)
	}
	for i, key := range []string{plainLog, penLog} {
		if got := mustInt(t, srv, "ZCARD", key); int64(got) != events[i].Load() {
			t.Errorf("ZCARD %s = %d, events allowed %d", key, got, events[i].Load())
		}
	}
	t.Logf("flushes=5: %d calls, %d events allowed (plain %d, penalty %d), EVAL ran %d times",
		calls.Load(), events[0].Load()+events[1].Load(), events[0].Load(), events[1].Load(), evals)

	// A restart loses the data and the scripts. Once the client has
	// reconnected, each script is sent again, once (the plain rule's, which
	// the reconnecting peek and the plain rule share, and the penalty
	// rule's). Redis' logs start afresh; this process' own count does not:
	// what it allowed before the restart still counts in its decisions
	// (the exact-recovery guarantee).
	srv.Restart()
	testkit.Eventually(t, "reconnected", func() bool {
		r, err := l.Peek(ctx, ratelimit.Rule{Name: "reconnect", Limit: ratelimit.PerMinute(1)}, "k")
		return err == nil && !r.Degraded
	})
	for i, rule := range []ratelimit.Rule{plain, pen} {
		r, err := l.AllowN(ctx, rule, "k", 2)
		if want := rate - int(events[i].Load()) - 2; err != nil || r.Degraded || !r.Allowed || r.Remaining != want {
			t.Errorf("first AllowN(%s, 2) after the restart = %+v, %v; want allowed on redis, Remaining %d", rule.Name, r, err, want)
		}
	}
	if got := commandCalls(t, srv, "eval"); got != 2 {
		t.Errorf("after the restart EVAL ran %d times; want 2: each of the two scripts the three calls use is sent once", got)
	}
	for _, key := range []string{plainLog, penLog} {
		if got := mustInt(t, srv, "ZCARD", key); got != 2 {
			t.Errorf("ZCARD %s after the restart = %d, want 2", key, got)
		}
	}
	if s := states.String(); s != "" {
		t.Errorf("the breaker moved: %s", s)
	}
}

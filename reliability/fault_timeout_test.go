package reliability_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultTimeoutIsUnknownOutcome adds latency just above Timeout between
// the limiter and redis-server, so every call times out although Redis runs
// its script a little later. The calls sent are decided locally (Degraded,
// no error); once the process' own count is full, the key's calls go to
// Redis one at a time (its crowd, see crowd.go), and a call whose wait for
// that one ran out is rejected in-process (PathShield, not Degraded: the
// own count, full, says so). Once the latency is gone and Redis has run
// everything it was sent, its own count for the key (ZCARD) never exceeds
// Rate, whatever number of timed-out calls it recorded.
func TestFaultTimeoutIsUnknownOutcome(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	proxy := redistest.NewProxy(t, srv.Addr())
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	clk := testkit.NewClock()
	opts := ratelimit.Options{
		Clock:           clk,
		Timeout:         100 * time.Millisecond,
		TripAfter:       1 << 20, // keep sending: every call is a timeout
		KeyPrefix:       "to:",
		Logger:          quietLogger(&logs),
		OnBreakerChange: states.Hook,
	}
	var byPath sync.Map // Path -> *atomic.Int64, of the key's decisions
	opts.OnDecision = func(d ratelimit.Decision) {
		if d.Key == "k" {
			n, _ := byPath.LoadOrStore(d.Path, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}
	paths := func(p ratelimit.Path) int {
		if n, ok := byPath.Load(p); ok {
			return int(n.(*atomic.Int64).Load())
		}
		return 0
	}
	l, err := ratelimit.Dial(testkit.ClientOption(proxy.Addr()), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	const rate = 5
	rule := ratelimit.Rule{Name: "t", Limit: ratelimit.PerMinute(rate)}
	logKey, _ := layoutKeys(opts.KeyPrefix, rule.Name, "k")
	if r := testkit.Allow(t, l, rule, "warm"); r.Degraded {
		t.Fatalf("warm-up call = %+v", r)
	}

	proxy.SetLatency(opts.Timeout + 30*time.Millisecond)
	const goroutines, each = 4, 5
	var mu sync.Mutex
	var allowed, timedOut, crowded, worst = 0, 0, 0, time.Duration(0)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				start := time.Now()
				r, err := l.Allow(context.Background(), rule, "k")
				took := time.Since(start)
				mu.Lock()
				worst = max(worst, took)
				if err != nil {
					t.Errorf("a call that timed out returned an error: %v", err)
				}
				switch {
				case r.Degraded:
					timedOut++
				case r.Allowed || r.RetryAfter <= 0:
					t.Errorf("a call decided without waiting out Timeout = %+v; want a rejection with its RetryAfter", r)
				default:
					crowded++
				}
				if r.Allowed {
					allowed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	proxy.SetLatency(0)
	if timedOut+crowded != goroutines*each || timedOut < rate || paths(ratelimit.PathLocal) != timedOut || paths(ratelimit.PathShield) != crowded {
		t.Errorf("%d of %d calls timed out and were decided locally, %d were rejected in-process while the key's call was on its way (decisions by path: local %d, shield %d, redis %d); want every call one of the two, and at least the %d allowed timed out",
			timedOut, goroutines*each, crowded, paths(ratelimit.PathLocal), paths(ratelimit.PathShield), paths(ratelimit.PathRedis), rate)
	}
	if allowed != rate {
		t.Errorf("the local log allowed %d calls, want %d", allowed, rate)
	}
	// Let Redis run what it was sent (ZCARD stops moving), and the
	// write-back bring what the local log allowed.
	last := -1
	testkit.Eventually(t, "redis has run every script it was sent, and the write-back is done", func() bool {
		n := mustInt(t, srv, "ZCARD", logKey)
		settled := n == last && l.Stats().WriteBackPending == 0
		last = n
		time.Sleep(50 * time.Millisecond)
		return settled
	})
	// Each allowed call is written back under the member its script got,
	// so a call both Redis and the local log allowed counts once. What
	// stays inexact: events Redis' scripts recorded for calls the local
	// log then rejected, at most rate of them.
	if last < allowed || last > allowed+rate {
		t.Errorf("Redis' log holds %d events; want the %d allowed, and at most %d more", last, allowed, rate)
	}
	if s := l.Stats(); s.WrittenBack != uint64(allowed) || s.WriteBackDropped != 0 {
		t.Errorf("Stats = %+v, want the %d allowed written back", s, allowed)
	}
	t.Logf("%d calls timed out (worst %v, Timeout %v), %d were rejected in-process; the local log allowed %d; Redis' log holds %d once they are written back; breaker: %q",
		timedOut, worst, opts.Timeout, crowded, allowed, last, states.String())
}

// TestCallerDeadlineShorterThanTimeout: a caller whose own deadline is
// shorter than Options.Timeout calls a Redis that is slower than both.
// docs/fallback.md says the caller's context ending returns ctx.Err(); the call may
// also end as a Degraded decision, because the client's socket deadline (set
// to the caller's deadline) can fire before the context's own timer, and the
// limiter then sees a network timeout while ctx.Err() is still nil. Which of
// the two a call gets is a race (see the report); the test asserts that every
// call ends in one of them, never on Redis and never in a hang, and logs the
// split and the breaker's changes.
func TestCallerDeadlineShorterThanTimeout(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	proxy := redistest.NewProxy(t, srv.Addr())
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	opts := ratelimit.Options{
		Clock:           testkit.NewClock(),
		Timeout:         time.Second,
		TripAfter:       2,
		KeyPrefix:       "dl:",
		Logger:          quietLogger(&logs),
		OnBreakerChange: states.Hook,
	}
	l, err := ratelimit.Dial(testkit.ClientOption(proxy.Addr()), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	rule := ratelimit.Rule{Name: "d", Limit: ratelimit.PerMinute(100)}
	testkit.Allow(t, l, rule, "warm")

	proxy.SetLatency(200 * time.Millisecond)
	const calls = 10
	var errs, degraded int
	for i := 0; i < calls; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		r, err := l.Allow(ctx, rule, "k")
		took := time.Since(start)
		cancel()
		if took > hangBound(opts) {
			t.Fatalf("call %d took %v", i, took)
		}
		switch {
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("call %d: %v, want context.DeadlineExceeded or a decision", i, err)
		case err != nil:
			errs++
		case r.Degraded:
			degraded++
		}
	}
	proxy.SetLatency(0)
	time.Sleep(50 * time.Millisecond) // let the hook report
	t.Logf("%d calls with a 50ms deadline against a Redis 200ms away (Timeout %v, TripAfter %d): "+
		"%d returned context.DeadlineExceeded, %d were decided locally; breaker changes: %q",
		calls, opts.Timeout, opts.TripAfter, errs, degraded, states.String())
	if errs+degraded != calls {
		t.Fatalf("some calls were decided on redis through 200ms of latency within 50ms")
	}
}

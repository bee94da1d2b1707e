package ratelimit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/conformance"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// TestWaitSleepsUntilTheCallCanPass drives Wait with a fake clock: it
// sleeps for RetryAfter, asks once more, and returns the allowing Result.
func TestWaitSleepsUntilTheCallCanPass(t *testing.T) {
	for _, b := range []conformance.Backend{conformance.Local(), conformance.Miniredis()} {
		t.Run(b.Name, func(t *testing.T) {
			clk := testkit.NewClock()
			var asked atomic.Int64
			opts := testkit.Options(clk)
			opts.OnDecision = func(ratelimit.Decision) { asked.Add(1) }
			l := b.New(t, opts)
			rule := ratelimit.Rule{Name: "wait", Limit: ratelimit.PerMinute(2)}
			ctx := context.Background()
			for i := 0; i < 2; i++ {
				if r, err := l.Wait(ctx, rule, "k"); err != nil || !r.Allowed {
					t.Fatalf("Wait %d with room = %+v, %v", i, r, err)
				}
				clk.Advance(10 * time.Second)
			}
			done := waitAsleep(t, l, clk, rule)
			clk.Advance(40*time.Second - time.Microsecond) // 1µs short of the oldest event leaving
			select {
			case r := <-done:
				t.Fatalf("Wait returned early: %+v", r)
			case <-time.After(20 * time.Millisecond):
			}
			clk.Advance(time.Microsecond)
			if r := <-done; !r.Allowed || r.Remaining != 0 {
				t.Fatalf("Wait = %+v, want allowed", r)
			}
			if got := asked.Load(); got != 4 {
				t.Fatalf("Wait asked the limiter %d times, want 4: once per chance, no polling", got)
			}
		})
	}
}

func TestWaitEndsWithItsContext(t *testing.T) {
	for _, clk := range []ratelimit.Clock{nil, testkit.NewClock()} { // the process clock, a fake that can sleep
		l := testkit.NewLimiter(t, nil, ratelimit.Options{Clock: clk})
		rule := ratelimit.Rule{Name: "wait-ctx", Limit: ratelimit.PerHour(1)}
		ctx := context.Background()
		if _, err := l.Wait(ctx, rule, "k"); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, time.Minute)
		r, err := l.Wait(short, rule, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || r.Allowed || r.RetryAfter <= time.Minute {
			t.Fatalf("clock %T: Wait with a deadline before the retry = %+v, %v; want DeadlineExceeded at once", clk, r, err)
		}
		cancelled, cancel2 := context.WithCancel(ctx)
		cancel2()
		if _, err := l.Wait(cancelled, rule, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("clock %T: Wait with a cancelled context: %v", clk, err)
		}
	}
}

// TestWaitForAToken: Wait on a GCRA bucket sleeps until the next token,
// to the µs, on the limiter's clock.
func TestWaitForAToken(t *testing.T) {
	clk := testkit.NewClock()
	l := testkit.NewLimiter(t, nil, testkit.Options(clk))
	rule := ratelimit.Rule{Name: "wait-g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 3, Window: time.Second, Burst: 1}}
	ctx := context.Background()
	if r, err := l.Wait(ctx, rule, "k"); err != nil || !r.Allowed {
		t.Fatalf("Wait on a full bucket = %+v, %v", r, err)
	}
	done := waitAsleep(t, l, clk, rule)
	clk.Advance(333333 * time.Microsecond) // the token is due at 333333⅓µs
	testkit.Eventually(t, "Wait asleep again, 1µs short", func() bool { return clk.Sleepers() == 1 })
	clk.Advance(time.Microsecond)
	if r := <-done; !r.Allowed || r.Limit != 1 || r.ResetAfter != 333334*time.Microsecond {
		t.Fatalf("Wait = %+v, want allowed with the bucket full again in 333334µs", r)
	}
}

// waitAsleep starts Wait for key "k" under rule on its own goroutine and
// returns once it sleeps on clk; the channel gets its Result.
func waitAsleep(t *testing.T, l *ratelimit.Limiter, clk *ratelimittest.Clock, rule ratelimit.Rule) <-chan ratelimit.Result {
	t.Helper()
	done := make(chan ratelimit.Result)
	go func() {
		r, err := l.Wait(context.Background(), rule, "k")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	testkit.Eventually(t, "Wait asleep", func() bool { return clk.Sleepers() == 1 })
	return done
}

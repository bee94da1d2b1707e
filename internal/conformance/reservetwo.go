package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// ReserveFreesForEveryInstance: a give-back is free for the next call on
// any instance, not only on the one that settled. Two Limiters of one
// store and one clock (Backend.Two), a Rate of 10: A reserves 5, B
// reserves 3 (B's own count then holds Redis' 8), A cancels. B may then
// take the 7 left, at once. Before, a calendar quota's and a fixed
// window's copy of Redis' count in B kept the 5 given back (the copy keeps
// the larger count), and B rejected the 7 until the period or the window
// ended (for 11h59m and 59m59s here), and B's Peek said 2. A GCRA
// bucket's copy in B kept the TAT of before the cancel (the copy keeps the
// later), and B rejected the 7 with RetryAfter 499h59m59.998s (Rate 10 per
// 1000h), Peek 2, until its copy drained. The sliding log, exact and
// approximate, keeps no copy.
func ReserveFreesForEveryInstance(t *testing.T, backends []Backend) {
	rules := []ratelimit.Rule{
		sliding("log", 10, time.Hour),
		approximate(sliding("approx", 10, time.Hour)),
		quotaRule("quota", 10, ratelimit.Day, nil),
		fixed("fixed", 10, time.Hour),
		gcra("gcra", 10, 1000*time.Hour, 10),
	}
	onTwo(t, backends, func(t *testing.T, b Backend) {
		for _, rule := range rules {
			t.Run(rule.Name, func(t *testing.T) {
				clk := testkit.NewClock()
				a, bl := b.Two(t, testkit.Options(clk), testkit.Options(clk))
				ctx := context.Background()
				reserve := func(l *ratelimit.Limiter, n int) *ratelimit.Reservation {
					t.Helper()
					r, res, err := l.Reserve(ctx, rule, "k", n)
					if err != nil || r == nil {
						t.Fatalf("Reserve(%d) = %v, %+v, %v", n, r, res, err)
					}
					return r
				}
				ra := reserve(a, 5)
				clk.Advance(time.Millisecond)
				reserve(bl, 3)
				clk.Advance(time.Millisecond)
				if err := ra.Cancel(ctx); err != nil {
					t.Fatal(err)
				}
				for i, l := range []*ratelimit.Limiter{a, bl} {
					if p, err := l.Peek(ctx, rule, "k"); err != nil || p.Remaining != 7 {
						t.Fatalf("Peek on instance %d after the cancel: Remaining %d, %v; want 7", i, p.Remaining, err)
					}
				}
				res, err := bl.AllowN(ctx, rule, "k", 7)
				if err != nil || !res.Allowed || res.Remaining != 0 {
					t.Fatalf("AllowN(7) on the instance that did not cancel = %+v, %v; want allowed, Remaining 0", res, err)
				}
				if res, _ := a.Allow(ctx, rule, "k"); res.Allowed {
					t.Fatalf("Allow on the instance that cancelled, with the Rate spent: %+v", res)
				}
			})
		}
	})
}

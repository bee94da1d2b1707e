package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// AllowAll: a request is decided by every rule in order; a denial costs the
// rules before it nothing and the rules after it are not asked; a rule in
// dry run never stops the walk; an error takes back what was recorded.
func AllowAll(t *testing.T, backends []Backend) {
	global := ratelimit.Rule{Name: "global", Limit: ratelimit.PerMinute(100)}
	approx := ratelimit.Rule{Name: "global-approx", Limit: ratelimit.PerMinute(100), Approximate: true}
	user := ratelimit.Rule{Name: "user", Limit: ratelimit.PerMinute(2)}
	ip := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(5)}
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			l := b.New(t, testkit.Options(testkit.NewClock()))
			checks := []ratelimit.Check{
				{Rule: global, Key: "all", N: 3},
				{Rule: approx, Key: "all"},
				{Rule: user, Key: "u1"},
				{Rule: ip, Key: "203.0.113.7"},
			}
			for i := 0; i < 2; i++ {
				rs, err := l.AllowAll(ctx, checks)
				if err != nil || len(rs) != 4 || !rs[3].Allowed {
					t.Fatalf("request %d: %+v, %v; want all four allowed", i, rs, err)
				}
			}
			rs, err := l.AllowAll(ctx, checks)
			if err != nil || len(rs) != 3 || rs[2].Allowed || !rs[0].Allowed || !rs[1].Allowed {
				t.Fatalf("third request: %+v, %v; want denied by the user rule", rs, err)
			}
			// The denied request cost the global rules nothing, and the IP
			// rule after the denial was not asked.
			if got := peekAt(t, l, global, "all").Remaining; got != 94 {
				t.Errorf("global remaining %d, want 94 (two requests of 3)", got)
			}
			if got := peekAt(t, l, approx, "all").Remaining; got != 98 {
				t.Errorf("approximate global remaining %d, want 98", got)
			}
			if got := peekAt(t, l, ip, "203.0.113.7").Remaining; got != 3 {
				t.Errorf("ip remaining %d, want 3", got)
			}
			allowAllDryRunAndError(t, l, user, ip)
		})
		t.Run(b.Name+"/gcra", func(t *testing.T) { allowAllGCRA(t, b) })
	}
}

// allowAllDryRunAndError goes on from AllowAll's denied request on l: with
// user in dry run, the walk goes on to ip; an invalid rule after ip stops
// the walk with its error and takes back what ip recorded.
func allowAllDryRunAndError(t *testing.T, l *ratelimit.Limiter, user, ip ratelimit.Rule) {
	ctx := context.Background()
	// A rule in dry run never stops the walk.
	dryUser := user
	dryUser.DryRun = true
	rs, err := l.AllowAll(ctx, []ratelimit.Check{{Rule: dryUser, Key: "u1"}, {Rule: ip, Key: "203.0.113.7"}})
	if err != nil || len(rs) != 2 || !rs[0].DryRun || !rs[1].Allowed {
		t.Fatalf("with the user rule in dry run: %+v, %v", rs, err)
	}

	// An error stops the walk and takes back what was recorded.
	rs, err = l.AllowAll(ctx, []ratelimit.Check{{Rule: ip, Key: "203.0.113.7"}, {Rule: ratelimit.Rule{Name: "broken"}, Key: "x"}})
	if !errors.Is(err, ratelimit.ErrInvalidRule) || len(rs) != 1 {
		t.Fatalf("with an invalid second rule: %+v, %v", rs, err)
	}
	if got := peekAt(t, l, ip, "203.0.113.7").Remaining; got != 2 {
		t.Errorf("ip remaining %d after the failed request, want 2", got)
	}
}

// allowAllGCRA: a GCRA pair taken back after another call of its pair,
// made later (here from OnDecision, between the pair's decision and the
// denial), frees what the pair took and no more: the bucket counts the
// other call alone, as if the request had never come. Moving the TAT back
// instead would free the other call's token too. An allowed request's
// GCRA pairs count as AllowN's.
func allowAllGCRA(t *testing.T, b Backend) {
	ctx := context.Background()
	bucket := gcra("all-gcra", 10, 10*sec, 10) // one token a second, ten at once
	deny := sliding("all-deny", 1, time.Minute)
	other := sliding("all-other", 100, time.Minute)
	clk := testkit.NewClock()
	opts := testkit.Options(clk)
	var l *ratelimit.Limiter
	var between atomic.Bool
	var during ratelimit.Result
	var duringErr error
	opts.OnDecision = func(d ratelimit.Decision) {
		if d.Rule.Name == bucket.Name && d.N == 10 && between.CompareAndSwap(true, false) {
			clk.Set(testkit.Epoch().Add(5 * sec))
			during, duringErr = l.Allow(ctx, bucket, "k")
		}
	}
	l = b.New(t, opts)
	if r, err := l.Allow(ctx, deny, "d"); err != nil || !r.Allowed {
		t.Fatalf("filling the denying rule: %+v, %v", r, err)
	}
	between.Store(true)
	rs, err := l.AllowAll(ctx, []ratelimit.Check{{Rule: bucket, Key: "k", N: 10}, {Rule: deny, Key: "d"}})
	if err != nil || len(rs) != 2 || !rs[0].Allowed || rs[1].Allowed {
		t.Fatalf("request: %+v, %v; want the bucket's pair allowed, then a denial", rs, err)
	}
	if want := ok(10, 4, 6*sec); duringErr != nil || during != want {
		t.Fatalf("the call between: %+v, %v; want %+v", during, duringErr, want)
	}
	// Burst - 1: the call at 5s holds its token, the request none.
	if r, err := l.Peek(ctx, bucket, "k"); err != nil || r != ok(10, 9, sec) {
		t.Fatalf("after the request was denied: %+v, %v; want %+v", r, err, ok(10, 9, sec))
	}
	// Allowed: the pair counts as AllowN(3) would, now and later.
	rs, err = l.AllowAll(ctx, []ratelimit.Check{{Rule: bucket, Key: "k", N: 3}, {Rule: other, Key: "o"}})
	if err != nil || len(rs) != 2 || rs[0] != ok(10, 6, 4*sec) || !rs[1].Allowed {
		t.Fatalf("allowed request: %+v, %v; want the bucket at %+v", rs, err, ok(10, 6, 4*sec))
	}
	clk.Set(testkit.Epoch().Add(7 * sec))
	if r, err := l.Peek(ctx, bucket, "k"); err != nil || r != ok(10, 8, 2*sec) {
		t.Fatalf("after the allowed request: %+v, %v; want %+v", r, err, ok(10, 8, 2*sec))
	}
}

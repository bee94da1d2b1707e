package reliability_test

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestPrefetchFullKey: once Redis had no slot for a pair's request (the
// log full), the pair's calls wait for the next request, which waits until
// a slot frees: rejected in-process (PathShield) with the RetryAfter of a
// rejection of one event, under a rule without a penalty and with the
// hot-key shield on. With the shield off (ShieldMax < 0) they go to Redis
// as before; under a penalty too, where each rejection is a violation
// (Redis counts it, or the shield, which owes it to Redis). Rule: 3 a
// second, Prefetch 20ms; at 0 two calls on Redis, the third from a grant
// of the one slot left, the fourth finds none.
func TestPrefetchFullKey(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	client := testkit.NewClient(t, srv.Addr())
	pen := &ratelimit.Penalty{WarnAfter: 10, BanAfter: 20, BanFor: time.Second}
	for _, c := range []struct {
		name      string
		shieldMax time.Duration
		penalty   *ratelimit.Penalty
		path      ratelimit.Path // of the calls after the empty request
	}{
		{"shield on", 0, nil, ratelimit.PathShield},
		{"shield off", -1, nil, ratelimit.PathRedis},
		{"a penalty", 0, pen, ratelimit.PathRedis},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := testkit.NewClock()
			opts := testkit.Isolated(testkit.Options(clk))
			opts.ShieldMax = c.shieldMax
			var path ratelimit.Path
			opts.OnDecision = func(d ratelimit.Decision) { path = d.Path }
			l := testkit.NewLimiter(t, client, opts)
			rule := ratelimit.Rule{Name: "full", Limit: ratelimit.Limit{Rate: 3, Window: time.Second}, Prefetch: 20 * time.Millisecond, Penalty: c.penalty}
			for i, want := range []ratelimit.Path{ratelimit.PathRedis, ratelimit.PathRedis, ratelimit.PathPrefetch} {
				if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || path != want {
					t.Fatalf("call %d = %+v on %v, want allowed on %v", i, r, path, want)
				}
			}
			for i, at := range []time.Duration{0, time.Millisecond, 500 * time.Millisecond} {
				clk.Set(testkit.Epoch().Add(at))
				r := testkit.Allow(t, l, rule, "k")
				if r.Allowed || path != c.path && (c.penalty == nil || path != ratelimit.PathShield) || r.RetryAfter != time.Second-at {
					t.Errorf("call %d after the log filled, at %v = %+v on %v; want rejected on %v, RetryAfter %v (the events at 0 leave at 1s)", i, at, r, path, c.path, time.Second-at)
				}
				if c.penalty != nil && r.Violations != i+1 {
					t.Errorf("call %d under a penalty: %d violations, want %d", i, r.Violations, i+1)
				}
			}
			// A slot frees at 1s: a call that comes then asks again.
			clk.Set(testkit.Epoch().Add(time.Second))
			if r := testkit.Allow(t, l, rule, "k"); !r.Allowed {
				t.Errorf("the call at 1s = %+v on %v, want allowed", r, path)
			}
		})
	}
}

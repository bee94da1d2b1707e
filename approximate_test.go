package ratelimit_test

import (
	"context"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/conformance"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestApproximateBounds drives the approximate counter with random traffic
// and checks its documented promises: no Window-long interval holds more
// than 2 × Rate - 1 allowed events; a rejection's RetryAfter is exact (one
// microsecond earlier the call is still rejected, at RetryAfter it passes);
// and the local path and miniredis agree on every result.
func TestApproximateBounds(t *testing.T) {
	const rate, window = 7, 10 * time.Second
	rule := ratelimit.Rule{Name: "approx-prop", Limit: ratelimit.Limit{Rate: rate, Window: window}, Approximate: true}
	ctx := context.Background()
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		localClock, remoteClock := testkit.NewClock(), testkit.NewClock()
		local := conformance.Local().New(t, testkit.Options(localClock))
		remote := conformance.Miniredis().New(t, testkit.Options(remoteClock))
		at := time.Duration(0)
		var allowed []time.Duration // one entry per event
		for step := 0; step < 300; step++ {
			at += time.Duration(rng.Int63n(int64(2 * window / rate)))
			localClock.Set(testkit.Epoch().Add(at))
			remoteClock.Set(testkit.Epoch().Add(at))
			n := 1 + rng.Intn(3)
			got, err := local.AllowN(ctx, rule, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			want, err := remote.AllowN(ctx, rule, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("seed %d step %d: local %+v, miniredis %+v", seed, step, got, want)
			}
			if got.Allowed {
				for i := 0; i < n; i++ {
					allowed = append(allowed, at)
				}
				continue
			}
			// RetryAfter is exact: check with Peek for n = 1 only.
			if n != 1 {
				continue
			}
			for _, c := range []struct {
				d    time.Duration
				want bool
			}{{got.RetryAfter - time.Microsecond, false}, {got.RetryAfter, true}} {
				localClock.Set(testkit.Epoch().Add(at + c.d))
				if r, _ := local.Peek(ctx, rule, "k"); r.Allowed != c.want {
					t.Fatalf("seed %d step %d: rejected with RetryAfter %v, but a peek %v later says allowed=%v", seed, step, got.RetryAfter, c.d, r.Allowed)
				}
			}
		}
		sort.Slice(allowed, func(i, j int) bool { return allowed[i] < allowed[j] })
		for i, j := 0, 0; j < len(allowed); j++ {
			for allowed[j]-allowed[i] >= window {
				i++
			}
			if count := j - i + 1; count > 2*rate-1 {
				t.Fatalf("seed %d: %d events within %v, more than 2 × Rate - 1", seed, count, window)
			}
		}
	}
}

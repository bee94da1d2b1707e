package reliability_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestPrefetchHammerCountsExactly: two Limiters × 32 goroutines hammer one
// key of 20,000 events per 10s with Prefetch 20ms on redis-server, with
// AllowN of 1 to 3 events, for 600ms on the real clock: the key fills, so
// that grants come back short and empty, calls wait for requests on their
// way and are served from the grants they bring, and next grants wait for
// live ones. Each Limiter's PrefetchSlotsUsed is exactly the events it
// allowed on path prefetch, and after Close every slot granted was used or
// given back. No event leaves the window during the test, so Redis' log
// then holds exactly the events the two allowed, at most the Rate: a slot
// used twice, or used and given back, would break one or the other.
func TestPrefetchHammerCountsExactly(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	rule := ratelimit.Rule{Name: "hammer", Limit: ratelimit.Limit{Rate: 20_000, Window: 10 * time.Second}, Prefetch: 20 * time.Millisecond}
	type counts struct{ prefetch, allowed, degraded atomic.Int64 }
	var cs [2]counts
	var ls [2]*ratelimit.Limiter
	for i := range ls {
		opts := testkit.Options(nil)
		opts.KeyPrefix = "pfhammer:"
		c := &cs[i]
		opts.OnDecision = func(d ratelimit.Decision) {
			if !d.Result.Allowed {
				return
			}
			c.allowed.Add(int64(d.N))
			switch d.Path {
			case ratelimit.PathPrefetch:
				c.prefetch.Add(int64(d.N))
			case ratelimit.PathRedis, ratelimit.PathShield:
			default:
				c.degraded.Add(int64(d.N))
			}
		}
		ls[i] = testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	}
	stop := time.Now().Add(600 * time.Millisecond)
	var wg sync.WaitGroup
	for i := range 64 {
		l := ls[i%2]
		wg.Go(func() {
			for j := 0; time.Now().Before(stop); j++ {
				if _, err := l.AllowN(t.Context(), rule, "k", 1+(i+j)%3); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var allowed int64
	for i, l := range ls {
		l.Close()
		st, c := l.Stats(), &cs[i]
		t.Logf("limiter %d: %d events allowed, %d from slots; %d grants of %d slots, %d used, %d returned", i,
			c.allowed.Load(), c.prefetch.Load(), st.PrefetchGrants, st.PrefetchSlotsGranted, st.PrefetchSlotsUsed, st.PrefetchSlotsReturned)
		if int64(st.PrefetchSlotsUsed) != c.prefetch.Load() {
			t.Errorf("limiter %d: PrefetchSlotsUsed = %d, but it allowed %d events from slots", i, st.PrefetchSlotsUsed, c.prefetch.Load())
		}
		if st.PrefetchSlotsUsed+st.PrefetchSlotsReturned != st.PrefetchSlotsGranted {
			t.Errorf("limiter %d after Close: %d slots granted, %d used, %d returned", i, st.PrefetchSlotsGranted, st.PrefetchSlotsUsed, st.PrefetchSlotsReturned)
		}
		if c.prefetch.Load() == 0 {
			t.Errorf("limiter %d allowed nothing from slots: the test measures nothing", i)
		}
		allowed += c.allowed.Load()
	}
	if allowed > int64(rule.Limit.Rate) {
		t.Errorf("%d events allowed in one window, more than the Rate %d", allowed, rule.Limit.Rate)
	}
	if d := cs[0].degraded.Load() + cs[1].degraded.Load(); d > 0 {
		t.Logf("%d events allowed without Redis: Redis' log need not hold them yet", d)
		return
	}
	logKey, _ := layoutKeys("pfhammer:", rule.Name, "k")
	if n := weightedCount(t, srv, logKey); int64(n) != allowed {
		t.Errorf("Redis' log holds %d events after Close, the Limiters allowed %d", n, allowed)
	}
}

package reliability_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestConcurrencyHammer: four limiters, each with its own client like four
// instances of an application, 64 goroutines among them acquiring one key's
// slots, holding each 1–20 ms and releasing it, on a real redis-server and
// on a Redis Cluster, on Redis' own clock. A counter the goroutines share,
// raised after Acquire returns a lease and lowered before Release, never
// exceeds N; slots are granted; and when every holder has released, every
// slot is free and Redis holds no lease.
func TestConcurrencyHammer(t *testing.T) {
	stores := realStores(t)
	if stores == nil {
		t.Skip("needs redis-server and redis-cli")
	}
	const instances, goroutines, n = 4, 64, 5
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			opts := testkit.Isolated(ratelimit.Options{Timeout: 2 * time.Second})
			var ls []*ratelimit.Limiter
			for range instances {
				ls = append(ls, testkit.NewLimiter(t, testkit.NewClient(t, s.addrs...), opts))
			}
			rule := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: n, Window: 10 * time.Second}}
			ctx := context.Background()
			var inFlight, most, granted, rejected atomic.Int64
			deadline := time.Now().Add(2 * time.Second)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := ls[g%instances]
					for time.Now().Before(deadline) {
						le, res, err := l.Acquire(ctx, rule, "tenant")
						if err != nil || res.Degraded {
							t.Errorf("Acquire = %+v, %v; want decided on redis", res, err)
							return
						}
						if le == nil {
							rejected.Add(1)
							time.Sleep(time.Millisecond)
							continue
						}
						granted.Add(1)
						now := inFlight.Add(1)
						for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
						}
						time.Sleep(time.Duration(1+rand.IntN(20)) * time.Millisecond)
						inFlight.Add(-1)
						if err := le.Release(ctx); err != nil {
							t.Errorf("Release = %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("%d leases granted, %d acquires rejected, at most %d in flight (N = %d)", granted.Load(), rejected.Load(), most.Load(), n)
			if most.Load() > n {
				t.Errorf("%d leases in flight at once, more than N = %d", most.Load(), n)
			}
			if granted.Load() < 50 {
				t.Errorf("only %d leases granted in 2s", granted.Load())
			}
			for i, l := range ls {
				if r, err := l.Peek(ctx, rule, "tenant"); err != nil || r.Remaining != n {
					t.Errorf("limiter %d: Peek after every release = %+v, %v; want %d free", i, r, err, n)
				}
			}
			key, _ := layoutKeys(opts.KeyPrefix, rule.Name, "tenant")
			if got := s.zcard(t, key); got != 0 {
				t.Errorf("ZCARD %s after every release = %d, want 0", key, got)
			}
		})
	}
}

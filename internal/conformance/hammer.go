package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// hammerKinds are the rules of every kind the hammers run, each allowing
// exactly capacity events at one instant: a log's Rate, a bucket's Burst, a
// quota's Rate, a fixed window's Rate.
func hammerKinds(capacity int) []struct {
	name string
	rule ratelimit.Rule
} {
	return []struct {
		name string
		rule ratelimit.Rule
	}{
		{"", ratelimit.Rule{Limit: ratelimit.PerMinute(capacity)}},
		{"gcra/", ratelimit.Rule{Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Hour, Burst: capacity}}},
		{"quota/", ratelimit.Rule{Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: capacity, Period: ratelimit.Day}}},
		{"fixed/", ratelimit.Rule{Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: capacity, Window: time.Hour}}},
	}
}

// HammerOneKey sends hundreds of goroutines at one key at one fake
// instant: exactly Rate (a bucket's Burst) calls pass, and under a penalty
// every other call is counted as exactly one violation.
func HammerOneKey(t *testing.T, backends []Backend) {
	const goroutines, perGoroutine, rate = 300, 3, 137
	for _, b := range backends {
		for _, kind := range hammerKinds(rate) {
			for _, penalty := range []*ratelimit.Penalty{nil, {BanAfter: 1 << 20, BanFor: time.Hour}} {
				name := b.Name + "/" + kind.name + "plain"
				if penalty != nil {
					name = b.Name + "/" + kind.name + "penalty"
				}
				t.Run(name, func(t *testing.T) {
					l := b.New(t, testkit.Options(testkit.NewClock()))
					rule := kind.rule
					rule.Name, rule.Penalty = "hammer", penalty
					allowed, rejected := hammerAllow(t, l, rule, goroutines, perGoroutine)
					if allowed != rate {
						t.Fatalf("allowed %d calls, want exactly %d", allowed, rate)
					}
					r, err := l.Peek(context.Background(), rule, "hot")
					if err != nil || r.Remaining != 0 {
						t.Fatalf("Peek after the hammer = %+v, %v; want Remaining 0", r, err)
					}
					if penalty != nil && int64(r.Violations) != rejected {
						t.Fatalf("Violations = %d, want one per rejection: %d", r.Violations, rejected)
					}
				})
			}
		}
	}
}

// hammerAllow sends goroutines goroutines, released at once, at the key
// "hot" of rule on l, each calling Allow perGoroutine times, and returns
// how many calls were allowed and how many rejected. A call that fails or
// is degraded is an error of t and ends its goroutine.
func hammerAllow(t *testing.T, l *ratelimit.Limiter, rule ratelimit.Rule, goroutines, perGoroutine int) (allowed, rejected int64) {
	var allowedN, rejectedN atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < perGoroutine; i++ {
				r, err := l.Allow(context.Background(), rule, "hot")
				if err != nil || r.Degraded {
					t.Errorf("Allow = %+v, %v", r, err)
					return
				}
				if r.Allowed {
					allowedN.Add(1)
				} else {
					rejectedN.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	return allowedN.Load(), rejectedN.Load()
}

// HammerAllowN mixes AllowN sizes on one key, for every kind: the events
// recorded never exceed Rate (a bucket's Burst), and a rejected AllowN
// records nothing.
func HammerAllowN(t *testing.T, backends []Backend) {
	const goroutines, rate = 200, 100
	for _, b := range backends {
		for _, kind := range hammerKinds(rate) {
			t.Run(b.Name+"/"+kind.name, func(t *testing.T) {
				l := b.New(t, testkit.Options(testkit.NewClock()))
				rule := kind.rule
				rule.Name = "hammer-n"
				var events atomic.Int64
				var wg sync.WaitGroup
				for g := 0; g < goroutines; g++ {
					wg.Add(1)
					go func(n int) {
						defer wg.Done()
						r, err := l.AllowN(context.Background(), rule, "hot", n)
						if err != nil {
							t.Errorf("AllowN(%d): %v", n, err)
						}
						if r.Allowed {
							events.Add(int64(n))
						}
					}(1 + g%4)
				}
				wg.Wait()
				r, err := l.Peek(context.Background(), rule, "hot")
				if err != nil {
					t.Fatal(err)
				}
				if got := int64(rate - r.Remaining); got != events.Load() || got > rate {
					t.Fatalf("the window holds %d events, allowed calls asked for %d (rate %d)", got, events.Load(), rate)
				}
			})
		}
	}
}

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

// HammerOneKey sends hundreds of goroutines at one key at one fake
// instant: exactly Rate calls pass, and under a penalty every other call is
// counted as exactly one violation.
func HammerOneKey(t *testing.T, backends []Backend) {
	const goroutines, perGoroutine, rate = 300, 3, 137
	for _, b := range backends {
		for _, penalty := range []*ratelimit.Penalty{nil, {BanAfter: 1 << 20, BanFor: time.Hour}} {
			name := b.Name + "/plain"
			if penalty != nil {
				name = b.Name + "/penalty"
			}
			t.Run(name, func(t *testing.T) {
				l := b.New(t, testkit.Options(testkit.NewClock()))
				rule := ratelimit.Rule{Name: "hammer", Limit: ratelimit.PerMinute(rate), Penalty: penalty}
				var allowed, rejected atomic.Int64
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
								allowed.Add(1)
							} else {
								rejected.Add(1)
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				if allowed.Load() != rate {
					t.Fatalf("allowed %d calls, want exactly %d", allowed.Load(), rate)
				}
				r, err := l.Peek(context.Background(), rule, "hot")
				if err != nil || r.Remaining != 0 {
					t.Fatalf("Peek after the hammer = %+v, %v; want Remaining 0", r, err)
				}
				if penalty != nil && int64(r.Violations) != rejected.Load() {
					t.Fatalf("Violations = %d, want one per rejection: %d", r.Violations, rejected.Load())
				}
			})
		}
	}
}

// HammerAllowN mixes AllowN sizes on one key: the events recorded never
// exceed Rate, and a rejected AllowN records nothing.
func HammerAllowN(t *testing.T, backends []Backend) {
	const goroutines, rate = 200, 100
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			l := b.New(t, testkit.Options(testkit.NewClock()))
			rule := ratelimit.Rule{Name: "hammer-n", Limit: ratelimit.PerMinute(rate)}
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

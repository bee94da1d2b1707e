package reliability_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestConcurrentRemaining asks 55 concurrent Allow calls at one frozen
// instant under a rule of 50, on redis-server and on a Redis Cluster: 50
// are allowed, and since Redis holds everything the process knows, their
// Remaining is the order Redis decided them in, 49 down to 0, each told to
// one caller (issue #27: concurrent callers were told the same Remaining
// once calls reserved in the process' own count, which counted calls
// still on their way). The five rejected calls are told 0.
func TestConcurrentRemaining(t *testing.T) {
	for _, st := range realStores(t) {
		t.Run(st.name, func(t *testing.T) {
			for round := range 3 {
				clk := testkit.NewClock()
				l, _ := st.limiter(t, testkit.Options(clk))
				rule := ratelimit.Rule{Name: "remaining", Limit: ratelimit.PerMinute(50)}
				const callers = 55
				results := make([]ratelimit.Result, callers)
				var start, wg sync.WaitGroup
				start.Add(1)
				for i := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start.Wait()
						r, err := l.Allow(context.Background(), rule, "k")
						if err != nil {
							t.Errorf("Allow: %v", err)
						}
						results[i] = r
					}()
				}
				start.Done()
				wg.Wait()
				var remaining []int
				rejected := 0
				for _, r := range results {
					switch {
					case r.Degraded:
						t.Fatalf("round %d: a Degraded result on a healthy Redis: %+v", round, r)
					case r.Allowed:
						remaining = append(remaining, r.Remaining)
					default:
						rejected++
						if r.Remaining != 0 {
							t.Errorf("round %d: a rejection told Remaining %d", round, r.Remaining)
						}
					}
				}
				slices.Sort(remaining)
				want := make([]int, 50)
				for i := range want {
					want[i] = i
				}
				if !slices.Equal(remaining, want) || rejected != callers-50 {
					t.Fatalf("round %d: %d allowed with Remaining %v, %d rejected; want each of 0..49 once, and 5 rejected", round, len(remaining), remaining, rejected)
				}
			}
		})
	}
}

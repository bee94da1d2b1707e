package reliability_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFleetCloseUnderLoad: a Limiter closed while its callers keep every
// admission slot busy leaves the fleet at once, so that a rolling deploy
// does not shrink the other instances' degraded share for three heartbeat
// periods.
func TestFleetCloseUnderLoad(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	opts := ratelimit.Options{HeartbeatInterval: time.Hour, Timeout: time.Second}
	stay := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	leave := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	const set = "rl:v1:{instances}"
	testkit.Eventually(t, "both limiters announced", func() bool { return mustInt(t, srv, "ZCARD", set) == 2 })

	rule := ratelimit.Rule{Name: "busy", Limit: ratelimit.PerSecond(1000)}
	var stop atomic.Bool
	var calls atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 256; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if _, err := leave.Allow(context.Background(), rule, strconv.Itoa(g*100_000+i)); err != nil {
					return // ErrClosed once closed
				}
				calls.Add(1)
			}
		}(g)
	}
	testkit.Eventually(t, "load under way", func() bool { return calls.Load() > 5000 })
	leave.Close()
	stop.Store(true)
	wg.Wait()
	if n := mustInt(t, srv, "ZCARD", set); n != 1 {
		t.Fatalf("the instances set holds %d limiters after one of two closed under load, want 1", n)
	}
	stay.Close()
	if n := mustInt(t, srv, "ZCARD", set); n != 0 {
		t.Fatalf("the instances set holds %d limiters after both closed, want 0", n)
	}
}

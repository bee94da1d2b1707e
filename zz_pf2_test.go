package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

func TestPF2(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := testkit.NewClient(t, srv.Addr())
	var paths [8]atomic.Int64
	var deg atomic.Int64
	l, _ := ratelimit.New(c, ratelimit.Options{HeartbeatInterval: -1, OnDecision: func(d ratelimit.Decision) {
		paths[d.Path].Add(1)
		if d.Result.Degraded {
			deg.Add(1)
		}
	}})
	defer l.Close()
	rule := ratelimit.Rule{Name: "p", Limit: ratelimit.Limit{Rate: 10_000_000, Window: 10 * time.Second}, Prefetch: 20 * time.Millisecond}
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	for g := 0; g < 256; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				l.Allow(ctx, rule, "hot")
			}
		}()
	}
	wg.Wait()
	for i := range paths {
		if n := paths[i].Load(); n > 0 {
			t.Logf("%v: %d", ratelimit.Path(i), n)
		}
	}
	t.Logf("degraded %d; %+v", deg.Load(), l.Stats())
}

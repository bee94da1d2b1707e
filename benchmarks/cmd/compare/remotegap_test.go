package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// TestRemoteGap times one goroutine's calls on one redis-server
// (RATELIMIT_GAP_REDIS; skipped without it): ours with default Options and
// with a Clock, the naive script (also under a context with a deadline, as
// ours sends every call) and the floor, each primed by 16 goroutines first
// (rueidis pipelines from then on, as in a service that has seen
// concurrent calls), in alternating blocks of 2,000 calls so that all see
// the same machine. It logs the median, lowest and highest of each one's
// per-block p50 (with RATELIMIT_GAP_SPREAD, the last block's percentiles
// too), for the latency at one goroutine.
func TestRemoteGap(t *testing.T) {
	addr := os.Getenv("RATELIMIT_GAP_REDIS")
	if addr == "" {
		t.Skip("set RATELIMIT_GAP_REDIS to a redis-server (it is not emptied)")
	}
	s := spec{name: "gap", rate: 1_000_000, window: time.Second}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	type contestant struct {
		name string
		l    limiter
		ctx  context.Context
		p50s []time.Duration
	}
	// The naive script again under a context with a deadline, as ours
	// sends every call (Options.Timeout): rueidis then waits on the
	// context too.
	dl, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var cs []*contestant
	clocked := contender{name: "ratelimit, Options.Clock", remote: true, open: func(addr string, s spec) (limiter, func(), error) {
		c, err := rueidisClient(addr)
		if err != nil {
			return nil, nil, err
		}
		opts := ourOptions()
		opts.Clock = wallClock{}
		l, err := ratelimit.New(c, opts)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return &ours{l: l, rule: ourRule(s)}, func() { l.Close(); c.Close() }, nil
	}}
	for _, c := range []contender{oursRemote, clocked, naiveContender, floorContender} {
		l, closeFn, err := c.open(addr, s)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFn()
		if err := prime(l, keys, 16); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, &contestant{name: c.name, l: l, ctx: context.Background()})
		if c.name == naiveContender.name {
			cs = append(cs, &contestant{name: c.name + ", ctx with deadline", l: l, ctx: dl})
		}
	}
	took := make([]time.Duration, 2000)
	for block := range 10 {
		for _, c := range cs {
			for i := range took {
				start := time.Now()
				if _, err := c.l.Allow(c.ctx, keys[(block*2000+i)%len(keys)]); err != nil {
					t.Fatal(err)
				}
				took[i] = time.Since(start)
			}
			slices.Sort(took)
			c.p50s = append(c.p50s, took[len(took)/2])
			if block == 9 && os.Getenv("RATELIMIT_GAP_SPREAD") != "" {
				t.Logf("%-28s last block p10 %v p25 %v p50 %v p75 %v p90 %v", c.name, took[200], took[500], took[1000], took[1500], took[1800])
			}
		}
	}
	for _, c := range cs {
		if dg, ok := c.l.(degrader); ok && dg.Degraded() > 0 {
			t.Errorf("%s: %d decisions made without Redis: its figures are void", c.name, dg.Degraded())
		}
		slices.Sort(c.p50s)
		t.Logf("%-28s p50 per block: min %v, median %v, max %v", c.name, c.p50s[0], c.p50s[len(c.p50s)/2], c.p50s[len(c.p50s)-1])
	}
}

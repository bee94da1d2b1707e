package ratelimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// TestCrowdWaitRunsOut: a call of a full key that waits half of Timeout for
// the key's call on its way to Redis (the crowd's one seat) is rejected
// in-process, on PathShield, with the process' own count's RetryAfter and
// its violation counted, through Allow and through AllowAll whose first
// pair is the key. It is not sent: before, every such call went to Redis
// without a seat, and a process starved of CPU, whose replies were read
// late, flooded Redis with thousands of them a second (TestHotKeyCrowd).
//
// Redis here never answers the call on its way (a black hole): it takes
// the whole Timeout, the waiters half of it.
func TestCrowdWaitRunsOut(t *testing.T) {
	mr := miniredis.RunT(t)
	px := redistest.NewProxy(t, mr.Addr())
	clk := testkit.NewClock()
	opts := testkit.Options(clk)
	opts.Timeout = time.Second
	opts.ShieldMax = 10 * time.Millisecond
	var mu sync.Mutex
	paths := map[ratelimit.Path]int{}
	opts.OnDecision = func(d ratelimit.Decision) {
		mu.Lock()
		paths[d.Path]++
		mu.Unlock()
	}
	// A single client: miniredis answers CLUSTER SLOTS with its own
	// address, and a cluster client would go round the proxy.
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{px.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l := testkit.NewLimiter(t, c, opts)
	rule := ratelimit.Rule{Name: "crowd", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{WarnAfter: 100, BanAfter: 1000, BanFor: time.Minute}}
	roomy := ratelimit.Rule{Name: "roomy", Limit: ratelimit.PerMinute(1000)}
	ctx := context.Background()

	testkit.Allow(t, l, rule, "k")
	if r := testkit.Allow(t, l, rule, "k"); r.Allowed || r.Violations != 1 {
		t.Fatalf("second call = %+v, want rejected on Redis with one violation", r)
	}
	// The shield's rejection ends after ShieldMax: the next call probes,
	// with the crowd's one seat, and finds Redis silent.
	clk.Advance(20 * time.Millisecond)
	px.BlackHole(true)
	probed := make(chan ratelimit.Result, 1)
	go func() {
		r, _ := l.Allow(ctx, rule, "k")
		probed <- r
	}()
	testkit.Eventually(t, "the probe on its way", func() bool { return l.Stats().InFlight == 1 })

	const waiters = 4
	results := make([]ratelimit.Result, waiters)
	errs := make([]error, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				results[i], errs[i] = l.Allow(ctx, rule, "k")
				return
			}
			rs, err := l.AllowAll(ctx, []ratelimit.Check{{Rule: rule, Key: "k"}, {Rule: roomy, Key: "k"}})
			if err == nil && len(rs) != 1 {
				t.Errorf("AllowAll = %+v, want the first pair's rejection alone", rs)
			}
			if len(rs) > 0 {
				results[i] = rs[0]
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if n := l.Stats().InFlight; n != 1 {
		t.Errorf("%d calls on their way to Redis once the waiters were decided, want the probe alone", n)
	}
	seen := map[int]bool{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("waiter %d: %v", i, errs[i])
		}
		want := ratelimit.Result{Limit: 1, RetryAfter: time.Minute - 20*time.Millisecond, ResetAfter: time.Minute - 20*time.Millisecond, Violations: r.Violations}
		if r != want || r.Violations < 2 || r.Violations > 1+waiters || seen[r.Violations] {
			t.Errorf("waiter %d = %+v, want %+v with its own violation, from 2 to %d", i, r, want, 1+waiters)
		}
		seen[r.Violations] = true
	}
	mu.Lock()
	if paths[ratelimit.PathShield] != waiters {
		t.Errorf("decisions by path %v, want the %d waiters' on %v", paths, waiters, ratelimit.PathShield)
	}
	mu.Unlock()
	if r := <-probed; r.Allowed || !r.Degraded {
		t.Errorf("the probe = %+v, want a Degraded rejection once Timeout ran out", r)
	}
}

package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
)

// TestAllocations pins the allocation targets, which unlike speed are
// exact: a local Allow on a known key allocates nothing, a shielded one
// nothing, and a remote one at most 3 times (on a real redis-server: an
// in-process miniredis would count its own allocations too).
func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; scripts/test runs this test without it")
	}
	ctx := context.Background()
	plain := ratelimit.Rule{Name: "allocs", Limit: ratelimit.PerSecond(1_000_000)}
	penalized := ratelimit.Rule{Name: "allocs-p", Limit: ratelimit.PerSecond(1_000_000),
		Penalty: &ratelimit.Penalty{BanAfter: 1 << 20, BanFor: time.Second}}
	full := ratelimit.Rule{Name: "allocs-full", Limit: ratelimit.PerHour(1)}
	measure := func(l *ratelimit.Limiter, rule ratelimit.Rule) float64 {
		for range 10 { // the key exists from here on, and the client is warm
			l.Allow(ctx, rule, "k")
		}
		return testing.AllocsPerRun(200, func() { l.Allow(ctx, rule, "k") })
	}
	local := newLimiter(t, nil, ratelimit.Options{})
	for _, r := range []ratelimit.Rule{plain, penalized, full} {
		if got := measure(local, r); got != 0 {
			t.Errorf("local Allow of rule %q: %v allocations, want 0", r.Name, got)
		}
	}
	if !haveRedis(t) {
		return
	}
	server := redistest.Start(t, redistest.Options{})
	remote := newLimiter(t, newClient(t, server.Addr()), testOptions(nil))
	for _, r := range []ratelimit.Rule{plain, penalized} {
		if got := measure(remote, r); got > 3 {
			t.Errorf("remote Allow of rule %q: %v allocations, want at most 3", r.Name, got)
		}
	}
	remote.Allow(ctx, full, "k")
	if got := measure(remote, full); got != 0 {
		t.Errorf("shielded Allow: %v allocations, want 0", got)
	}
}

package testkit

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// The rules whose Allow the allocation targets pin: one with room, one with
// a penalty, and one whose window is full after its first call.
var (
	AllocsPlain     = ratelimit.Rule{Name: "allocs", Limit: ratelimit.PerSecond(1_000_000)}
	AllocsPenalized = ratelimit.Rule{Name: "allocs-p", Limit: ratelimit.PerSecond(1_000_000),
		Penalty: &ratelimit.Penalty{BanAfter: 1 << 20, BanFor: time.Second}}
	AllocsFull = ratelimit.Rule{Name: "allocs-full", Limit: ratelimit.PerHour(1)}
	// A GCRA bucket and a calendar quota with room (the other kinds).
	AllocsGCRA  = ratelimit.Rule{Name: "allocs-g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1_000_000, Window: time.Second, Burst: 1_000}}
	AllocsQuota = ratelimit.Rule{Name: "allocs-q", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1 << 30, Period: ratelimit.Day}}
)

// AllocsPerAllow returns the average number of allocations of
// l.Allow(rule, "k") once the key exists and the client is warm.
func AllocsPerAllow(l *ratelimit.Limiter, rule ratelimit.Rule) float64 {
	ctx := context.Background()
	for range 10 {
		l.Allow(ctx, rule, "k")
	}
	return testing.AllocsPerRun(200, func() { l.Allow(ctx, rule, "k") })
}

// SkipAllocsUnderRace skips an allocation test under the race detector,
// whose instrumentation allocates; scripts/test runs it without.
func SkipAllocsUnderRace(t testing.TB) {
	t.Helper()
	if RaceEnabled {
		t.Skip("the race detector allocates; scripts/test runs this test without it")
	}
}

// BytesPerAllow returns the heap bytes allocated per l.Allow(rule, "k")
// once the key exists and the client is warm: the process' TotalAlloc over
// 1,000 calls, so it includes whatever the client's and the Limiter's own
// goroutines allocate meanwhile (little next to the calls).
func BytesPerAllow(l *ratelimit.Limiter, rule ratelimit.Rule) float64 {
	ctx := context.Background()
	for range 10 {
		l.Allow(ctx, rule, "k")
	}
	const calls = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		l.Allow(ctx, rule, "k")
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / calls
}

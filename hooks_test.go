package ratelimit_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// decisions records what Options.OnDecision reports.
type decisions struct {
	mu  sync.Mutex
	all []ratelimit.Decision
}

func (d *decisions) hook(x ratelimit.Decision) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all = append(d.all, x)
}

func (d *decisions) paths() []ratelimit.Path {
	d.mu.Lock()
	defer d.mu.Unlock()
	var p []ratelimit.Path
	for _, x := range d.all {
		p = append(p, x.Path)
	}
	return p
}

func TestOnDecisionReportsEveryDecisionAndItsPath(t *testing.T) {
	mr := miniredis.RunT(t)
	var seen decisions
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(testkit.NewClock(), &logs, nil)
	opts.OnDecision = seen.hook
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	rule := ratelimit.Rule{Name: "hooked", Limit: ratelimit.PerMinute(1)}
	ctx := context.Background()

	testkit.Allow(t, l, rule, "k")      // redis, allowed
	testkit.Allow(t, l, rule, "k")      // redis, rejected
	testkit.Allow(t, l, rule, "k")      // the shield
	l.Peek(ctx, rule, "other")          // redis
	l.Allow(ctx, ratelimit.Rule{}, "k") // invalid: no decision
	mr.Close()
	if r := testkit.Allow(t, l, rule, "down"); !r.Degraded { // local, degraded
		t.Fatalf("want a degraded decision, got %+v", r)
	}
	want := []ratelimit.Path{ratelimit.PathRedis, ratelimit.PathRedis, ratelimit.PathShield, ratelimit.PathRedis, ratelimit.PathNone, ratelimit.PathLocal}
	got := seen.paths()
	if len(got) != len(want) {
		t.Fatalf("%d decisions reported, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("paths %v, want %v", got, want)
		}
	}
	first, third, invalid, down := seen.all[0], seen.all[2], seen.all[4], seen.all[5]
	if first.Rule.Name != "hooked" || first.Key != "k" || first.N != 1 || first.Peek || !first.Result.Allowed || first.Err != nil || first.Took < 0 {
		t.Errorf("first decision reported as %+v", first)
	}
	if third.Result.Allowed || third.Result.RetryAfter <= 0 {
		t.Errorf("the shielded decision reported as %+v", third)
	}
	if !seen.all[3].Peek || !errors.Is(invalid.Err, ratelimit.ErrInvalidRule) || !down.Result.Degraded {
		t.Errorf("peek %+v, invalid %+v, degraded %+v", seen.all[3], invalid, down)
	}
	if s := ratelimit.PathShield.String(); s != "shield" {
		t.Errorf("PathShield.String() = %q", s)
	}
}

func TestStats(t *testing.T) {
	mr := miniredis.RunT(t)
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.Options(testkit.NewClock()))
	if s := l.Stats(); !s.Connected || s.LocalLogs != 0 || s.BreakersOpen != 0 {
		t.Fatalf("fresh limiter: %+v", s)
	}
	plain := ratelimit.Rule{Name: "s", Limit: ratelimit.PerMinute(1)}
	approx := ratelimit.Rule{Name: "a", Limit: ratelimit.PerMinute(1), Approximate: true}
	banning := ratelimit.Rule{Name: "b", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: time.Hour}}
	for _, key := range []string{"1", "2", "3"} {
		testkit.Allow(t, l, plain, key)
	}
	testkit.Allow(t, l, plain, "1") // rejected: shielded from now on
	testkit.Allow(t, l, approx, "1")
	testkit.Allow(t, l, banning, "1")
	testkit.Allow(t, l, banning, "1") // banned
	testkit.Allow(t, l, ratelimit.Rule{Name: "g", Kind: ratelimit.GCRA, Limit: ratelimit.PerMinute(1)}, "1")
	testkit.Allow(t, l, ratelimit.Rule{Name: "q", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1, Period: ratelimit.Day}}, "1")
	want := ratelimit.Stats{LocalLogs: 4, LocalCounters: 1, LocalBuckets: 1, LocalQuotas: 1, LocalBans: 1, Shielded: 2, Connected: true, RedisInUse: true, AdmissionLimit: 64}
	if s := l.Stats(); s != want {
		t.Fatalf("Stats = %+v, want %+v", s, want)
	}
	testkit.Allow(t, l, ratelimit.Rule{Name: "f", Kind: ratelimit.FixedWindow, Limit: ratelimit.PerMinute(1)}, "1")
	meters := l.LocalMeters()
	if w := map[string]int{"log": 4, "counter": 1, "bucket": 1, "quota": 1, "fixed_window": 1}; !maps.Equal(meters, w) {
		t.Fatalf("LocalMeters = %v, want %v", meters, w)
	}
	mr.Close()
	testkit.Allow(t, l, plain, "4") // decided without Redis: an outage decision
	if s := l.Stats(); s.OutageDecisions != 1 || s.ShedDecisions != 0 {
		t.Fatalf("after one call while Redis is down: %+v, want 1 outage decision", s)
	}
	if s := testkit.NewLimiter(t, nil, ratelimit.Options{}).Stats(); s.Connected {
		t.Fatalf("a local-only limiter says it is connected: %+v", s)
	}
}

package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
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
	var logs syncBuffer
	opts := outageOptions(newClock(), &logs, nil)
	opts.OnDecision = seen.hook
	l := newLimiter(t, newClient(t, mr.Addr()), opts)
	rule := ratelimit.Rule{Name: "hooked", Limit: ratelimit.PerMinute(1)}
	ctx := context.Background()

	mustAllow(t, l, rule, "k")          // redis, allowed
	mustAllow(t, l, rule, "k")          // redis, rejected
	mustAllow(t, l, rule, "k")          // the shield
	l.Peek(ctx, rule, "other")          // redis
	l.Allow(ctx, ratelimit.Rule{}, "k") // invalid: no decision
	mr.Close()
	if r := mustAllow(t, l, rule, "down"); !r.Degraded { // local, degraded
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

// TestDryRun: a rule in dry run lets every call through, and says what
// enforcing would have answered, on every backend alike.
func TestDryRun(t *testing.T) {
	rule := ratelimit.Rule{Name: "dry", Limit: ratelimit.PerMinute(2), DryRun: true,
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: time.Hour}}
	steps := []step{
		{at: 0, want: ok(2, 1, time.Minute)},
		{at: sec, want: ok(2, 0, time.Minute)},
		{at: 2 * sec, want: dry(warned(violated(no(2, 0, 58*sec, 59*sec), 1)))},
		{at: 3 * sec, want: dry(banned(violated(no(2, 0, time.Hour, 58*sec), 2), time.Hour))},
		{at: 4 * sec, do: peek, want: dry(banned(violated(no(2, 0, time.Hour-sec, 57*sec), 2), time.Hour-sec))},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			clk := newClock()
			runSteps(t, b.new(t, testOptions(clk)), clk.Set, behaviourCase{rule: rule, steps: steps})
		})
	}
}

func dry(r R) R { r.Allowed, r.DryRun = true, true; return r }

func TestStats(t *testing.T) {
	mr := miniredis.RunT(t)
	l := newLimiter(t, newClient(t, mr.Addr()), testOptions(newClock()))
	if s := l.Stats(); !s.Connected || s.LocalLogs != 0 || s.BreakersOpen != 0 {
		t.Fatalf("fresh limiter: %+v", s)
	}
	plain := ratelimit.Rule{Name: "s", Limit: ratelimit.PerMinute(1)}
	approx := ratelimit.Rule{Name: "a", Limit: ratelimit.PerMinute(1), Approximate: true}
	banning := ratelimit.Rule{Name: "b", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: time.Hour}}
	for _, key := range []string{"1", "2", "3"} {
		mustAllow(t, l, plain, key)
	}
	mustAllow(t, l, plain, "1") // rejected: shielded from now on
	mustAllow(t, l, approx, "1")
	mustAllow(t, l, banning, "1")
	mustAllow(t, l, banning, "1") // banned
	want := ratelimit.Stats{LocalLogs: 4, LocalCounters: 1, LocalBans: 1, Shielded: 2, Connected: true, AdmissionLimit: 64}
	if s := l.Stats(); s != want {
		t.Fatalf("Stats = %+v, want %+v", s, want)
	}
	mr.Close()
	mustAllow(t, l, plain, "4") // decided without Redis: an outage decision
	if s := l.Stats(); s.OutageDecisions != 1 || s.ShedDecisions != 0 {
		t.Fatalf("after one call while Redis is down: %+v, want 1 outage decision", s)
	}
	if s := newLimiter(t, nil, ratelimit.Options{}).Stats(); s.Connected {
		t.Fatalf("a local-only limiter says it is connected: %+v", s)
	}
}

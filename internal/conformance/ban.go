package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// EscalatingBans: each new ban while the violations are remembered
// lasts BanGrowth times the last, up to MaxBanFor; once the violations are
// forgotten, bans start over.
func EscalatingBans(t *testing.T, backends []Backend) {
	rule := ratelimit.Rule{Name: "escalate", Limit: ratelimit.PerSecond(1), Penalty: &ratelimit.Penalty{
		BanAfter: 1, BanFor: 10 * sec, BanGrowth: 2, MaxBanFor: 35 * sec, Memory: 10 * time.Minute}}
	steps := []step{
		{at: 0, want: ok(1, 0, sec)},
		{at: 0, want: banned(violated(no(1, 0, 10*sec, sec), 1), 10*sec)},
		{at: 10 * sec, want: violated(ok(1, 0, sec), 1)},
		{at: 10 * sec, want: banned(violated(no(1, 0, 20*sec, sec), 2), 20*sec)},
		{at: 30 * sec, want: violated(ok(1, 0, sec), 2)},
		{at: 30 * sec, want: banned(violated(no(1, 0, 35*sec, sec), 3), 35*sec)}, // 40s, capped
		{at: 65 * sec, want: violated(ok(1, 0, sec), 3)},
		{at: 65 * sec, want: banned(violated(no(1, 0, 35*sec, sec), 4), 35*sec)},
		// Ten minutes after the last violation both it and the bans are forgotten.
		{at: 65*sec + 10*time.Minute, want: ok(1, 0, sec)},
		{at: 65*sec + 10*time.Minute, want: banned(violated(no(1, 0, 10*sec, sec), 1), 10*sec)},
	}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			clk := testkit.NewClock()
			runSteps(t, b.New(t, testkit.Options(clk)), clk.Set, behaviourCase{rule: rule, steps: steps})
		})
	}
}

// Ban: a ban by hand is honoured at once, keeps the violations, and is
// lifted by Reset or by time.
func Ban(t *testing.T, backends []Backend) {
	rule := ratelimit.Rule{Name: "manual", Limit: ratelimit.PerMinute(3), Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 9, BanFor: time.Hour}}
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			clk := testkit.NewClock()
			l := b.New(t, testkit.Options(clk))
			testkit.Allow(t, l, rule, "k")
			if err := l.Ban(ctx, rule, "k", 5*time.Minute); err != nil {
				t.Fatalf("Ban: %v", err)
			}
			want := banned(no(3, 0, 5*time.Minute, time.Minute), 5*time.Minute)
			if r, err := l.Peek(ctx, rule, "k"); err != nil || r != want {
				t.Fatalf("Peek after Ban = %+v, %v\nwant %+v", r, err, want)
			}
			clk.Advance(time.Minute)
			want = banned(no(3, 0, 4*time.Minute, 0), 4*time.Minute)
			if r := testkit.Allow(t, l, rule, "k"); r != want {
				t.Fatalf("Allow a minute into the ban = %+v\nwant %+v", r, want)
			}
			clk.Advance(4 * time.Minute)
			if r := testkit.Allow(t, l, rule, "k"); r != ok(3, 2, time.Minute) {
				t.Fatalf("Allow after the ban = %+v", r)
			}
			if err := l.Ban(ctx, rule, "k", time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := l.Reset(ctx, rule, "k"); err != nil {
				t.Fatal(err)
			}
			if r := testkit.Allow(t, l, rule, "k"); r != ok(3, 2, time.Minute) {
				t.Fatalf("Allow after Reset lifted the ban = %+v", r)
			}
		})
	}
}

package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
)

// TestEscalatingBans: each new ban while the violations are remembered
// lasts BanGrowth times the last, up to MaxBanFor; once the violations are
// forgotten, bans start over.
func TestEscalatingBans(t *testing.T) {
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
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			clk := newClock()
			runSteps(t, b.new(t, testOptions(clk)), clk.Set, behaviourCase{rule: rule, steps: steps})
		})
	}
}

// TestBan: a ban by hand is honoured at once, keeps the violations, and is
// lifted by Reset or by time.
func TestBan(t *testing.T) {
	rule := ratelimit.Rule{Name: "manual", Limit: ratelimit.PerMinute(3), Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 9, BanFor: time.Hour}}
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			clk := newClock()
			l := b.new(t, testOptions(clk))
			mustAllow(t, l, rule, "k")
			if err := l.Ban(ctx, rule, "k", 5*time.Minute); err != nil {
				t.Fatalf("Ban: %v", err)
			}
			want := banned(no(3, 0, 5*time.Minute, time.Minute), 5*time.Minute)
			if r, err := l.Peek(ctx, rule, "k"); err != nil || r != want {
				t.Fatalf("Peek after Ban = %+v, %v\nwant %+v", r, err, want)
			}
			clk.Advance(time.Minute)
			want = banned(no(3, 0, 4*time.Minute, 0), 4*time.Minute)
			if r := mustAllow(t, l, rule, "k"); r != want {
				t.Fatalf("Allow a minute into the ban = %+v\nwant %+v", r, want)
			}
			clk.Advance(4 * time.Minute)
			if r := mustAllow(t, l, rule, "k"); r != ok(3, 2, time.Minute) {
				t.Fatalf("Allow after the ban = %+v", r)
			}
			if err := l.Ban(ctx, rule, "k", time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := l.Reset(ctx, rule, "k"); err != nil {
				t.Fatal(err)
			}
			if r := mustAllow(t, l, rule, "k"); r != ok(3, 2, time.Minute) {
				t.Fatalf("Allow after Reset lifted the ban = %+v", r)
			}
		})
	}
}

func TestBanRejectsWhatItCannotDo(t *testing.T) {
	l := newLimiter(t, nil, ratelimit.Options{})
	ctx := context.Background()
	plain := ratelimit.Rule{Name: "plain", Limit: ratelimit.PerMinute(1)}
	penalized := ratelimit.Rule{Name: "p", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: time.Minute}}
	for name, err := range map[string]error{
		"a rule without a Penalty": l.Ban(ctx, plain, "k", time.Minute),
		"a ban of 0":               l.Ban(ctx, penalized, "k", 0),
		"a negative ban":           l.Ban(ctx, penalized, "k", -time.Second),
	} {
		if !errors.Is(err, ratelimit.ErrInvalidBan) {
			t.Errorf("%s: %v, want ErrInvalidBan", name, err)
		}
	}
	if err := l.Ban(ctx, ratelimit.Rule{}, "k", time.Minute); !errors.Is(err, ratelimit.ErrInvalidRule) {
		t.Errorf("an invalid rule: %v", err)
	}
	if err := l.Ban(ctx, penalized, "", time.Minute); !errors.Is(err, ratelimit.ErrInvalidKey) {
		t.Errorf("an empty key: %v", err)
	}
	l.Close()
	if err := l.Ban(ctx, penalized, "k", time.Minute); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestBanDuringOutage: a ban made while Redis is down holds locally, and
// the caller learns that Redis does not know of it.
func TestBanDuringOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs syncBuffer
	l := newLimiter(t, newClient(t, mr.Addr()), outageOptions(newClock(), &logs, nil))
	rule := ratelimit.Rule{Name: "ban-outage", Limit: ratelimit.PerMinute(5), Penalty: &ratelimit.Penalty{BanAfter: 3, BanFor: time.Hour}}
	mustAllow(t, l, rule, "k")
	mr.Close()
	if err := l.Ban(context.Background(), rule, "k", time.Hour); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("Ban during an outage: %v, want ErrUnavailable", err)
	}
	if r := mustAllow(t, l, rule, "k"); !r.Banned || !r.Degraded || r.BannedFor != time.Hour {
		t.Fatalf("after a local ban = %+v", r)
	}
}

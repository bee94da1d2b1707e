package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

func TestAllowGroup(t *testing.T) {
	perSecond := ratelimit.Rule{Name: "user:second", Limit: ratelimit.PerSecond(2)}
	perMinute := ratelimit.Rule{Name: "user:minute", Limit: ratelimit.PerMinute(3), Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: time.Hour}}
	both := []ratelimit.Check{{Rule: perSecond, Key: "u42"}, {Rule: perMinute, Key: "u42"}}
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			clk := newClock()
			l := b.new(t, testOptions(clk))
			group := func(checks []ratelimit.Check) []ratelimit.Result {
				t.Helper()
				rs, err := l.AllowGroup(ctx, "u42", checks)
				if err != nil {
					t.Fatal(err)
				}
				return rs
			}
			for i := 0; i < 2; i++ {
				if rs := group(both); len(rs) != 2 || !rs[1].Allowed {
					t.Fatalf("request %d: %+v", i, rs)
				}
			}
			// The per-second rule denies: nothing is recorded.
			if rs := group(both); len(rs) != 1 || rs[0] != no(2, 0, sec, sec) {
				t.Fatalf("third request in one second: %+v", rs)
			}
			clk.Advance(sec)
			if rs := group(both); len(rs) != 2 || rs[1] != ok(3, 0, time.Minute) {
				t.Fatalf("a second later: %+v", rs)
			}
			clk.Advance(sec)
			// The per-minute rule denies and counts a violation; the
			// per-second rule's event is not recorded.
			rs := group(both)
			if len(rs) != 2 || !rs[0].Allowed || rs[1] != violated(no(3, 0, 58*sec, 59*sec), 1) {
				t.Fatalf("the minute is full: %+v", rs)
			}
			if rs := group(both[:1]); rs[0] != ok(2, 1, sec) {
				t.Fatalf("per-second rule after the denied request: %+v, want one event left", rs)
			}
			// The group's state is its own: the same rule and key outside
			// the group start empty.
			if r := mustAllow(t, l, perSecond, "u42"); r != ok(2, 1, sec) {
				t.Fatalf("outside the group: %+v", r)
			}
			// A rule in dry run reports without stopping the others.
			dry := perMinute
			dry.DryRun = true
			clk.Advance(sec)
			rs = group([]ratelimit.Check{{Rule: dry, Key: "u42"}, {Rule: perSecond, Key: "u42"}})
			if len(rs) != 2 || !rs[0].DryRun || !rs[0].Banned || !rs[1].Allowed {
				t.Fatalf("with the minute rule in dry run: %+v", rs)
			}
		})
	}
}

func TestAllowGroupRejectsBadInput(t *testing.T) {
	l := newLimiter(t, nil, ratelimit.Options{})
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(2)}
	approx := ratelimit.Rule{Name: "a", Limit: ratelimit.PerMinute(2), Approximate: true}
	many := make([]ratelimit.Check, ratelimit.MaxGroupSize+1)
	for i := range many {
		many[i] = ratelimit.Check{Rule: rule, Key: "k"}
	}
	for name, c := range map[string]struct {
		group  string
		checks []ratelimit.Check
		want   error
	}{
		"empty group":      {"", []ratelimit.Check{{Rule: rule, Key: "k"}}, ratelimit.ErrInvalidKey},
		"no pairs":         {"g", nil, ratelimit.ErrInvalidRule},
		"too many pairs":   {"g", many, ratelimit.ErrInvalidRule},
		"approximate":      {"g", []ratelimit.Check{{Rule: approx, Key: "k"}}, ratelimit.ErrInvalidRule},
		"invalid rule":     {"g", []ratelimit.Check{{Rule: ratelimit.Rule{Name: "x"}, Key: "k"}}, ratelimit.ErrInvalidRule},
		"empty key":        {"g", []ratelimit.Check{{Rule: rule}}, ratelimit.ErrInvalidKey},
		"n above the rate": {"g", []ratelimit.Check{{Rule: rule, Key: "k", N: 3}}, ratelimit.ErrInvalidN},
		"negative n":       {"g", []ratelimit.Check{{Rule: rule, Key: "k", N: -1}}, ratelimit.ErrInvalidN},
	} {
		if _, err := l.AllowGroup(ctx, c.group, c.checks); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// TestAllowGroupHammer: many goroutines send one group at one instant. On
// Redis the group is one script, so exactly the tighter rule's rate passes
// and the looser rule holds exactly the allowed events; locally the pairs
// are decided in order and taken back, so no more pass and nothing leaks.
func TestAllowGroupHammer(t *testing.T) {
	loose := ratelimit.Rule{Name: "loose", Limit: ratelimit.PerMinute(50)}
	tight := ratelimit.Rule{Name: "tight", Limit: ratelimit.PerMinute(30)}
	checks := []ratelimit.Check{{Rule: loose, Key: "k"}, {Rule: tight, Key: "k"}}
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			l := b.new(t, testOptions(newClock()))
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 120; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rs, err := l.AllowGroup(ctx, "g", checks)
					if err != nil {
						t.Error(err)
						return
					}
					if rs[len(rs)-1].Allowed && len(rs) == 2 {
						allowed.Add(1)
					}
				}()
			}
			wg.Wait()
			rs, err := l.AllowGroup(ctx, "g", checks[:1])
			if err != nil {
				t.Fatal(err)
			}
			looseCount := int64(50 - rs[0].Remaining - 1) // minus this probe's own event
			if got := allowed.Load(); got > 30 || looseCount != got || (b.name != "local" && got != 30) {
				t.Fatalf("%d requests allowed, the loose rule holds %d events; want %s", got, looseCount, map[bool]string{true: "at most 30, equal", false: "exactly 30, equal"}[b.name == "local"])
			}
		})
	}
}

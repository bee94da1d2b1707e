package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// AllowGroup: a group is allowed only when every pair allows it; a denial
// records nothing for any pair and counts a violation only where it was
// denied; the group's state is its own; a pair in dry run stops nothing.
func AllowGroup(t *testing.T, backends []Backend) {
	perSecond := ratelimit.Rule{Name: "user:second", Limit: ratelimit.PerSecond(2)}
	perMinute := ratelimit.Rule{Name: "user:minute", Limit: ratelimit.PerMinute(3), Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: time.Hour}}
	both := []ratelimit.Check{{Rule: perSecond, Key: "u42"}, {Rule: perMinute, Key: "u42"}}
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			clk := testkit.NewClock()
			l := b.New(t, testkit.Options(clk))
			for i := 0; i < 2; i++ {
				if rs := mustAllowGroup(t, l, "u42", both...); len(rs) != 2 || !rs[1].Allowed {
					t.Fatalf("request %d: %+v", i, rs)
				}
			}
			// The per-second rule denies: nothing is recorded.
			if rs := mustAllowGroup(t, l, "u42", both...); len(rs) != 1 || rs[0] != no(2, 0, sec, sec) {
				t.Fatalf("third request in one second: %+v", rs)
			}
			clk.Advance(sec)
			if rs := mustAllowGroup(t, l, "u42", both...); len(rs) != 2 || rs[1] != ok(3, 0, time.Minute) {
				t.Fatalf("a second later: %+v", rs)
			}
			clk.Advance(sec)
			// The per-minute rule denies and counts a violation; the
			// per-second rule's event is not recorded.
			rs := mustAllowGroup(t, l, "u42", both...)
			if len(rs) != 2 || !rs[0].Allowed || rs[1] != violated(no(3, 0, 58*sec, 59*sec), 1) {
				t.Fatalf("the minute is full: %+v", rs)
			}
			if rs := mustAllowGroup(t, l, "u42", both[:1]...); rs[0] != ok(2, 1, sec) {
				t.Fatalf("per-second rule after the denied request: %+v, want one event left", rs)
			}
			groupOwnStateAndDryRun(t, clk, l, perSecond, perMinute)
		})
	}
}

// groupOwnStateAndDryRun goes on from AllowGroup's denials on l: the
// group's state is its own, so perSecond's pair outside the group starts
// empty; a second later, with perMinute (banned by then) in dry run, the
// group reports it without being stopped by it.
func groupOwnStateAndDryRun(t *testing.T, clk *ratelimittest.Clock, l *ratelimit.Limiter, perSecond, perMinute ratelimit.Rule) {
	// The group's state is its own: the same rule and key outside
	// the group start empty.
	if r := testkit.Allow(t, l, perSecond, "u42"); r != ok(2, 1, sec) {
		t.Fatalf("outside the group: %+v", r)
	}
	// A rule in dry run reports without stopping the others.
	dry := perMinute
	dry.DryRun = true
	clk.Advance(sec)
	rs := mustAllowGroup(t, l, "u42", ratelimit.Check{Rule: dry, Key: "u42"}, ratelimit.Check{Rule: perSecond, Key: "u42"})
	if len(rs) != 2 || !rs[0].DryRun || !rs[0].Banned || !rs[1].Allowed {
		t.Fatalf("with the minute rule in dry run: %+v", rs)
	}
}

// mustAllowGroup is l's AllowGroup of checks as the group named group; an
// error ends the test.
func mustAllowGroup(t *testing.T, l *ratelimit.Limiter, group string, checks ...ratelimit.Check) []ratelimit.Result {
	t.Helper()
	rs, err := l.AllowGroup(context.Background(), group, checks)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// AllowGroupHammer: many goroutines send one group at one instant. On
// Redis the group is one script, so exactly the tighter rule's rate passes
// and the looser rule holds exactly the allowed events; locally the pairs
// are decided in order and taken back, so no more pass and nothing leaks.
func AllowGroupHammer(t *testing.T, backends []Backend) {
	loose := ratelimit.Rule{Name: "loose", Limit: ratelimit.PerMinute(50)}
	tight := ratelimit.Rule{Name: "tight", Limit: ratelimit.PerMinute(30)}
	checks := []ratelimit.Check{{Rule: loose, Key: "k"}, {Rule: tight, Key: "k"}}
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			l := b.New(t, testkit.Options(testkit.NewClock()))
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
			if got := allowed.Load(); got > 30 || looseCount != got || (b.Name != "local" && got != 30) {
				t.Fatalf("%d requests allowed, the loose rule holds %d events; want %s", got, looseCount, map[bool]string{true: "at most 30, equal", false: "exactly 30, equal"}[b.Name == "local"])
			}
		})
	}
}

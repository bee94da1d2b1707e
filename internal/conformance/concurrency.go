package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// leaseOp is what one step of a concurrency case does.
type leaseOp int

const (
	acquire    leaseOp = iota // Acquire; the lease, when granted, is numbered in order from 0
	release                   // Release of lease i
	renew                     // Renew of lease i
	leasePeek                 // Peek
	leaseReset                // Reset
)

// leaseStep is one call of a concurrency case at an exact time since
// testkit.Epoch.
type leaseStep struct {
	at   time.Duration
	do   leaseOp
	i    int // the lease, for release and renew
	want R
	err  error
}

func concurrencyRule(name string, n int, ttl time.Duration) ratelimit.Rule {
	return ratelimit.Rule{Name: name, Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: n, Window: ttl}}
}

// concurrencyCases: Limit is N, Remaining the slots free after the call,
// RetryAfter until the earliest lease expires, ResetAfter until the latest
// does.
var concurrencyCases = []struct {
	name  string
	rule  ratelimit.Rule
	steps []leaseStep
}{
	{
		name: "acquire to N, reject N+1, release frees at once",
		rule: concurrencyRule("slots", 2, 10*sec),
		steps: []leaseStep{
			{at: 0, want: ok(2, 1, 10*sec)},
			{at: sec, want: ok(2, 0, 10*sec)},
			{at: 2 * sec, want: no(2, 0, 8*sec, 9*sec)},
			{at: 2 * sec, do: leasePeek, want: no(2, 0, 8*sec, 9*sec)},
			{at: 3 * sec, do: release, i: 0},
			{at: 3 * sec, do: release, i: 0}, // a second Release does nothing
			{at: 3 * sec, do: leasePeek, want: ok(2, 1, 8*sec)},
			{at: 3 * sec, want: ok(2, 0, 10*sec)},
			{at: 3 * sec, do: release, i: 1},
			{at: 3 * sec, do: release, i: 2},
			{at: 3 * sec, do: leasePeek, want: ok(2, 2, 0)},
		},
	},
	{
		name: "a lease not renewed expires at exactly Window; renewing extends it",
		rule: concurrencyRule("ttl", 1, sec),
		steps: []leaseStep{
			{at: 0, want: ok(1, 0, sec)},
			{at: 600 * ms, do: renew, i: 0},
			{at: 1500 * ms, want: no(1, 0, 100*ms, 100*ms)},
			{at: 1600*ms - us, do: renew, i: 0},
			{at: 2 * sec, want: no(1, 0, 600*ms-us, 600*ms-us)},
			{at: 2600*ms - us, want: ok(1, 0, sec)}, // the first lease expired a µs ago
			{at: 2600 * ms, do: renew, i: 0, err: ratelimit.ErrLeaseLost},
			{at: 2600 * ms, do: renew, i: 1},
			{at: 2600 * ms, do: release, i: 0},
			{at: 2600 * ms, do: leasePeek, want: no(1, 0, sec, sec)},
		},
	},
	{
		name: "Reset frees every slot; the leases it freed are lost",
		rule: concurrencyRule("reset", 2, 10*sec),
		steps: []leaseStep{
			{at: 0, want: ok(2, 1, 10*sec)},
			{at: 0, want: ok(2, 0, 10*sec)},
			{at: sec, do: leaseReset},
			{at: sec, do: leasePeek, want: ok(2, 2, 0)},
			{at: sec, do: renew, i: 0, err: ratelimit.ErrLeaseLost},
			{at: 2 * sec, want: ok(2, 1, 10*sec)},
			{at: 2 * sec, do: release, i: 1},
			{at: 2 * sec, do: leasePeek, want: ok(2, 1, 10*sec)},
		},
	},
	{
		name: "a rejected acquire is a violation; bans",
		rule: withPenalty(concurrencyRule("pen", 1, 10*sec), &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: 5 * sec}),
		steps: []leaseStep{
			{at: 0, want: ok(1, 0, 10*sec)},
			{at: sec, want: warned(violated(no(1, 0, 9*sec, 9*sec), 1))},
			{at: 2 * sec, want: banned(violated(no(1, 0, 8*sec, 8*sec), 2), 5*sec)},
			{at: 2 * sec, do: release, i: 0},
			{at: 3 * sec, want: banned(violated(no(1, 0, 4*sec, 0), 2), 4*sec)},
			{at: 7 * sec, want: violated(ok(1, 0, 10*sec), 2)},
		},
	},
}

// Concurrency runs the concurrency cases against each of backends; all
// must give exactly the same results. It also checks that the rate
// methods refuse a Concurrency rule and Acquire every other kind.
func Concurrency(t *testing.T, backends []Backend) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			for _, c := range concurrencyCases {
				t.Run(c.name, func(t *testing.T) {
					clk := testkit.NewClock()
					l := b.New(t, testkit.Options(clk))
					runLeaseSteps(t, l, clk.Set, c.rule, c.steps)
				})
			}
			t.Run("the rate methods refuse it", func(t *testing.T) { concurrencyRefused(t, b) })
		})
	}
}

// concurrencyRefused checks that Validate accepts a Concurrency rule that
// Allow, AllowN, AllowAll and AllowGroup refuse; that Acquire refuses a
// sliding log and Concurrency rules it cannot hold (a Window under
// MinLeaseTTL, Approximate, a Burst); and that a nil Lease's Release and
// Renew are ErrNoLease.
func concurrencyRefused(t *testing.T, b Backend) {
	l := b.New(t, testkit.Options(testkit.NewClock()))
	ctx := context.Background()
	rule := concurrencyRule("refused", 2, sec)
	if err := rule.Validate(); err != nil {
		t.Fatalf("Validate = %v", err)
	}
	if _, err := l.Allow(ctx, rule, "k"); !errors.Is(err, ratelimit.ErrInvalidRule) {
		t.Errorf("Allow = %v, want ErrInvalidRule", err)
	}
	if _, err := l.AllowN(ctx, rule, "k", 2); !errors.Is(err, ratelimit.ErrInvalidRule) {
		t.Errorf("AllowN = %v, want ErrInvalidRule", err)
	}
	if _, err := l.AllowAll(ctx, []ratelimit.Check{{Rule: rule, Key: "k"}}); !errors.Is(err, ratelimit.ErrInvalidRule) {
		t.Errorf("AllowAll = %v, want ErrInvalidRule", err)
	}
	if _, err := l.AllowGroup(ctx, "g", []ratelimit.Check{{Rule: rule, Key: "k"}}); !errors.Is(err, ratelimit.ErrInvalidRule) {
		t.Errorf("AllowGroup = %v, want ErrInvalidRule", err)
	}
	plain := ratelimit.Rule{Name: "plain", Limit: ratelimit.PerMinute(1)}
	if le, _, err := l.Acquire(ctx, plain, "k"); !errors.Is(err, ratelimit.ErrInvalidRule) || le != nil {
		t.Errorf("Acquire of a sliding log = %v, %v; want ErrInvalidRule", le, err)
	}
	for _, bad := range []ratelimit.Rule{
		concurrencyRule("short", 1, 99*ms),
		{Name: "approx", Kind: ratelimit.Concurrency, Approximate: true, Limit: ratelimit.Limit{Rate: 1, Window: sec}},
		{Name: "burst", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1, Window: sec, Burst: 2}},
	} {
		if _, _, err := l.Acquire(ctx, bad, "k"); !errors.Is(err, ratelimit.ErrInvalidRule) {
			t.Errorf("Acquire(%+v) = %v, want ErrInvalidRule", bad, err)
		}
	}
	var nilLease *ratelimit.Lease
	if err := nilLease.Release(ctx); !errors.Is(err, ratelimit.ErrNoLease) {
		t.Errorf("Release of a nil lease = %v, want ErrNoLease", err)
	}
	if err := nilLease.Renew(ctx); !errors.Is(err, ratelimit.ErrNoLease) {
		t.Errorf("Renew of a nil lease = %v, want ErrNoLease", err)
	}
}

func runLeaseSteps(t *testing.T, l *ratelimit.Limiter, setTime func(time.Time), rule ratelimit.Rule, steps []leaseStep) {
	t.Helper()
	ctx := context.Background()
	var leases []*ratelimit.Lease
	for i, s := range steps {
		setTime(testkit.Epoch().Add(s.at))
		var got R
		var err error
		switch s.do {
		case acquire:
			var le *ratelimit.Lease
			le, got, err = l.Acquire(ctx, rule, "k")
			if (le != nil) != got.Allowed {
				t.Fatalf("step %d (at %v): Acquire = %v, %+v: a lease iff allowed", i, s.at, le, got)
			}
			if le != nil {
				leases = append(leases, le)
			}
		case release:
			err = leases[s.i].Release(ctx)
		case renew:
			err = leases[s.i].Renew(ctx)
		case leasePeek:
			got, err = l.Peek(ctx, rule, "k")
		case leaseReset:
			err = l.Reset(ctx, rule, "k")
		}
		if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
			t.Fatalf("step %d (at %v): err = %v, want %v", i, s.at, err, s.err)
		}
		if got != s.want {
			t.Fatalf("step %d (at %v):\n got %+v\nwant %+v", i, s.at, got, s.want)
		}
	}
}

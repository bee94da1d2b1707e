package conformance

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

var validRule = ratelimit.Rule{Name: "valid", Limit: ratelimit.PerMinute(3)}

var invalidRules = []struct {
	name string
	rule ratelimit.Rule
	says string // part of the error message
}{
	{"empty name", ratelimit.Rule{Limit: ratelimit.PerMinute(1)}, "empty name"},
	{"long name", ratelimit.Rule{Name: strings.Repeat("n", ratelimit.MaxRuleNameLength+1), Limit: ratelimit.PerMinute(1)}, "longer than"},
	{"zero rate", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(0)}, "Rate 0"},
	{"negative rate", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(-1)}, "Rate -1"},
	{"huge rate", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(math.MaxInt)}, "above"},
	{"zero window", ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 1}}, "Window 0s"},
	{"sub-µs window", ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 1, Window: 999}}, "shorter than 1µs"},
	{"negative window", ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 1, Window: -time.Second}}, "shorter than 1µs"},
	{"endless window", ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 1, Window: math.MaxInt64}}, "too long"},
	{"BanAfter 0", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanFor: time.Minute}}, "BanAfter 0"},
	{"BanFor 0", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1}}, "BanFor 0s"},
	{"BanFor negative", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: -1}}, "BanFor"},
	{"WarnAfter negative", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{WarnAfter: -1, BanAfter: 1, BanFor: time.Minute}}, "WarnAfter -1"},
	{"WarnAfter = BanAfter", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{WarnAfter: 2, BanAfter: 2, BanFor: time.Minute}}, "not below BanAfter"},
	{"Memory negative", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: time.Minute, Memory: -time.Second}}, "Memory"},
	{"unknown degraded policy", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Degraded: 42}, "Degraded"},
	{"unknown kind", ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Kind: 7}, "unknown Kind 7"},
	{"gcra and Approximate", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.PerMinute(1), Approximate: true}, "Approximate"},
	{"quota and Approximate", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1, Period: ratelimit.Day}, Approximate: true}, "Approximate"},
	{"Burst on a sliding log", ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Burst: 2}}, "Burst 2 is for GCRA only"},
	{"Period on a sliding log", ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Period: ratelimit.Day}}, "Period day is for CalendarQuota only"},
	{"Location on a sliding log", ratelimit.Rule{Name: "r", Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Location: time.UTC}}, "Location is for CalendarQuota only"},
	{"Period on gcra", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Period: ratelimit.Week}}, "Period week is for CalendarQuota only"},
	{"Location on gcra", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Location: time.UTC}}, "Location is for CalendarQuota only"},
	{"negative Burst", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Burst: -1}}, "Burst -1 is negative"},
	{"huge Burst", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Burst: math.MaxInt}}, "above"},
	{"gcra without a window", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1}}, "Window 0s"},
	// 2^31-1 tokens of 7 per 3 years: Burst × Window/gcd is far beyond 2^52.
	{"gcra bucket too large to keep exactly", ratelimit.Rule{Name: "r", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 7, Window: 3 * 365 * 24 * time.Hour, Burst: math.MaxInt32}}, "lower Burst"},
	{"Window on a quota", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1, Window: time.Hour, Period: ratelimit.Day}}, "Window 1h0m0s must be 0"},
	{"quota without a period", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1}}, "unknown Period 0"},
	{"quota with an unknown period", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1, Period: 9}}, "unknown Period 9"},
	{"Burst on a quota", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1, Period: ratelimit.Day, Burst: 1}}, "Burst 1 is for GCRA only"},
	{"quota with a zero rate", ratelimit.Rule{Name: "r", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Period: ratelimit.Day}}, "Rate 0"},
}

// validKinds are valid rules of the other kinds, whose AllowN takes at most
// Burst (GCRA) or Rate (quota) events.
var validKinds = []struct {
	rule ratelimit.Rule
	max  int
}{
	{ratelimit.Rule{Name: "valid-gcra", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: time.Second, Burst: 3}}, 3},
	{ratelimit.Rule{Name: "valid-gcra-rate", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 2, Window: time.Second}}, 2},
	{ratelimit.Rule{Name: "valid-quota", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 3, Period: ratelimit.Month, Location: time.Local}}, 3},
}

// InvalidInput: every method rejects an invalid rule, n or key with its
// sentinel error and records nothing; after Close every method is
// ErrClosed.
func InvalidInput(t *testing.T, backends []Backend) {
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			l := b.New(t, testkit.Options(testkit.NewClock()))
			invalidRuleCalls(t, l)
			invalidNCalls(t, l)
			invalidKeyCalls(t, l)
			// Invalid calls leave no trace: the full rate is still there.
			if r, err := l.AllowN(ctx, validRule, "k", 3); err != nil || !r.Allowed {
				t.Errorf("AllowN(3) after invalid calls = %+v, %v; want allowed", r, err)
			}
			closedCalls(t, l)
		})
	}
}

// invalidRuleCalls checks that every method of l, and Validate, rejects
// each of invalidRules with ErrInvalidRule saying why, and that Validate
// accepts validRule.
func invalidRuleCalls(t *testing.T, l *ratelimit.Limiter) {
	ctx := context.Background()
	for _, c := range invalidRules {
		calls := map[string]error{}
		_, calls["Allow"] = l.Allow(ctx, c.rule, "k")
		_, calls["AllowN"] = l.AllowN(ctx, c.rule, "k", 1)
		_, calls["Peek"] = l.Peek(ctx, c.rule, "k")
		calls["Reset"] = l.Reset(ctx, c.rule, "k")
		calls["Validate"] = c.rule.Validate()
		for method, err := range calls {
			if !errors.Is(err, ratelimit.ErrInvalidRule) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s with %s: err = %v, want ErrInvalidRule saying %q", method, c.name, err, c.says)
			}
		}
	}
	if err := validRule.Validate(); err != nil {
		t.Errorf("Validate of a valid rule: %v", err)
	}
}

// invalidNCalls checks that l's AllowN rejects an n below 1 or above what
// the rule takes at once with ErrInvalidN, for validRule and each of
// validKinds, and that each of validKinds then takes its most.
func invalidNCalls(t *testing.T, l *ratelimit.Limiter) {
	ctx := context.Background()
	for _, n := range []int{0, -1, 4, math.MaxInt} {
		if _, err := l.AllowN(ctx, validRule, "k", n); !errors.Is(err, ratelimit.ErrInvalidN) {
			t.Errorf("AllowN(n=%d): err = %v, want ErrInvalidN", n, err)
		}
	}
	for _, v := range validKinds {
		if err := v.rule.Validate(); err != nil {
			t.Errorf("Validate of %q: %v", v.rule.Name, err)
		}
		for _, n := range []int{0, -1, v.max + 1, math.MaxInt} {
			if _, err := l.AllowN(ctx, v.rule, "k", n); !errors.Is(err, ratelimit.ErrInvalidN) {
				t.Errorf("AllowN(n=%d) of %q: err = %v, want ErrInvalidN", n, v.rule.Name, err)
			}
		}
		if r, err := l.AllowN(ctx, v.rule, "k", v.max); err != nil || !r.Allowed || r.Limit != v.max {
			t.Errorf("AllowN(%d) of %q after invalid calls = %+v, %v; want allowed with Limit %d", v.max, v.rule.Name, r, err, v.max)
		}
	}
}

// invalidKeyCalls checks that Allow, Peek and Reset of l reject an empty
// key with ErrInvalidKey.
func invalidKeyCalls(t *testing.T, l *ratelimit.Limiter) {
	callsFail(t, l, "", ratelimit.ErrInvalidKey, "with an empty key")
}

// closedCalls closes l twice (Close is idempotent) and checks that Allow,
// Peek and Reset are then ErrClosed.
func closedCalls(t *testing.T, l *ratelimit.Limiter) {
	l.Close()
	l.Close() // idempotent
	callsFail(t, l, "k", ratelimit.ErrClosed, "after Close")
}

// callsFail checks that Allow, Peek and Reset of validRule's key on l each
// fail with want; when says in what case, for the error message.
func callsFail(t *testing.T, l *ratelimit.Limiter, key string, want error, when string) {
	t.Helper()
	ctx := context.Background()
	if _, err := l.Allow(ctx, validRule, key); !errors.Is(err, want) {
		t.Errorf("Allow %s: err = %v, want %v", when, err, want)
	}
	if _, err := l.Peek(ctx, validRule, key); !errors.Is(err, want) {
		t.Errorf("Peek %s: err = %v, want %v", when, err, want)
	}
	if err := l.Reset(ctx, validRule, key); !errors.Is(err, want) {
		t.Errorf("Reset %s: err = %v, want %v", when, err, want)
	}
}

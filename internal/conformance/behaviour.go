package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// op is what one step of a behaviour case does.
type op int

const (
	allow  op = iota // Allow, or AllowN when n > 0
	allowN           // AllowN with n, whatever n is (0 included)
	peek
	reset
	reserve // Reserve n events into the step's res
	settle  // settle the step's res at n
	cancel  // cancel the step's res
)

// step is one call at an exact time since testkit.Epoch.
type step struct {
	at   time.Duration
	do   op
	rule *ratelimit.Rule // nil: the case's rule
	key  string          // "": "k"
	n    int
	res  int // the reservation a reserve, settle or cancel step names
	want ratelimit.Result
	err  error
}

type behaviourCase struct {
	name  string
	rule  ratelimit.Rule
	steps []step
}

// R is short for the results the tables spell out.
type R = ratelimit.Result

func ok(limit, remaining int, reset time.Duration) R {
	return R{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func no(limit, remaining int, retry, reset time.Duration) R {
	return R{Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func violated(r R, violations int) R { r.Violations = violations; return r }
func warned(r R) R                   { r.Warned = true; return r }
func banned(r R, left time.Duration) R {
	r.Banned, r.Remaining, r.BannedFor = true, 0, left
	return r
}

const (
	ms  = time.Millisecond
	sec = time.Second
	us  = time.Microsecond
)

var ladder = &ratelimit.Penalty{WarnAfter: 3, BanAfter: 5, BanFor: 30 * time.Minute}

// w0 is the start of the fixed ten-second window that holds testkit.Epoch:
// the approximate counter's windows are aligned to the Unix epoch.
const w0 = -123456 * time.Microsecond

var behaviourCases = []behaviourCase{
	{
		name: "sliding, not fixed, at a second boundary",
		rule: ratelimit.Rule{Name: "boundary", Limit: ratelimit.PerSecond(3)},
		steps: []step{
			{at: 900 * ms, want: ok(3, 2, sec)},
			{at: 900 * ms, want: ok(3, 1, sec)},
			{at: 900 * ms, want: ok(3, 0, sec)},
			// A fixed one-second window would start afresh here.
			{at: 1000 * ms, want: no(3, 0, 900*ms, 900*ms)},
			{at: 1900*ms - us, want: no(3, 0, us, us)},
			{at: 1900 * ms, want: ok(3, 2, sec)},
		},
	},
	{
		name: "partial slides free one event at a time",
		rule: ratelimit.Rule{Name: "slide", Limit: ratelimit.PerMinute(5)},
		steps: []step{
			{at: 0, want: ok(5, 4, time.Minute)},
			{at: 10 * sec, want: ok(5, 3, time.Minute)},
			{at: 20 * sec, want: ok(5, 2, time.Minute)},
			{at: 30 * sec, want: ok(5, 1, time.Minute)},
			{at: 40 * sec, want: ok(5, 0, time.Minute)},
			{at: 50 * sec, want: no(5, 0, 10*sec, 50*sec)},
			{at: 60 * sec, want: ok(5, 0, time.Minute)},
			{at: 61 * sec, want: no(5, 0, 9*sec, 59*sec)},
			{at: 100 * sec, want: ok(5, 3, time.Minute)},
		},
	},
	{
		name: "AllowN records n events or none",
		rule: ratelimit.Rule{Name: "n", Limit: ratelimit.Limit{Rate: 10, Window: 10 * sec}},
		steps: []step{
			{at: 0, n: 4, want: ok(10, 6, 10*sec)},
			{at: 1 * sec, n: 7, want: no(10, 6, 9*sec, 9*sec)},
			{at: 2 * sec, n: 6, want: ok(10, 0, 10*sec)},
			{at: 3 * sec, want: no(10, 0, 7*sec, 9*sec)},
			{at: 10 * sec, n: 4, want: ok(10, 0, 10*sec)},
			{at: 10 * sec, want: no(10, 0, 2*sec, 10*sec)},
			// n = 0 is no call for zero events: it is invalid, and records
			// nothing.
			{at: 10 * sec, do: allowN, n: 0, err: ratelimit.ErrInvalidN},
			{at: 10 * sec, do: peek, want: no(10, 0, 2*sec, 10*sec)},
		},
	},
	{
		name: "RetryAfter waits for the k-th oldest event",
		rule: ratelimit.Rule{Name: "kth", Limit: ratelimit.Limit{Rate: 5, Window: 10 * sec}},
		steps: []step{
			{at: 0, n: 2, want: ok(5, 3, 10*sec)},
			{at: 1 * sec, n: 2, want: ok(5, 1, 10*sec)},
			{at: 2 * sec, want: ok(5, 0, 10*sec)},
			// 3 must leave: the third oldest is at 1s.
			{at: 3 * sec, n: 3, want: no(5, 0, 8*sec, 9*sec)},
			{at: 11 * sec, n: 3, want: ok(5, 1, 10*sec)}, // only the event at 2s is left
		},
	},
	{
		name: "penalty ladder: warnings, a ban, a repeat offender",
		rule: ratelimit.Rule{Name: "coupon:claim", Limit: ratelimit.PerMinute(5), Penalty: ladder},
		steps: []step{
			{at: 0, want: ok(5, 4, time.Minute)},
			{at: 1 * sec, want: ok(5, 3, time.Minute)},
			{at: 2 * sec, want: ok(5, 2, time.Minute)},
			{at: 3 * sec, want: ok(5, 1, time.Minute)},
			{at: 4 * sec, want: ok(5, 0, time.Minute)},
			{at: 5 * sec, want: violated(no(5, 0, 55*sec, 59*sec), 1)},
			{at: 6 * sec, want: violated(no(5, 0, 54*sec, 58*sec), 2)},
			{at: 7 * sec, want: warned(violated(no(5, 0, 53*sec, 57*sec), 3))},
			{at: 8 * sec, want: warned(violated(no(5, 0, 52*sec, 56*sec), 4))},
			{at: 9 * sec, want: banned(violated(no(5, 0, 30*time.Minute, 55*sec), 5), 30*time.Minute)},
			{at: 10 * sec, do: peek, want: banned(violated(no(5, 0, 30*time.Minute-sec, 54*sec), 5), 30*time.Minute-sec)},
			{at: 10 * time.Minute, want: banned(violated(no(5, 0, 20*time.Minute+9*sec, 0), 5), 20*time.Minute+9*sec)},
			{at: 30*time.Minute + 9*sec - us, want: banned(violated(no(5, 0, us, 0), 5), us)},
			// The ban is over; its violations are still remembered.
			{at: 30*time.Minute + 9*sec, want: violated(ok(5, 4, time.Minute), 5)},
			{at: 30*time.Minute + 9*sec, n: 4, want: violated(ok(5, 0, time.Minute), 5)},
			{at: 30*time.Minute + 10*sec, want: banned(violated(no(5, 0, 30*time.Minute, 59*sec), 6), 30*time.Minute)},
		},
	},
	{
		name: "a ban's RetryAfter covers the window too",
		rule: ratelimit.Rule{Name: "short-ban", Limit: ratelimit.PerMinute(2), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: 10 * sec}},
		steps: []step{
			{at: 0, want: ok(2, 1, time.Minute)},
			{at: 0, want: ok(2, 0, time.Minute)},
			{at: 1 * sec, want: banned(violated(no(2, 0, 59*sec, 59*sec), 1), 10*sec)},
			{at: 5 * sec, want: banned(violated(no(2, 0, 55*sec, 55*sec), 1), 6*sec)},
			// The ban is over but the window is still full: a violation, a new ban.
			{at: 11 * sec, want: banned(violated(no(2, 0, 49*sec, 49*sec), 2), 10*sec)},
			{at: 20 * sec, do: peek, want: banned(violated(no(2, 0, 40*sec, 40*sec), 2), sec)},
			{at: 60 * sec, do: peek, want: violated(ok(2, 2, 0), 2)},
		},
	},
	{
		name: "violations are forgotten Memory after the last one",
		rule: ratelimit.Rule{Name: "memory", Limit: ratelimit.PerSecond(1), Penalty: &ratelimit.Penalty{WarnAfter: 2, BanAfter: 3, BanFor: time.Minute, Memory: 10 * sec}},
		steps: []step{
			{at: 0, want: ok(1, 0, sec)},
			{at: 0, want: violated(no(1, 0, sec, sec), 1)},
			{at: 500 * ms, want: warned(violated(no(1, 0, 500*ms, 500*ms), 2))},
			{at: 10*sec + 500*ms - us, do: peek, want: violated(ok(1, 1, 0), 2)},
			{at: 10*sec + 500*ms, want: ok(1, 0, sec)},
			{at: 10*sec + 500*ms, want: violated(no(1, 0, sec, sec), 1)},
		},
	},
	{
		name: "a ban longer than Memory outlives its violations",
		rule: ratelimit.Rule{Name: "forget-in-ban", Limit: ratelimit.PerSecond(1), Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: time.Minute, Memory: 10 * sec}},
		steps: []step{
			{at: 0, want: ok(1, 0, sec)},
			{at: 0, want: violated(no(1, 0, sec, sec), 1)},
			{at: 0, want: banned(violated(no(1, 0, time.Minute, sec), 2), time.Minute)},
			{at: 30 * sec, want: banned(no(1, 0, 30*sec, 0), 30*sec)},
			{at: 60 * sec, want: ok(1, 0, sec)},
			{at: 60 * sec, want: violated(no(1, 0, sec, sec), 1)},
		},
	},
	{
		name: "Peek records nothing and counts no violation",
		rule: ratelimit.Rule{Name: "peek", Limit: ratelimit.PerMinute(2), Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: time.Hour}},
		steps: []step{
			{at: 0, do: peek, want: ok(2, 2, 0)},
			{at: 0, want: ok(2, 1, time.Minute)},
			{at: 1 * sec, do: peek, want: ok(2, 1, 59*sec)},
			{at: 1 * sec, want: ok(2, 0, time.Minute)},
			{at: 2 * sec, do: peek, want: no(2, 0, 58*sec, 59*sec)},
			{at: 2 * sec, do: peek, want: no(2, 0, 58*sec, 59*sec)},
			{at: 3 * sec, want: warned(violated(no(2, 0, 57*sec, 58*sec), 1))},
			{at: 4 * sec, do: peek, want: warned(violated(no(2, 0, 56*sec, 57*sec), 1))},
			{at: 60 * sec, do: peek, want: violated(ok(2, 1, sec), 1)},
			{at: 60 * sec, want: violated(ok(2, 0, time.Minute), 1)},
		},
	},
	{
		name: "violations Memory forgot do not count again with a later one",
		rule: ratelimit.Rule{Name: "forgotten", Limit: ratelimit.Limit{Rate: 2, Window: 2 * sec},
			Penalty: &ratelimit.Penalty{WarnAfter: 2, BanAfter: 4, BanFor: 3 * sec, Memory: 5 * sec}},
		steps: []step{
			{at: 0, n: 2, want: ok(2, 0, 2*sec)},
			{at: 0, want: violated(no(2, 0, 2*sec, 2*sec), 1)},
			{at: 0, want: warned(violated(no(2, 0, 2*sec, 2*sec), 2))},
			// Memory later both are forgotten: two new violations, and
			// the ladder holds these two only.
			{at: 6 * sec, want: ok(2, 1, 2*sec)},
			{at: 6 * sec, n: 2, want: violated(no(2, 1, 2*sec, 2*sec), 1)},
			{at: 6 * sec, n: 2, want: warned(violated(no(2, 1, 2*sec, 2*sec), 2))},
			{at: 6 * sec, want: violated(ok(2, 0, 2*sec), 2)},
		},
	},
	{
		name: "Reset clears the log, the violations and the ban",
		rule: ratelimit.Rule{Name: "reset", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: time.Hour}},
		steps: []step{
			{at: 0, want: ok(1, 0, time.Minute)},
			{at: 0, want: banned(violated(no(1, 0, time.Hour, time.Minute), 1), time.Hour)},
			{at: sec, do: reset},
			{at: sec, do: peek, want: ok(1, 1, 0)},
			{at: sec, want: ok(1, 0, time.Minute)},
			{at: 2 * sec, want: banned(violated(no(1, 0, time.Hour, 59*sec), 1), time.Hour)},
		},
	},
	{
		name: "a rule changed under the same name applies to the existing log",
		rule: ratelimit.Rule{Name: "change", Limit: ratelimit.PerMinute(5)},
		steps: []step{
			{at: 0, want: ok(5, 4, time.Minute)},
			{at: 1 * sec, want: ok(5, 3, time.Minute)},
			{at: 2 * sec, want: ok(5, 2, time.Minute)},
			{at: 3 * sec, rule: &ratelimit.Rule{Name: "change", Limit: ratelimit.PerMinute(2)}, want: no(2, 0, 58*sec, 59*sec)},
			{at: 3 * sec, rule: &ratelimit.Rule{Name: "change", Limit: ratelimit.PerMinute(10)}, want: ok(10, 6, time.Minute)},
			{at: 3 * sec, rule: &ratelimit.Rule{Name: "change", Limit: ratelimit.Limit{Rate: 4, Window: 2500 * ms}}, want: ok(4, 0, 2500*ms)},
		},
	},
	{
		name: "keys and rule names never share state",
		rule: ratelimit.Rule{Name: "x", Limit: ratelimit.PerMinute(1)},
		steps: []step{
			{at: 0, key: "a:b", want: ok(1, 0, time.Minute)},
			{at: 0, key: "b", rule: &ratelimit.Rule{Name: "x:a", Limit: ratelimit.PerMinute(1)}, want: ok(1, 0, time.Minute)},
			{at: 0, key: "a:b", want: no(1, 0, time.Minute, time.Minute)},
			{at: 0, key: "}", want: ok(1, 0, time.Minute)},
			{at: 0, key: "%7D", want: ok(1, 0, time.Minute)},
			{at: 0, key: "{a}", want: ok(1, 0, time.Minute)},
			{at: 0, key: "a", want: ok(1, 0, time.Minute)},
			{at: 0, key: "k\x00", want: ok(1, 0, time.Minute)},
			{at: 0, key: "k", want: ok(1, 0, time.Minute)},
			{at: 0, key: "\xff\xfe", want: ok(1, 0, time.Minute)},
			{at: 0, key: strings.Repeat("L", 300) + "1", want: ok(1, 0, time.Minute)},
			{at: 0, key: strings.Repeat("L", 300) + "2", want: ok(1, 0, time.Minute)},
			{at: 0, key: strings.Repeat("L", 300) + "1", want: no(1, 0, time.Minute, time.Minute)},
			{at: 0, key: "k", want: no(1, 0, time.Minute, time.Minute)},
			{at: 0, key: "k", rule: &ratelimit.Rule{Name: "y", Limit: ratelimit.PerMinute(1)}, want: ok(1, 0, time.Minute)},
		},
	},
	{
		name: "approximate: the previous window's weight decays",
		rule: ratelimit.Rule{Name: "approx", Limit: ratelimit.Limit{Rate: 4, Window: 10 * sec}, Approximate: true},
		steps: []step{
			{at: w0, want: ok(4, 3, 20*sec)},
			{at: w0, want: ok(4, 2, 20*sec)},
			{at: w0, want: ok(4, 1, 20*sec)},
			{at: w0, want: ok(4, 0, 20*sec)},
			// The current window alone is full: wait until it is the
			// previous one and weighs 3 (at 12.5s).
			{at: w0 + sec, want: no(4, 0, 11500*ms, 19*sec)},
			{at: w0 + 12500*ms, want: ok(4, 0, 17500*ms)}, // 4 × 0.75 + 0 = 3
			{at: w0 + 12500*ms, want: no(4, 0, 2500*ms, 17500*ms)},
			{at: w0 + 15*sec, want: ok(4, 0, 15*sec)}, // 4 × 0.5 + 1 = 3
			{at: w0 + 15*sec, do: peek, want: no(4, 0, 2500*ms, 15*sec)},
			{at: w0 + 40*sec, want: ok(4, 3, 20*sec)},
			{at: w0 + 40*sec, n: 3, want: ok(4, 0, 20*sec)},
		},
	},
	{
		name: "approximate at its worst: 2 × Rate - 1 events in one window",
		rule: ratelimit.Rule{Name: "approx-worst", Limit: ratelimit.Limit{Rate: 10, Window: 10 * sec}, Approximate: true},
		steps: []step{
			{at: w0 + 10*sec - us, n: 10, want: ok(10, 0, 10*sec+us)},
			// 10 × 2µs/10s weighs 0.000002, rounded up to 1: 9 more fit,
			// while all 19 events are less than 10s old.
			{at: w0 + 20*sec - 2*us, n: 9, want: ok(10, 0, 10*sec+2*us)},
			{at: w0 + 20*sec - 2*us, want: no(10, 0, 2*us, 10*sec+2*us)}, // room when the window turns
		},
	},
	{
		name: "approximate with a penalty",
		rule: ratelimit.Rule{Name: "approx-penalty", Limit: ratelimit.Limit{Rate: 2, Window: 10 * sec}, Approximate: true,
			Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: time.Minute}},
		steps: []step{
			{at: w0, want: ok(2, 1, 20*sec)},
			{at: w0, want: ok(2, 0, 20*sec)},
			{at: w0, want: violated(no(2, 0, 15*sec, 20*sec), 1)},
			{at: w0 + sec, want: banned(violated(no(2, 0, time.Minute, 19*sec), 2), time.Minute)},
			{at: w0 + 2*sec, do: peek, want: banned(violated(no(2, 0, 59*sec, 18*sec), 2), 59*sec)},
			{at: w0 + 61*sec, want: violated(ok(2, 1, 19*sec), 2)},
			{at: w0 + 61*sec, do: reset},
			{at: w0 + 61*sec, do: peek, want: ok(2, 2, 0)},
		},
	},
	{
		name: "an exact and an approximate rule of one name keep apart",
		rule: ratelimit.Rule{Name: "both", Limit: ratelimit.PerMinute(1)},
		steps: []step{
			{at: 0, want: ok(1, 0, time.Minute)},
			{at: 0, rule: &ratelimit.Rule{Name: "both", Limit: ratelimit.PerMinute(1), Approximate: true}, want: ok(1, 0, 2*time.Minute-123456*us)},
			{at: 0, want: no(1, 0, time.Minute, time.Minute)},
		},
	},
	{
		name: "a clock that goes backwards",
		rule: ratelimit.Rule{Name: "backwards", Limit: ratelimit.PerMinute(2)},
		steps: []step{
			{at: 10 * sec, want: ok(2, 1, time.Minute)},
			{at: 5 * sec, want: ok(2, 0, time.Minute)},
			{at: 5 * sec, want: no(2, 0, time.Minute, 65*sec)},
			{at: 65 * sec, want: ok(2, 0, time.Minute)},
		},
	},
	{
		name: "a call stamped earlier than one already decided counts its whole window",
		rule: ratelimit.Rule{Name: "reorder", Limit: ratelimit.Limit{Rate: 2, Window: 10 * time.Second}},
		steps: []step{
			{at: 0, n: 2, want: ok(2, 0, 10*sec)},
			{at: 10*sec + us, want: ok(2, 1, 10*sec)},
			// A delayed request, or another instance, stamped 9s: the
			// events at 0, 0 and 10.000001s all count.
			{at: 9 * sec, want: no(2, 0, sec, 11*sec+us)},
		},
	},
	{
		name: "a cached rejection is not answered after the clock went back or events arrived",
		rule: ratelimit.Rule{Name: "a", Limit: ratelimit.Limit{Rate: 3, Window: 250 * ms}},
		steps: []step{
			{at: 0, rule: &ratelimit.Rule{Name: "a", Limit: ratelimit.PerSecond(5)}, want: ok(5, 4, sec)},
			{at: 0, n: 2, want: ok(3, 0, 250*ms)},
			{at: 0, want: no(3, 0, 250*ms, 250*ms)}, // the shield caches this rejection
			{at: 1557008 * us, n: 3, rule: &ratelimit.Rule{Name: "a", Limit: ratelimit.PerSecond(5)}, want: ok(5, 2, sec)},
			// Back before the cached rejection, with newer events in the log.
			{at: -1524999 * us, want: no(3, 0, 3332007*us, 3332007*us)},
		},
	},
	{
		name: "a peek under a shorter window forgets nothing",
		rule: ratelimit.Rule{Name: "reshaped", Limit: ratelimit.Limit{Rate: 3, Window: time.Second}},
		steps: []step{
			{at: 0, want: ok(3, 2, time.Second)},
			{at: 300 * ms, do: peek, rule: &ratelimit.Rule{Name: "reshaped", Limit: ratelimit.Limit{Rate: 3, Window: 250 * ms}}, want: ok(3, 3, 0)},
			{at: 400 * ms, want: ok(3, 1, time.Second)},
		},
	},
	{
		name: "a banned call under a shorter window forgets nothing",
		rule: ratelimit.Rule{Name: "banned-reshaped", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: 10 * time.Second}},
		steps: []step{
			{at: 0, want: ok(1, 0, time.Minute)},
			{at: 0, want: banned(violated(no(1, 0, time.Minute, time.Minute), 1), 10*sec)},
			{at: sec, rule: &ratelimit.Rule{Name: "banned-reshaped", Limit: ratelimit.Limit{Rate: 1, Window: 100 * ms}, Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: 10 * time.Second}},
				want: banned(violated(no(1, 0, 9*sec, 0), 1), 9*sec)},
			// The ban is over and the event at 0 is still in the minute: a
			// violation, and a new ban.
			{at: 11 * sec, want: banned(violated(no(1, 0, 49*sec, 49*sec), 2), 10*sec)},
		},
	},
	{
		name: "reads write nothing, even when the clock goes back after them",
		rule: ratelimit.Rule{Name: "read-only", Limit: ratelimit.PerMinute(1)},
		steps: []step{
			{at: 0, want: ok(1, 0, time.Minute)},
			{at: 90 * sec, do: peek, want: ok(1, 1, 0)},
			{at: 30 * sec, want: no(1, 0, 30*sec, 30*sec)},
			{at: 0, key: "c", rule: &ratelimit.Rule{Name: "read-only-c", Limit: ratelimit.Limit{Rate: 1, Window: 10 * sec}, Approximate: true}, want: ok(1, 0, 20*sec-123456*us)},
			{at: 25 * sec, key: "c", rule: &ratelimit.Rule{Name: "read-only-c", Limit: ratelimit.Limit{Rate: 1, Window: 10 * sec}, Approximate: true}, do: peek, want: ok(1, 1, 0)},
			{at: sec, key: "c", rule: &ratelimit.Rule{Name: "read-only-c", Limit: ratelimit.Limit{Rate: 1, Window: 10 * sec}, Approximate: true}, want: no(1, 0, 19*sec-123456*us, 19*sec-123456*us)},
		},
	},
}

// Behaviour runs every behaviour case against each of backends; all must
// give exactly the same results.
func Behaviour(t *testing.T, backends []Backend) {
	runCases(t, backends, append(behaviourCases[:len(behaviourCases):len(behaviourCases)], kindCases...))
}

// runCases runs each of cases on each of backends, on a fresh limiter
// with a fake clock of its own.
func runCases(t *testing.T, backends []Backend, cases []behaviourCase) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					clk := testkit.NewClock()
					l := b.New(t, testkit.Options(clk))
					runSteps(t, l, clk.Set, c)
				})
			}
		})
	}
}

func runSteps(t *testing.T, l *ratelimit.Limiter, setTime func(time.Time), c behaviourCase) {
	t.Helper()
	ctx := context.Background()
	held := map[int]*ratelimit.Reservation{}
	for i, s := range c.steps {
		setTime(testkit.Epoch().Add(s.at))
		rule := c.rule
		if s.rule != nil {
			rule = *s.rule
		}
		key := s.key
		if key == "" {
			key = "k"
		}
		var got R
		var err error
		switch {
		case s.do == reset:
			err = l.Reset(ctx, rule, key)
		case s.do == reserve:
			held[s.res], got, err = l.Reserve(ctx, rule, key, s.n)
			if (held[s.res] != nil) != (err == nil && got.Allowed) {
				t.Fatalf("step %d (at %v, key %q): Reserve returned reservation %v with Allowed %v, err %v", i, s.at, key, held[s.res], got.Allowed, err)
			}
		case s.do == settle:
			err = held[s.res].Settle(ctx, s.n)
		case s.do == cancel:
			err = held[s.res].Cancel(ctx)
		case s.do == allowN:
			got, err = l.AllowN(ctx, rule, key, s.n)
		case s.do == peek:
			got, err = l.Peek(ctx, rule, key)
		case s.n != 0:
			got, err = l.AllowN(ctx, rule, key, s.n)
		default:
			got, err = l.Allow(ctx, rule, key)
		}
		if !errors.Is(err, s.err) || (s.err == nil && err != nil) {
			t.Fatalf("step %d (at %v, key %q): err = %v, want %v", i, s.at, key, err, s.err)
		}
		if got != s.want {
			t.Fatalf("step %d (at %v, key %q):\n got %+v\nwant %+v", i, s.at, key, got, s.want)
		}
	}
}

package conformance

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

func sliding(name string, rate int, window time.Duration) ratelimit.Rule {
	return ratelimit.Rule{Name: name, Limit: ratelimit.Limit{Rate: rate, Window: window}}
}

func approximate(r ratelimit.Rule) ratelimit.Rule { r.Approximate = true; return r }
func dryRun(r ratelimit.Rule) ratelimit.Rule      { r.DryRun = true; return r }

// reserveCases are the behaviour cases of Reserve and a Reservation's
// Settle and Cancel, for every kind that takes reservations: after a
// settle, each kind counts what it would had the Reserve asked for actual
// (less), or had the extra been asked for at the settle's time (more). A
// GCRA bucket's times are those of the model: the TAT over the events in
// arrival order, each reservation at what it settled for.
var reserveCases = []behaviourCase{
	{
		name: "sliding log: settle for less, equal and more; twice; debt and its end",
		rule: sliding("log", 5, 10*sec),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 3, want: ok(5, 2, 10*sec)},
			{at: sec, want: ok(5, 1, 10*sec)},
			// Two of the three come back: the log holds 0s and 1s.
			{at: 2 * sec, do: settle, res: 1, n: 1},
			{at: 2 * sec, do: peek, want: ok(5, 3, 9*sec)},
			{at: 2 * sec, do: settle, res: 1, n: 2, err: ratelimit.ErrSettled},
			{at: 2 * sec, do: cancel, res: 1, err: ratelimit.ErrSettled},
			{at: 3 * sec, do: reserve, res: 2, n: 2, want: ok(5, 1, 10*sec)},
			{at: 3 * sec, do: settle, res: 2, n: 2},
			{at: 3 * sec, do: peek, want: ok(5, 1, 10*sec)},
			{at: 3 * sec, do: reserve, res: 3, n: 1, want: ok(5, 0, 10*sec)},
			// Four more than reserved, at 4s: 8 events, 3 over the Rate.
			{at: 4 * sec, do: settle, res: 3, n: 5},
			{at: 4 * sec, want: no(5, 0, 9*sec, 10*sec)},
			{at: 12 * sec, want: no(5, 0, sec, 2*sec)},
			{at: 13 * sec, want: ok(5, 0, 10*sec)},
		},
	},
	{
		name: "sliding log: a cancel frees the slots for the next call at once",
		rule: sliding("log-c", 2, 10*sec),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 2, want: ok(2, 0, 10*sec)},
			{at: sec, want: no(2, 0, 9*sec, 9*sec)},
			{at: sec, do: reserve, res: 2, n: 1, want: no(2, 0, 9*sec, 9*sec)},
			{at: sec, do: settle, res: 2, n: 1, err: ratelimit.ErrNoReservation},
			{at: 2 * sec, do: cancel, res: 1},
			{at: 2 * sec, do: peek, want: ok(2, 2, 0)},
			{at: 2 * sec, n: 2, want: ok(2, 0, 10*sec)},
		},
	},
	{
		name: "sliding log: a rejection after a settle's extra waits for it",
		rule: sliding("log-x", 2, 10*sec),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 2, want: ok(2, 0, 10*sec)},
			{at: sec, want: no(2, 0, 9*sec, 9*sec)},
			// Two more at 2s: the third oldest of 0, 0, 2s, 2s leaves at 12s.
			{at: 2 * sec, do: settle, res: 1, n: 4},
			{at: 2 * sec, want: no(2, 0, 10*sec, 10*sec)},
		},
	},
	{
		name: "sliding log: what a settle and a reserve take is bounded",
		rule: sliding("log-n", 5, 10*sec),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 6, err: ratelimit.ErrInvalidN},
			{at: 0, do: reserve, res: 1, n: 0, err: ratelimit.ErrInvalidN},
			{at: 0, do: reserve, res: 1, n: 1, want: ok(5, 4, 10*sec)},
			{at: 0, do: settle, res: 1, n: -1, err: ratelimit.ErrInvalidN},
			{at: 0, do: settle, res: 1, n: 5*ratelimit.MaxSettleFactor + 1, err: ratelimit.ErrInvalidN},
			// Refused bounds settle nothing: the reservation still settles.
			{at: 0, do: settle, res: 1, n: 5 * ratelimit.MaxSettleFactor},
			{at: 0, do: peek, want: no(5, 0, 10*sec, 10*sec)},
		},
	},
	{
		name: "approximate counter: give back in the window, in the previous one, and more",
		rule: approximate(sliding("counter", 4, 10*sec)),
		steps: []step{
			{at: w0, do: reserve, res: 1, n: 3, want: ok(4, 1, 20*sec)},
			{at: w0 + 5*sec, do: settle, res: 1, n: 1},
			{at: w0 + 5*sec, do: peek, want: ok(4, 3, 15*sec)},
			// The next window: the previous one's 1 weighs 0.8.
			{at: w0 + 12*sec, do: reserve, res: 2, n: 2, want: ok(4, 1, 18*sec)},
			{at: w0 + 15*sec, do: cancel, res: 2},
			{at: w0 + 15*sec, do: peek, want: ok(4, 3, 5*sec)},
			{at: w0 + 16*sec, do: reserve, res: 3, n: 2, want: ok(4, 1, 14*sec)},
			// In the window after, the two are the previous window's.
			{at: w0 + 22*sec, do: cancel, res: 3},
			{at: w0 + 22*sec, do: peek, want: ok(4, 4, 0)},
			{at: w0 + 23*sec, do: reserve, res: 4, n: 1, want: ok(4, 3, 17*sec)},
			{at: w0 + 24*sec, do: settle, res: 4, n: 5},
			{at: w0 + 24*sec, want: no(4, 0, 10*sec, 16*sec)},
		},
	},
	{
		name: "calendar quota: give back in the period, charge the extra in the settle's",
		rule: quotaRule("quota", 5, ratelimit.Day, nil),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 4, want: ok(5, 1, midnight)},
			{at: time.Hour, do: settle, res: 1, n: 2},
			{at: time.Hour, do: peek, want: ok(5, 3, midnight-time.Hour)},
			{at: 2 * time.Hour, do: reserve, res: 2, n: 3, want: ok(5, 0, midnight-2*time.Hour)},
			{at: 3 * time.Hour, do: settle, res: 2, n: 5},
			{at: 3 * time.Hour, want: no(5, 0, midnight-3*time.Hour, midnight-3*time.Hour)},
			// A reservation of one period settled in the next gives
			// nothing back there, and charges its extra there.
			{at: midnight - sec, key: "late", do: reserve, res: 3, n: 2, want: ok(5, 3, sec)},
			{at: midnight + sec, key: "late", do: settle, res: 3, n: 4},
			{at: midnight + sec, key: "late", do: peek, want: ok(5, 3, 24*time.Hour-sec)},
			{at: midnight + time.Hour, want: ok(5, 4, 23*time.Hour)},
		},
	},
	{
		name: "fixed window: give back in the window; nothing once it ended",
		rule: fixed("fixed-r", 3, 10*sec),
		steps: []step{
			{at: w0, do: reserve, res: 1, n: 3, want: ok(3, 0, 10*sec)},
			{at: w0 + sec, want: no(3, 0, 9*sec, 9*sec)},
			{at: w0 + 2*sec, do: settle, res: 1, n: 1},
			{at: w0 + 2*sec, n: 2, want: ok(3, 0, 8*sec)},
			{at: w0 + 12*sec, do: reserve, res: 2, n: 2, want: ok(3, 1, 8*sec)},
			{at: w0 + 21*sec, do: cancel, res: 2},
			{at: w0 + 21*sec, do: peek, want: ok(3, 3, 0)},
			{at: w0 + 22*sec, do: reserve, res: 3, n: 1, want: ok(3, 2, 8*sec)},
			{at: w0 + 23*sec, do: settle, res: 3, n: 4},
			{at: w0 + 23*sec, want: no(3, 0, 7*sec, 7*sec)},
		},
	},
	{
		name: "penalty: a rejected reserve is a violation; settling over the limit is not",
		rule: withPenalty(sliding("log-p", 2, 10*sec), &ratelimit.Penalty{BanAfter: 3, BanFor: time.Minute}),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 2, want: ok(2, 0, 10*sec)},
			{at: sec, do: settle, res: 1, n: 4},
			{at: sec, do: peek, want: no(2, 0, 10*sec, 10*sec)},
			{at: 2 * sec, do: reserve, res: 2, n: 1, want: violated(no(2, 0, 9*sec, 9*sec), 1)},
		},
	},
	{
		name: "dry run: a reservation over the limit recorded nothing, and settles nothing",
		rule: dryRun(sliding("log-d", 1, 10*sec)),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 1, want: ok(1, 0, 10*sec)},
			{at: 0, do: reserve, res: 2, n: 1, want: R{Allowed: true, DryRun: true, Limit: 1, RetryAfter: 10 * sec, ResetAfter: 10 * sec}},
			{at: sec, do: settle, res: 2, n: 3},
			{at: sec, do: peek, want: R{Allowed: true, DryRun: true, Limit: 1, RetryAfter: 9 * sec, ResetAfter: 9 * sec}},
			{at: sec, do: cancel, res: 1},
			{at: sec, do: peek, want: ok(1, 1, 0)},
		},
	},
	{
		name: "a settle after a Reset gives back nothing of what the Reset cleared",
		rule: sliding("log-reset", 3, 10*sec),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 2, want: ok(3, 1, 10*sec)},
			{at: sec, do: reset},
			{at: sec, n: 2, want: ok(3, 1, 10*sec)},
			{at: 2 * sec, do: cancel, res: 1},
			{at: 2 * sec, do: peek, want: ok(3, 1, 9*sec)},
			{at: 2 * sec, key: "other", do: reserve, res: 2, n: 2, want: ok(3, 1, 10*sec)},
			{at: 3 * sec, key: "other", do: settle, res: 2, n: 1},
			{at: 3 * sec, key: "other", do: peek, want: ok(3, 2, 9*sec)},
		},
	},
	{
		name: "approximate counter: a settle after a Reset gives back nothing of what the Reset cleared",
		rule: approximate(sliding("counter-reset", 4, 10*sec)),
		steps: []step{
			{at: w0, do: reserve, res: 1, n: 3, want: ok(4, 1, 20*sec)},
			{at: w0 + sec, do: reset},
			{at: w0 + sec, n: 2, want: ok(4, 2, 19*sec)},
			{at: w0 + 2*sec, do: cancel, res: 1},
			{at: w0 + 2*sec, do: peek, want: ok(4, 2, 18*sec)},
		},
	},
	{
		// The example: moving the TAT back by what the
		// reservation gave back would undo the call at 5s with it.
		name: "gcra: settle for less after a later call, equal and more; twice; debt and its end",
		rule: gcra("bucket-r", 10, 10*sec, 10), // one token a second, ten at once
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 10, want: ok(10, 0, 10*sec)},
			{at: 5 * sec, want: ok(10, 4, 6*sec)},
			// As if the Reserve had asked for 4 at 0: drained by 5s,
			// the call at 5s alone is in the bucket.
			{at: 5 * sec, do: settle, res: 1, n: 4},
			{at: 5 * sec, do: peek, want: ok(10, 9, sec)},
			{at: 5 * sec, do: settle, res: 1, n: 2, err: ratelimit.ErrSettled},
			{at: 5 * sec, do: reserve, res: 2, n: 3, want: ok(10, 6, 4*sec)},
			{at: 6 * sec, do: settle, res: 2, n: 3},
			{at: 6 * sec, do: peek, want: ok(10, 7, 3*sec)},
			{at: 6 * sec, do: reserve, res: 3, n: 2, want: ok(10, 5, 5*sec)},
			// 18 more than reserved, at 7s: the TAT is 29s, 12 tokens
			// past an empty bucket, and calls wait until it has room
			// again: until it has refilled to one token.
			{at: 7 * sec, do: settle, res: 3, n: 20},
			{at: 7 * sec, want: no(10, 0, 13*sec, 22*sec)},
			{at: 20*sec - us, want: no(10, 0, us, 9*sec+us)},
			{at: 20 * sec, want: ok(10, 0, 10*sec)},
		},
	},
	{
		name: "gcra: a cancel after a later call frees what the reservation took, and no more",
		rule: gcra("bucket-c", 10, 10*sec, 10),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 10, want: ok(10, 0, 10*sec)},
			{at: 5 * sec, want: ok(10, 4, 6*sec)},
			{at: 5 * sec, do: cancel, res: 1},
			// Burst - 1: the call at 5s holds its token.
			{at: 5 * sec, do: peek, want: ok(10, 9, sec)},
			{at: 5 * sec, n: 9, want: ok(10, 0, 10*sec)},
			{at: 5 * sec, want: no(10, 0, sec, 10*sec)},
			{at: 5 * sec, do: cancel, res: 1, err: ratelimit.ErrSettled},
			{at: 5 * sec, do: peek, want: no(10, 0, sec, 10*sec)},
		},
	},
	{
		name: "gcra: a reservation never settled drains as AllowN; settled once the bucket was full, it gives nothing back",
		rule: gcra("bucket-n", 10, 10*sec, 10),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 4, want: ok(10, 6, 4*sec)},
			{at: 0, key: "allowN", n: 4, want: ok(10, 6, 4*sec)},
			{at: 2 * sec, want: ok(10, 7, 3*sec)},
			{at: 2 * sec, key: "allowN", want: ok(10, 7, 3*sec)},
			{at: 3 * sec, do: peek, want: ok(10, 8, 2*sec)},
			{at: 3 * sec, key: "allowN", do: peek, want: ok(10, 8, 2*sec)},
			{at: 5 * sec, do: peek, want: ok(10, 10, 0)},
			{at: 5 * sec, want: ok(10, 9, sec)},
			{at: 5 * sec, do: cancel, res: 1},
			{at: 5 * sec, do: peek, want: ok(10, 9, sec)},
		},
	},
	{
		// Each settle is exact whatever the order: B (the middle one)
		// first, then A, then C, with calls and drained stretches between.
		name: "gcra: several outstanding reservations settled out of order",
		rule: gcra("bucket-o", 10, 10*sec, 10),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 6, want: ok(10, 4, 6*sec)},
			{at: sec, do: reserve, res: 2, n: 3, want: ok(10, 2, 8*sec)},
			{at: 4 * sec, want: ok(10, 4, 6*sec)},
			{at: 8 * sec, do: reserve, res: 3, n: 4, want: ok(10, 4, 6*sec)},
			{at: 9 * sec, want: ok(10, 4, 6*sec)},
			{at: 9 * sec, do: settle, res: 2, n: 1},
			{at: 9 * sec, do: peek, want: ok(10, 6, 4*sec)},
			{at: 10 * sec, do: cancel, res: 1},
			{at: 10 * sec, do: peek, want: ok(10, 7, 3*sec)},
			{at: 10 * sec, do: settle, res: 3, n: 2},
			{at: 10 * sec, do: peek, want: ok(10, 9, sec)},
			{at: 10 * sec, n: 6, want: ok(10, 3, 7*sec)},
			{at: 10 * sec, want: ok(10, 2, 8*sec)},
		},
	},
	{
		name: "gcra: what a reserve and a settle take is bounded by the Burst",
		rule: gcra("bucket-b", 10, sec, 5),
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 6, err: ratelimit.ErrInvalidN},
			{at: 0, do: reserve, res: 1, n: 1, want: ok(5, 4, 100*ms)},
			{at: 0, do: settle, res: 1, n: 5*ratelimit.MaxSettleFactor + 1, err: ratelimit.ErrInvalidN},
			{at: 0, do: settle, res: 1, n: 5 * ratelimit.MaxSettleFactor},
			{at: 0, do: peek, want: no(5, 0, 7600*ms, 8*sec)},
		},
	},
	{
		name: "a Concurrency rule takes no reservation",
		rule: slots,
		steps: []step{
			{at: 0, do: reserve, res: 1, n: 1, err: ratelimit.ErrInvalidRule},
			{at: 0, do: cancel, res: 1, err: ratelimit.ErrNoReservation},
		},
	},
}

var slots = concurrencyRule("slots", 2, 10*sec)

// Reserve runs reserveCases on every backend.
func Reserve(t *testing.T, backends []Backend) { runCases(t, backends, reserveCases) }

package conformance

import (
	"slices"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// The Prefetch tables of the fixed window, the calendar quota and the
// approximate counter (issue 30): a grant's slots are events of the window
// or period Redis took them in, counted at the grant as a decision counts
// them, usable until min(sent + Prefetch, that window's or period's end),
// and given back (those unused) with the pair's next request, only while
// the pair's last Reset is the one the grant saw and only from that window
// (the counter: from its current window or, weighted, the previous one).
//
// Every number below is worked out from lua/grant.lua and the kind's
// pieces, and from internal/grant's Pair.Demand: a pair's demand is its allowed
// events in the current Prefetch-long bucket of the clock or the one
// before; testkit.Epoch is 3.456ms into a 20ms bucket (its µs are
// …123456), so buckets begin at 16.544ms, 36.544ms, … from it, and the
// end of its second (fixedEnd) and midnight are bucket boundaries. A
// Limiter of the tables counts one instance: a grant is min(asked, free).

// slotKind is one of the three kinds, at Rate 10 and Prefetch 20ms.
type slotKind struct {
	name string
	rule ratelimit.Rule
	// full is the ResetAfter at at of a pair whose meter holds events of
	// Epoch's window or period (and none before it): when the meter is
	// empty if nothing else comes.
	full func(at time.Duration) time.Duration
	// retry1 is the RetryAfter, from 0, of one event when Epoch's window
	// or period holds 10; retry9 of nine events when it holds 2.
	retry1, retry9 time.Duration
}

var slotKinds = []slotKind{
	{
		// A count of Epoch's window counts until it ends; a full window
		// comes back only with the next.
		name:   "fixed window",
		rule:   hotFixed,
		full:   func(at time.Duration) time.Duration { return fixedEnd - at },
		retry1: fixedEnd, retry9: fixedEnd,
	},
	{
		// A day in UTC: the period ends at midnight.
		name:   "calendar quota",
		rule:   ratelimit.Rule{Name: "hot", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 10, Period: ratelimit.Day}, Prefetch: 20 * ms},
		full:   func(at time.Duration) time.Duration { return midnight - at },
		retry1: midnight, retry9: midnight,
	},
	{
		// The counter's windows are a second long, aligned to the epoch:
		// Epoch's ends at fixedEnd, and its events count (weighted) until
		// the next one ends. counter.retry: n events fit once est + n <=
		// 10; with c = 10 in the current window (p = 0), one fits when
		// it is the previous one and weighs 9: 100ms into the next; with
		// c = 2, nine fit when it weighs 1: 500ms into the next.
		name:   "approximate counter",
		rule:   ratelimit.Rule{Name: "hot", Limit: ratelimit.Limit{Rate: 10, Window: sec}, Approximate: true, Prefetch: 20 * ms},
		full:   func(at time.Duration) time.Duration { return fixedEnd + sec - at },
		retry1: fixedEnd + 100*ms, retry9: fixedEnd + 500*ms,
	},
}

// allPrefetchCases are prefetchCases and, for each of slotKinds, the
// cases every kind shares (slotCases), then the kind's own at its
// window's or period's end.
func allPrefetchCases() []prefetchCase {
	out := append([]prefetchCase(nil), prefetchCases...)
	for _, k := range slotKinds {
		out = append(out, slotCases(k)...)
	}
	return append(out, slotEndCases...)
}

// slotCases are the cases of kind k that its window or period's end does
// not enter (all of them well before it).
func slotCases(k slotKind) []prefetchCase {
	return []prefetchCase{slotGrantCase(k), slotResetCase(k), slotBanCase(k)}
}

// slotGrantCase is kind k's case of a grant's life: its uses, the
// under-admission once it lapses, the give-back with the next request,
// and the rejections once no slot is left.
func slotGrantCase(k slotKind) prefetchCase {
	R := k.full
	return prefetchCase{
		name: k.name + ": a grant, its uses, the under-admission, a give-back, and no slot left",
		rule: k.rule,
		steps: []prefetchStep{
			{at: 0, want: ok(10, 9, R(0)), path: ratelimit.PathRedis},
			{at: 0, want: ok(10, 8, R(0)), path: ratelimit.PathRedis},
			// Two events in the bucket: the third call asks for 2 + 1
			// of the 8 free, and uses one. Remaining is the count at
			// the grant (2) less what this process used (1).
			{at: 0, want: ok(10, 7, R(0)), path: ratelimit.PathPrefetch},
			// Redis counts the grant's three slots: 2 + 3.
			{at: 0, do: peek, want: ok(10, 5, R(0)), path: ratelimit.PathRedis},
			{at: ms, want: ok(10, 6, R(ms)), path: ratelimit.PathPrefetch},
			// The grant lapsed at 20ms with one slot unused: it still
			// counts (the under-admission), until it goes back.
			{at: 21 * ms, do: peek, want: ok(10, 5, R(21*ms)), path: ratelimit.PathRedis},
			// A new bucket (16.544ms): the demand is the last one's 4
			// events. The request gives the slot back (count 4) and
			// asks for 4 + 1 of the 6 free: Remaining 10 - 4 - 1.
			{at: 22 * ms, want: ok(10, 5, R(22*ms)), path: ratelimit.PathPrefetch},
			{at: 22 * ms, do: peek, want: ok(10, 1, R(22*ms)), path: ratelimit.PathRedis},
			{at: 23 * ms, want: ok(10, 4, R(23*ms)), path: ratelimit.PathPrefetch},
			// The grant's last three slots (Remaining 10 - 4 - 5). None
			// left, under a quarter of the demand (5): the call asks
			// for 5 more before it returns and gets the last one free.
			{at: 23 * ms, n: 3, want: ok(10, 1, R(23*ms)), path: ratelimit.PathPrefetch},
			// Used (Remaining 10 - 9 - 1); the request it makes finds
			// none free.
			{at: 23 * ms, want: ok(10, 0, R(23*ms)), path: ratelimit.PathPrefetch},
			{at: 23 * ms, do: peek, want: no(10, 0, k.retry1-23*ms, R(23*ms)), path: ratelimit.PathRedis},
			// Rejected in-process until a slot frees, as a rejection of
			// one event at the request's time answers.
			{at: 24 * ms, want: no(10, 0, k.retry1-24*ms, R(24*ms)), path: ratelimit.PathShield},
		},
	}
}

// slotResetCase is kind k's case of a Reset by another process: it voids
// the slots granted before it, and their give-back takes nothing back.
func slotResetCase(k slotKind) prefetchCase {
	R := k.full
	return prefetchCase{
		name: k.name + ": a Reset voids the slots, and a give-back after it takes nothing back",
		rule: k.rule,
		steps: []prefetchStep{
			{at: 0, want: ok(10, 9, R(0)), path: ratelimit.PathRedis},
			{at: 0, want: ok(10, 8, R(0)), path: ratelimit.PathRedis},
			// L0 takes 3 slots (count 5), two of them unused.
			{at: 0, want: ok(10, 7, R(0)), path: ratelimit.PathPrefetch},
			// Another process resets the pair (its meter is gone) and
			// records two events on Redis.
			{at: ms, inst: 1, do: reset},
			{at: ms, inst: 1, want: ok(10, 9, R(ms)), path: ratelimit.PathRedis},
			{at: ms, inst: 1, want: ok(10, 8, R(ms)), path: ratelimit.PathRedis},
			// L0 does not know yet: it uses a slot granted before the
			// Reset (a Reset voids other processes' slots within
			// Prefetch). Remaining is its grant's: 10 - 2 - 2.
			{at: 2 * ms, want: ok(10, 6, R(2*ms)), path: ratelimit.PathPrefetch},
			// Redis holds the two events after the Reset, nothing of
			// the grant's.
			{at: 21 * ms, inst: 1, do: peek, want: ok(10, 8, R(21*ms)), path: ratelimit.PathRedis},
			// L0's grant lapsed with one slot unused; its request gives
			// it back under the mark of before the Reset: nothing is
			// taken back (count 2), and it gets 4 + 1 of the 8 free.
			{at: 22 * ms, want: ok(10, 7, R(22*ms)), path: ratelimit.PathPrefetch},
			{at: 22 * ms, inst: 1, do: peek, want: ok(10, 3, R(22*ms)), path: ratelimit.PathRedis},
		},
	}
}

// slotBanCase is kind k's case of a key that another process' violations
// ban (k's rule under a penalty): the pair, hot as it is, gets no grant.
func slotBanCase(k slotKind) prefetchCase {
	R := k.full
	pen := k.rule
	pen.Penalty = &ratelimit.Penalty{BanAfter: 2, BanFor: 100 * ms}
	return prefetchCase{
		name: k.name + ": a banned key gets no grant",
		rule: pen,
		steps: []prefetchStep{
			{at: 0, want: ok(10, 9, R(0)), path: ratelimit.PathRedis},
			{at: 0, want: ok(10, 8, R(0)), path: ratelimit.PathRedis},
			// Another process asks for more than is left, twice: a
			// violation, then a ban of 100ms (its nine fit no sooner
			// than retry9, later than the ban's end).
			{at: 0, inst: 1, n: 9, want: violated(no(10, 8, k.retry9, R(0)), 1), path: ratelimit.PathRedis},
			{at: 0, inst: 1, n: 9, want: banned(violated(no(10, 0, k.retry9, R(0)), 2), 100*ms), path: ratelimit.PathRedis},
			// L0's pair is hot (two events in the bucket) and 8 are
			// free, but the key is banned: Redis grants nothing, and
			// the call, on Redis, is rejected as banned.
			{at: ms, want: banned(violated(no(10, 0, 99*ms, R(ms)), 2), 99*ms), path: ratelimit.PathRedis},
			// Once the ban is over, the meter holds the two events
			// alone: no slot was taken.
			{at: 200 * ms, do: peek, want: violated(ok(10, 8, R(200*ms)), 2), path: ratelimit.PathRedis},
		},
	}
}

// slotEndCases are each kind's cases at its window's or period's end:
// its slots are not usable past it, and what goes back to an ended window
// or period takes nothing from the next.
var slotEndCases = []prefetchCase{
	{
		name: "fixed window: what goes back to an ended window takes nothing from the next",
		rule: hotFixed,
		// Three slots, usable for the 5ms left: two unused.
		steps: append(slices.Clone(grantBeforeFixedEnd),
			// Another process' call opens the next window (1 event).
			prefetchStep{at: fixedEnd, inst: 1, want: ok(10, 9, sec), path: ratelimit.PathRedis},
			// L0's two go back to the ended window (nothing taken from
			// the new one: count 1); it gets 3 + 1 of the 9 free.
			prefetchStep{at: fixedEnd, want: ok(10, 8, sec), path: ratelimit.PathPrefetch},
			prefetchStep{at: fixedEnd, inst: 1, do: peek, want: ok(10, 5, sec), path: ratelimit.PathRedis},
		),
	},
	{
		name: "calendar quota: slots are usable until the period ends, and what goes back to it takes nothing from the next",
		rule: slotKinds[1].rule,
		steps: []prefetchStep{
			{at: midnight - 5*ms, want: ok(10, 9, 5*ms), path: ratelimit.PathRedis},
			{at: midnight - 5*ms, want: ok(10, 8, 5*ms), path: ratelimit.PathRedis},
			// Three slots, usable for the 5ms left of the day.
			{at: midnight - 5*ms, want: ok(10, 7, 5*ms), path: ratelimit.PathPrefetch},
			// Its last µs: one more. (Under an eighth of the Prefetch
			// left, the call asks for the next grant, 4 of the 5 free:
			// usable until midnight as well.)
			{at: midnight - us, want: ok(10, 6, us), path: ratelimit.PathPrefetch},
			{at: midnight - us, do: peek, want: ok(10, 1, us), path: ratelimit.PathRedis},
			// Another process' call opens the next day (1 event).
			{at: midnight, inst: 1, want: ok(10, 9, 24*time.Hour), path: ratelimit.PathRedis},
			// Midnight: L0's slots (one of the first grant, four of the
			// second) are not usable, and go back to the day before
			// (nothing taken from this one: count 1). The demand is the
			// last bucket's 4: it gets 4 + 1 of the 9 free.
			{at: midnight, want: ok(10, 8, 24*time.Hour), path: ratelimit.PathPrefetch},
			{at: midnight, inst: 1, do: peek, want: ok(10, 4, 24*time.Hour), path: ratelimit.PathRedis},
		},
	},
	{
		name: "approximate counter: slots are usable until their window ends, and go back to it weighted as the previous one",
		rule: slotKinds[2].rule,
		steps: []prefetchStep{
			{at: fixedEnd - 5*ms, want: ok(10, 9, sec+5*ms), path: ratelimit.PathRedis},
			{at: fixedEnd - 5*ms, want: ok(10, 8, sec+5*ms), path: ratelimit.PathRedis},
			// Three slots of the window, usable for the 5ms left of it.
			{at: fixedEnd - 5*ms, want: ok(10, 7, sec+5*ms), path: ratelimit.PathPrefetch},
			{at: fixedEnd - 3*ms, want: ok(10, 6, sec+3*ms), path: ratelimit.PathPrefetch},
			// Another process' call opens the next window: the previous
			// one's 5 weigh 5 at its start; 5 + 1 allowed.
			{at: fixedEnd, inst: 1, want: ok(10, 4, 2*sec), path: ratelimit.PathRedis},
			// L0's last slot is not usable; it goes back to the previous
			// window (p 5 - 1 = 4): est 4 + 1 = 5, and L0 gets 4 + 1 of
			// the 5 free. Remaining 10 - 5 - 1.
			{at: fixedEnd, want: ok(10, 4, 2*sec), path: ratelimit.PathPrefetch},
			// est 4 + 6 = 10: full. One event fits once the previous
			// window weighs 3 (10 - 1 - 6): a quarter into this one.
			{at: fixedEnd, inst: 1, do: peek, want: no(10, 0, 250*ms, 2*sec), path: ratelimit.PathRedis},
			// Half a window later the previous window weighs 2, the
			// current one holds 1 + 5, four of them unused (L0's grant
			// lapsed at 20ms and was not given back yet): est 8.
			{at: fixedEnd + 500*ms, inst: 1, do: peek, want: ok(10, 2, 1500*ms), path: ratelimit.PathRedis},
		},
	},
}

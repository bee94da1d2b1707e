package conformance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// PrefetchGCRA: the GCRA's grants (lua/gcra.lua's gcra.free, gcra.take and
// gcra.giveback) at exact fake-clock instants, on two Limiters of one store
// (Backend.Two), as two processes of a fleet. Every expected number below
// is worked out by hand from the rule (the comment above gcra.free):
//
//   - at the bucket's time t a grant of g slots leaves the TAT at
//     max(TAT, t + Prefetch) + g·T, and is made only if that fits at t:
//     max(debt, Prefetch) + g·T <= Burst·T (debt = TAT - t, or 0);
//   - the grant's count (a Result's Remaining is Limit less it, less what
//     the process used since) is ceil(max(debt, Prefetch) / T);
//   - a give-back settles the grant's reservation, made at t + Prefetch, at
//     what was used; a bucket that has no record of it (Reset, or full
//     since) gives nothing back.
//
// A Limiter's pair is hot when it allowed two events in the last Prefetch
// (the process clock's Prefetch-long buckets, aligned to the Unix epoch:
// testkit.Epoch is 3.456ms into a 20ms bucket, the next starts at
// 16.544ms); a hot pair's call asks for the events it allowed in the last
// Prefetch plus its own, at most what is free.

// gcraPrefetchStep is one step of a case: a call on Limiter on (0 or 1) at
// an exact time since testkit.Epoch, with the path it must take, or one of
// the case's own ops.
type gcraPrefetchStep struct {
	at   time.Duration
	on   int
	do   op // allow (AllowN when n > 1), peek, reset, or gcraClose, gcraReturned, gcraStats
	n    int
	want R
	path ratelimit.Path
	// stats, for gcraStats: the Limiter's PrefetchGrants,
	// PrefetchSlotsGranted, PrefetchSlotsUsed and PrefetchSlotsReturned.
	stats [4]uint64
}

const (
	// gcraClose closes the step's Limiter: it gives its unused slots back,
	// within Options.Timeout.
	gcraClose op = 100 + iota
	// gcraReturned waits until the step's Limiter counts n slots given
	// back (the write-back's loop gives a lapsed grant's back).
	gcraReturned
	// gcraStats checks the step's Limiter's prefetch counts.
	gcraStats
)

// hotGCRAFast is hotGCRA's (prefetch.go: T = 100ms, a burst of 10)
// faster sibling: T = 10ms, a burst of 10, so that Prefetch (20ms) is two
// T.
var hotGCRAFast = ratelimit.Rule{Name: "hot", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 100, Window: sec, Burst: 10}, Prefetch: 20 * ms}

// hotGCRABan: T = 100ms, a burst of 3, banned for a second at the second
// violation.
var hotGCRABan = ratelimit.Rule{Name: "hot", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: sec, Burst: 3}, Prefetch: 20 * ms,
	Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: sec}}

// gcraHot are the first three steps of most cases: two calls on Redis at 0
// (the TAT 200ms), and a third from a grant of 2 + 1 slots, taken as
// events at 20ms: max(200ms, 20ms) + 300ms, the TAT 500ms. Its count is
// 2: Remaining 10 - 2 - 1.
var gcraHot = []gcraPrefetchStep{
	{at: 0, want: ok(10, 9, 100*ms), path: ratelimit.PathRedis},
	{at: 0, want: ok(10, 8, 200*ms), path: ratelimit.PathRedis},
	{at: 0, want: ok(10, 7, 500*ms), path: ratelimit.PathPrefetch},
}

var prefetchGCRACases = []struct {
	name  string
	rule  ratelimit.Rule
	steps []gcraPrefetchStep
}{
	{
		name: "a Reset voids the bucket's slots: what another process gives back after it takes nothing",
		rule: hotGCRA,
		steps: append(append([]gcraPrefetchStep(nil), gcraHot...),
			gcraPrefetchStep{at: ms, on: 1, do: reset},
			gcraPrefetchStep{at: ms, on: 1, do: peek, want: ok(10, 10, 0), path: ratelimit.PathRedis},
			// The TAT 1ms + 100ms.
			gcraPrefetchStep{at: ms, on: 1, want: ok(10, 9, 100*ms), path: ratelimit.PathRedis},
			// Limiter 0's grant ends at 20ms: it may use its slots until
			// then (a Reset voids other processes' slots within Prefetch).
			// Remaining 10 - 2 - 2; the bucket it saw empties at 500ms.
			gcraPrefetchStep{at: ms, want: ok(10, 6, 499*ms), path: ratelimit.PathPrefetch},
			// 21ms, a new Prefetch-long bucket: the last one's 4 events
			// (at 0 and 1ms) make the pair hot. The lapsed grant's unused
			// slot goes back with the request, and the bucket holds no
			// record of it (the Reset deleted it): nothing comes back.
			// The TAT 101ms: debt 80ms, max(80ms, 20ms) = 80ms, count 1,
			// 9 free; 4 + 1 granted: the TAT 21ms + 80ms + 500ms =
			// 601ms. Remaining 10 - 1 - 1.
			gcraPrefetchStep{at: 21 * ms, want: ok(10, 8, 580*ms), path: ratelimit.PathPrefetch},
			// Debt 580ms: 6 in use. (Had the slot come back, the TAT
			// would have been 1ms before the grant: max(0, 20ms), the
			// TAT 541ms after it, ResetAfter 520ms.)
			gcraPrefetchStep{at: 21 * ms, on: 1, do: peek, want: ok(10, 4, 580*ms), path: ratelimit.PathRedis},
			// Two grants of 3 and 5 slots; 2 + 1 used; the one slot
			// sent back counts as returned, whatever Redis took back.
			gcraPrefetchStep{do: gcraStats, stats: [4]uint64{2, 8, 3, 1}},
		),
	},
	{
		name: "a bucket that filled between a grant and its give-back gives nothing back",
		rule: hotGCRA,
		steps: append(append([]gcraPrefetchStep(nil), gcraHot...),
			gcraPrefetchStep{at: 0, on: 1, do: peek, want: ok(10, 5, 500*ms), path: ratelimit.PathRedis},
			// The bucket is full at 500ms (the grant's 2 unused slots
			// still counted). Limiter 1's 10 fit; the decision finds
			// the bucket full and forgets its reservations: the TAT
			// 1500ms.
			gcraPrefetchStep{at: 500 * ms, on: 1, n: 10, want: ok(10, 0, sec), path: ratelimit.PathRedis},
			// Limiter 0's pair is cold: its lapsed grant's 2 slots go
			// back through the write-back's loop, and the call is
			// decided on Redis: debt 1000ms, 10 in use; one frees in
			// 100ms.
			gcraPrefetchStep{at: 500 * ms, want: no(10, 0, 100*ms, sec), path: ratelimit.PathRedis},
			gcraPrefetchStep{do: gcraReturned, n: 2},
			// Nothing came back: still 10 in use. (A give-back of 2
			// slots would leave the TAT 1300ms: 8 in use.)
			gcraPrefetchStep{at: 500 * ms, on: 1, do: peek, want: no(10, 0, 100*ms, sec), path: ratelimit.PathRedis},
		),
	},
	{
		name: "a banned key is granted nothing: its calls go to Redis, which answers the ban",
		rule: hotGCRABan,
		steps: []gcraPrefetchStep{
			{at: 0, want: ok(3, 2, 100*ms), path: ratelimit.PathRedis},
			{at: 0, want: ok(3, 1, 200*ms), path: ratelimit.PathRedis},
			// Hot: 2 + 1 asked, max(200ms, 20ms) = 200ms, count 2: 1
			// free. The TAT 300ms. It is used at once, and this call
			// asks for the next: none is free (retry 100ms), and under
			// a penalty the pair's calls then go to Redis, which counts
			// their violations.
			{at: 0, want: ok(3, 0, 300*ms), path: ratelimit.PathPrefetch},
			// The TAT 300ms: debt + T - 3T = 100ms to wait.
			{at: 0, want: violated(no(3, 0, 100*ms, 300*ms), 1), path: ratelimit.PathRedis},
			{at: 0, want: banned(violated(no(3, 0, sec, 300*ms), 2), sec), path: ratelimit.PathRedis},
			// 20ms: a new Prefetch-long bucket; the last one's 3 allowed
			// events make the pair hot, and its request comes a Prefetch
			// after the one that found no slot: grant.lua grants a
			// banned key nothing, and the call goes on to Redis' path,
			// where the hot-key shield answers the ban it cached: still
			// banned, the bucket empties at 300ms.
			{at: 20 * ms, want: banned(violated(no(3, 0, 980*ms, 280*ms), 2), 980*ms), path: ratelimit.PathShield},
			{do: gcraStats, stats: [4]uint64{1, 1, 1, 0}},
			// 40ms: the pair allowed nothing in the last Prefetch, cold.
			{at: 40 * ms, want: banned(violated(no(3, 0, 960*ms, 260*ms), 2), 960*ms), path: ratelimit.PathShield},
			{do: gcraStats, stats: [4]uint64{1, 1, 1, 0}},
		},
	},
	{
		name: "AllowN takes n of a grant's slots, and asks for the next when they run out",
		rule: hotGCRA,
		steps: []gcraPrefetchStep{
			{at: 0, want: ok(10, 9, 100*ms), path: ratelimit.PathRedis},
			{at: 0, want: ok(10, 8, 200*ms), path: ratelimit.PathRedis},
			// Hot: 2 + 3 asked, max(200ms, 20ms) = 200ms, count 2, 8
			// free: 5 granted, the TAT 700ms. 3 used: Remaining 10 - 2 -
			// 3.
			{at: 0, n: 3, want: ok(10, 5, 700*ms), path: ratelimit.PathPrefetch},
			{at: 0, do: peek, want: ok(10, 3, 700*ms), path: ratelimit.PathRedis},
			// The grant's last 2: Remaining 10 - 2 - 5. None left: this
			// call asks for the last Prefetch's 7 events; debt 699ms,
			// count 7, 3 free: 3 granted (fewer than asked), the TAT 1ms
			// + 699ms + 300ms = 1000ms.
			{at: ms, n: 2, want: ok(10, 3, 699*ms), path: ratelimit.PathPrefetch},
			// The grant had fewer slots than asked for: the pair asks
			// for none until it ends (21ms), and meanwhile its calls
			// without a slot are rejected in-process, as a rejection of
			// one event at the grant's time answers them: debt 999ms,
			// one more fits debt + T - 10T = 99ms later. Remaining 10 -
			// 7 - 3; the bucket empties at 1000ms.
			{at: ms, n: 3, want: ok(10, 0, 999*ms), path: ratelimit.PathPrefetch},
			{at: ms, n: 2, want: no(10, 0, 99*ms, 999*ms), path: ratelimit.PathShield},
			{at: ms, do: peek, want: no(10, 0, 99*ms, 999*ms), path: ratelimit.PathRedis},
			{do: gcraStats, stats: [4]uint64{2, 8, 8, 0}},
			// 21ms: the grant ended; the pair is hot (10 events in the
			// last Prefetch-long bucket). Its request settles the used-up
			// grant (nothing back) and asks for 10 + 1: debt 979ms, count
			// 10, none free: rejected in-process until a slot frees,
			// 79ms later, as that rejection answers.
			{at: 21 * ms, want: no(10, 0, 79*ms, 979*ms), path: ratelimit.PathShield},
			{do: gcraStats, stats: [4]uint64{2, 8, 8, 0}},
		},
	},
	{
		name: "what a grant took for Prefetch when the bucket was emptier than its time plus Prefetch stays taken: the under-admission",
		rule: hotGCRAFast, // T = 10ms, Prefetch 20ms
		steps: []gcraPrefetchStep{
			{at: 0, want: ok(10, 9, 10*ms), path: ratelimit.PathRedis},
			{at: 0, want: ok(10, 8, 20*ms), path: ratelimit.PathRedis},
			// 15ms (the same Prefetch-long bucket): hot. The TAT 20ms,
			// debt 5ms: max(5ms, 20ms) = 20ms, count 2 (an exact bucket
			// of the calls: 1), 8 free: 2 + 1 granted as events at 35ms,
			// the TAT 65ms. Remaining 10 - 2 - 1.
			{at: 15 * ms, want: ok(10, 7, 50*ms), path: ratelimit.PathPrefetch},
			{at: 15 * ms, on: 1, do: peek, want: ok(10, 5, 50*ms), path: ratelimit.PathRedis},
			{at: 16 * ms, want: ok(10, 6, 49*ms), path: ratelimit.PathPrefetch},
			// Close gives the unused slot back: the grant settles at
			// the 2 used, events at 35ms: max(20ms, 35ms) + 20ms, the
			// TAT 55ms.
			{on: 0, do: gcraClose},
			{do: gcraStats, stats: [4]uint64{1, 3, 2, 1}},
			// At 40ms an exact bucket of the four calls (at 0, 0, 15ms
			// and 16ms: its TAT 40ms) is full. This one owes 15ms, 2
			// events (rounded up), until 55ms: the price of the bound.
			{at: 40 * ms, on: 1, do: peek, want: ok(10, 8, 15*ms), path: ratelimit.PathRedis},
			{at: 55 * ms, on: 1, do: peek, want: ok(10, 10, 0), path: ratelimit.PathRedis},
		},
	},
}

// PrefetchGCRA runs prefetchGCRACases on every backend with two Limiters
// on one store.
func PrefetchGCRA(t *testing.T, backends []Backend) {
	onTwo(t, backends, func(t *testing.T, b Backend) {
		for _, c := range prefetchGCRACases {
			t.Run(c.name, func(t *testing.T) {
				clk := testkit.NewClock()
				var mu sync.Mutex
				var last [2]ratelimit.Path
				opts := [2]ratelimit.Options{testkit.Options(clk), testkit.Options(clk)}
				for i := range opts {
					opts[i].OnDecision = func(d ratelimit.Decision) { mu.Lock(); last[i] = d.Path; mu.Unlock() }
				}
				l0, l1 := b.Two(t, opts[0], opts[1])
				runPrefetchGCRA(t, [2]*ratelimit.Limiter{l0, l1}, c.rule, clk.Set, c.steps, func(i int) ratelimit.Path { mu.Lock(); defer mu.Unlock(); return last[i] })
			})
		}
	})
}

func runPrefetchGCRA(t *testing.T, lims [2]*ratelimit.Limiter, rule ratelimit.Rule, setTime func(time.Time), steps []gcraPrefetchStep, path func(int) ratelimit.Path) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		l := lims[s.on]
		switch s.do {
		case gcraClose:
			l.Close()
			continue
		case gcraReturned:
			testkit.Eventually(t, "the lapsed grant's slots were given back", func() bool { return l.Stats().PrefetchSlotsReturned >= uint64(s.n) })
			continue
		case gcraStats:
			st := l.Stats()
			if got := [4]uint64{st.PrefetchGrants, st.PrefetchSlotsGranted, st.PrefetchSlotsUsed, st.PrefetchSlotsReturned}; got != s.stats {
				t.Fatalf("step %d: Limiter %d's grants, slots granted, used and returned: got %v, want %v", i, s.on, got, s.stats)
			}
			continue
		}
		setTime(testkit.Epoch().Add(s.at))
		var got R
		var err error
		switch s.do {
		case reset:
			err = l.Reset(ctx, rule, "k")
		case peek:
			got, err = l.Peek(ctx, rule, "k")
		default:
			got, err = l.AllowN(ctx, rule, "k", max(s.n, 1))
		}
		if err != nil {
			t.Fatalf("step %d (Limiter %d at %v): %v", i, s.on, s.at, err)
		}
		if s.do == reset {
			continue
		}
		if got != s.want || path(s.on) != s.path {
			t.Fatalf("step %d (Limiter %d at %v):\n got %+v on %v\nwant %+v on %v", i, s.on, s.at, got, path(s.on), s.want, s.path)
		}
	}
}

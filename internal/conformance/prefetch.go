package conformance

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// prefetchStep is one call of a prefetch case at an exact time since
// testkit.Epoch, with the path it must take.
type prefetchStep struct {
	at   time.Duration
	do   op // allow (AllowN when n > 1), peek or reset
	n    int
	want R
	path ratelimit.Path
	inst int // 0, or 1: the second Limiter of the fleet (Backend.Two), on the same clock and store
}

// hot is 10 per second with Prefetch 20ms: a process that allowed two
// events in the last 20ms takes slots for the next ones.
var hot = ratelimit.Rule{Name: "hot", Limit: ratelimit.Limit{Rate: 10, Window: sec}, Prefetch: 20 * ms}

// okAt is an allowed call's Result after a grant: ResetAfter is the
// window from the slot's stamp, the grant's time plus Prefetch.
func okAt(remaining int, reset time.Duration) R { return ok(10, remaining, reset) }

// fillBySlots are the steps of a pair that takes slots, uses them
// in-process, asks for the next when they run low and, the log full,
// finds none: its calls are then rejected in-process.
var fillBySlots = []prefetchStep{
	{at: 0, want: okAt(9, sec), path: ratelimit.PathRedis},
	{at: 0, want: okAt(8, sec), path: ratelimit.PathRedis},
	// Two events in the last 20ms: the third call asks for 2 + 1
	// slots, stamped at 20ms, and takes one. Remaining is the
	// log's count at the grant less what this process used of it.
	{at: 0, want: okAt(7, sec+20*ms), path: ratelimit.PathPrefetch},
	// Redis counts the grant's three slots.
	{at: 0, do: peek, want: okAt(5, sec+20*ms), path: ratelimit.PathRedis},
	{at: ms, want: okAt(6, sec+19*ms), path: ratelimit.PathPrefetch},
	// The grant's last slot, under a quarter of the demand (5)
	// left: this call asks for the next 5 (all that is free,
	// stamped 22ms) before it returns.
	{at: 2 * ms, want: okAt(5, sec+18*ms), path: ratelimit.PathPrefetch},
	{at: 2 * ms, n: 2, want: okAt(3, sec+20*ms), path: ratelimit.PathPrefetch},
	{at: 2 * ms, do: peek, want: no(10, 0, 998*ms, sec+20*ms), path: ratelimit.PathRedis},
	{at: 3 * ms, want: okAt(2, sec+19*ms), path: ratelimit.PathPrefetch},
	// The grant lapses at 22ms with 2 slots unused. A new
	// Prefetch-long bucket: the demand is the last one's (8); the
	// next call gives the 2 back with its request, and gets them.
	{at: 22 * ms, want: okAt(1, sec+20*ms), path: ratelimit.PathPrefetch},
	// Its last slot: the request it makes finds no slot. No grant
	// is asked for until one frees (1s, when the events at 0
	// leave), and meanwhile the pair's calls are rejected
	// in-process, as a rejection of one event at the request's
	// time answers them: the slots that free are left to the next
	// request, instead of going one by one to calls sent to Redis.
	{at: 22 * ms, want: okAt(0, sec+20*ms), path: ratelimit.PathPrefetch},
	{at: 22 * ms, do: peek, want: no(10, 0, 978*ms, sec+20*ms), path: ratelimit.PathRedis},
	{at: 23 * ms, want: no(10, 0, 977*ms, sec+19*ms), path: ratelimit.PathShield},
}

// hotFixed is hot's fixed window: 10 per second, windows aligned to the
// Unix epoch; testkit.Epoch is 123.456ms into one, which ends 876.544ms
// after it.
var hotFixed = ratelimit.Rule{Name: "hot", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 10, Window: sec}, Prefetch: 20 * ms}

// fixedEnd is the end of the window testkit.Epoch is in, from it.
const fixedEnd = 876544 * time.Microsecond

// grantBeforeFixedEnd are the steps of a hot fixed window's grant of three
// slots 5ms before its window ends: usable for those 5ms, one used.
var grantBeforeFixedEnd = []prefetchStep{
	{at: fixedEnd - 5*ms, want: ok(10, 9, 5*ms), path: ratelimit.PathRedis},
	{at: fixedEnd - 5*ms, want: ok(10, 8, 5*ms), path: ratelimit.PathRedis},
	{at: fixedEnd - 5*ms, want: ok(10, 7, 5*ms), path: ratelimit.PathPrefetch},
}

// prefetchCase is one table of the Prefetch suite.
type prefetchCase struct {
	name  string
	rule  ratelimit.Rule // hot when zero
	steps []prefetchStep
}

var prefetchCases = []prefetchCase{
	{
		name: "a cold pair asks Redis; a hot one takes slots, uses them in-process, asks for the next when they run low and gives back what lapsed, never over the Rate",
		steps: append(slices.Clone(fillBySlots),
			// A window after the first events only those two have left:
			// the slots count a window from their stamps, 20ms to 42ms,
			// later than the calls that used them (the price of the
			// bound). The pair is cold again: Redis decides.
			prefetchStep{at: sec, want: okAt(1, sec), path: ratelimit.PathRedis},
			prefetchStep{at: sec + 42*ms, want: okAt(8, sec), path: ratelimit.PathRedis},
		),
	},
	{
		name: "a pair Redis had no slot for, whose calls keep coming, asks again when a slot frees",
		steps: append(slices.Clone(fillBySlots),
			// Rejected in-process: the request waits for 1s.
			prefetchStep{at: 990 * ms, want: no(10, 0, 10*ms, 52*ms), path: ratelimit.PathShield},
			// A call rejected in the last Prefetch: the pair is still
			// hot. The events at 0 left: 2 slots (stamped 1.02s).
			prefetchStep{at: sec, want: okAt(1, sec+20*ms), path: ratelimit.PathPrefetch},
			// The last one: the request it makes finds none free,
			// until the oldest slot (stamped 20ms) leaves at 1.02s.
			prefetchStep{at: sec, want: okAt(0, sec+20*ms), path: ratelimit.PathPrefetch},
			prefetchStep{at: sec, want: no(10, 0, 20*ms, sec+20*ms), path: ratelimit.PathShield},
		),
	},
	{
		name: "a Reset voids the process' slots",
		steps: []prefetchStep{
			{at: 0, want: okAt(9, sec), path: ratelimit.PathRedis},
			{at: 0, want: okAt(8, sec), path: ratelimit.PathRedis},
			{at: 0, want: okAt(7, sec+20*ms), path: ratelimit.PathPrefetch},
			{at: ms, do: reset},
			{at: ms, do: peek, want: okAt(10, 0), path: ratelimit.PathRedis},
			// The pair is still hot: a new grant, from an empty log.
			{at: ms, want: okAt(9, sec+20*ms), path: ratelimit.PathPrefetch},
		},
	},
	// The exact log of a rule with Prefetch is the weighted log
	// (lua/weighted.lua): a grant is one entry of weight N. It decides as
	// a log of one member a slot would: these cases check the weights
	// where they count.
	{
		name: "weighted log: a grant leaves the window whole, at its stamp, and a give-back leaves the suffix it gave back",
		steps: append(slices.Clone(fillBySlots),
			// The log: 2 events at 0, then 3 slots stamped 20ms (the
			// first grant), 3 at 22ms (the second, its 2 unused given
			// back at 22ms) and 2 at 42ms (the third): 10.
			prefetchStep{at: sec + 20*ms - time.Microsecond, do: peek, want: okAt(2, 22*ms+time.Microsecond), path: ratelimit.PathRedis},
			prefetchStep{at: sec + 20*ms, do: peek, want: okAt(5, 22*ms), path: ratelimit.PathRedis},
			prefetchStep{at: sec + 22*ms, do: peek, want: okAt(8, 20*ms), path: ratelimit.PathRedis},
			prefetchStep{at: sec + 42*ms, do: peek, want: okAt(10, 0), path: ratelimit.PathRedis},
		),
	},
	{
		name: "weighted log: a rejection's RetryAfter walks the grants' weights to the kth event",
		steps: append(slices.Clone(fillBySlots[:7]),
			// The log: 2 events at 0, 3 slots stamped 20ms, 5 at 22ms.
			// A cold process' AllowN(6) needs 6 events gone: the 6th
			// oldest is the second grant's first slot.
			prefetchStep{at: 3 * ms, inst: 1, n: 6, want: no(10, 0, 1019*ms, 1019*ms), path: ratelimit.PathRedis},
		),
	},
	{
		name: "weighted log: the kth event to leave inside the first grant",
		steps: append(slices.Clone(fillBySlots[:7]),
			prefetchStep{at: 3 * ms, inst: 1, n: 4, want: no(10, 0, 1017*ms, 1019*ms), path: ratelimit.PathRedis},
		),
	},
	{
		name: "weighted log: a Reset takes the grants' weights with the log",
		steps: append(slices.Clone(fillBySlots[:7]),
			prefetchStep{at: 3 * ms, do: reset},
			// A cold process takes the whole Rate on Redis at once.
			prefetchStep{at: 4 * ms, inst: 1, n: 10, want: okAt(0, sec), path: ratelimit.PathRedis},
			prefetchStep{at: 4 * ms, inst: 1, do: peek, want: no(10, 0, sec, sec), path: ratelimit.PathRedis},
		),
	},
	{
		name: "a fixed window's slots are events of its window: a grant, its uses, a give-back, and no slot past the window's end",
		rule: hotFixed,
		steps: []prefetchStep{
			{at: 0, want: ok(10, 9, fixedEnd), path: ratelimit.PathRedis},
			{at: 0, want: ok(10, 8, fixedEnd), path: ratelimit.PathRedis},
			// Hot: the third call asks for 2 + 1 slots of the window and
			// takes one; Remaining is the count at the grant less what
			// this process used.
			{at: 0, want: ok(10, 7, fixedEnd), path: ratelimit.PathPrefetch},
			{at: 0, do: peek, want: ok(10, 5, fixedEnd), path: ratelimit.PathRedis},
			{at: ms, want: ok(10, 6, fixedEnd-ms), path: ratelimit.PathPrefetch},
			// The grant lapses at 20ms, one slot unused: it counts until
			// the next request gives it back (the price of the bound).
			{at: 21 * ms, do: peek, want: ok(10, 5, fixedEnd-21*ms), path: ratelimit.PathRedis},
			// The demand is the last 20ms' 4 events: the request gives
			// the slot back and asks for 4 + 1 of the 6 free.
			{at: 22 * ms, want: ok(10, 5, fixedEnd-22*ms), path: ratelimit.PathPrefetch},
			{at: 22 * ms, do: peek, want: ok(10, 1, fixedEnd-22*ms), path: ratelimit.PathRedis},
			{at: 23 * ms, want: ok(10, 4, fixedEnd-23*ms), path: ratelimit.PathPrefetch},
		},
	},
	{
		name: "a fixed window's slots are usable until their window ends",
		rule: hotFixed,
		steps: append(slices.Clone(grantBeforeFixedEnd),
			// The next window: the two left are not usable, and go back
			// with the next request, which takes 3 + 1 of the new window.
			prefetchStep{at: fixedEnd, want: ok(10, 9, sec), path: ratelimit.PathPrefetch},
			prefetchStep{at: fixedEnd, do: peek, want: ok(10, 6, sec), path: ratelimit.PathRedis},
		),
	},
	{
		name: "a bucket's grant takes its slots as events at the grant's time plus Prefetch, and settles at what was used",
		rule: hotGCRA,
		steps: []prefetchStep{
			// T = 100ms, a burst of 10.
			{at: 0, want: ok(10, 9, 100*ms), path: ratelimit.PathRedis},
			{at: 0, want: ok(10, 8, 200*ms), path: ratelimit.PathRedis},
			// Hot: 2 + 1 slots, taken as events at 20ms: the TAT
			// (200ms, past 20ms) moves to 500ms.
			{at: 0, want: ok(10, 7, 500*ms), path: ratelimit.PathPrefetch},
			{at: 0, do: peek, want: ok(10, 5, 500*ms), path: ratelimit.PathRedis},
			{at: ms, want: ok(10, 6, 499*ms), path: ratelimit.PathPrefetch},
			// The grant lapses at 20ms, one slot unused: it counts until
			// given back.
			{at: 21 * ms, do: peek, want: ok(10, 5, 479*ms), path: ratelimit.PathRedis},
			// The next request settles the grant at the 2 used (the TAT
			// back to 400ms) and takes 4 + 1: the TAT 900ms.
			{at: 22 * ms, want: ok(10, 5, 878*ms), path: ratelimit.PathPrefetch},
			{at: 22 * ms, do: peek, want: ok(10, 1, 878*ms), path: ratelimit.PathRedis},
		},
	},
}

// hotGCRA is hot's bucket: 10 a second, a burst of 10.
var hotGCRA = ratelimit.Rule{Name: "hot", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: sec}, Prefetch: 20 * ms}

// Prefetch runs prefetchCases on every backend with Redis: a local-only
// limiter decides every call in-process, and Prefetch changes nothing. A
// case with a step of the second Limiter (inst 1) runs on two Limiters of
// one store and one clock (Backend.Two), as two processes of a fleet.
func Prefetch(t *testing.T, backends []Backend) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			if b.Name == "local" {
				t.Skip("a local-only limiter decides every call in-process: Prefetch changes nothing")
			}
			for _, c := range allPrefetchCases() {
				t.Run(c.name, func(t *testing.T) {
					two := slices.ContainsFunc(c.steps, func(s prefetchStep) bool { return s.inst == 1 })
					if two && b.Two == nil {
						t.Skip("needs two limiters on one store (Backend.Two)")
					}
					clk := testkit.NewClock()
					var mu sync.Mutex
					var last [2]ratelimit.Path
					opts := func(i int) ratelimit.Options {
						o := testkit.Options(clk)
						o.OnDecision = func(d ratelimit.Decision) { mu.Lock(); last[i] = d.Path; mu.Unlock() }
						return o
					}
					var lims []*ratelimit.Limiter
					if two {
						l0, l1 := b.Two(t, opts(0), opts(1))
						lims = []*ratelimit.Limiter{l0, l1}
					} else {
						lims = []*ratelimit.Limiter{b.New(t, opts(0))}
					}
					rule := c.rule
					if rule.Name == "" {
						rule = hot
					}
					runPrefetch(t, lims, rule, clk.Set, c.steps, func(i int) ratelimit.Path { mu.Lock(); defer mu.Unlock(); return last[i] })
				})
			}
		})
	}
}

func runPrefetch(t *testing.T, lims []*ratelimit.Limiter, hot ratelimit.Rule, setTime func(time.Time), steps []prefetchStep, path func(int) ratelimit.Path) {
	t.Helper()
	ctx := context.Background()
	for i, s := range steps {
		setTime(testkit.Epoch().Add(s.at))
		l := lims[s.inst]
		var got R
		var err error
		switch {
		case s.do == reset:
			err = l.Reset(ctx, hot, "k")
		case s.do == peek:
			got, err = l.Peek(ctx, hot, "k")
		default:
			got, err = l.AllowN(ctx, hot, "k", max(s.n, 1))
		}
		if err != nil {
			t.Fatalf("step %d (L%d at %v): %v", i, s.inst, s.at, err)
		}
		if s.do == reset {
			continue
		}
		if got != s.want || path(s.inst) != s.path {
			t.Fatalf("step %d (L%d at %v):\n got %+v on %v\nwant %+v on %v", i, s.inst, s.at, got, path(s.inst), s.want, s.path)
		}
	}
}

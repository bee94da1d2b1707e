package reliability_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// The differential test's prefetch mode on the fixed window, the calendar
// quota and the approximate counter (issue 30): the sequences of
// TestDifferentialPrefetch, drawn from pfKindDiffRules, checked against
// the kind's model of the calls the fleet allowed, at their times: at
// every allowed call of n events at t,
//
//	(the events allowed in t's window, or t's period) + n <= Rate
//
// and for the counter, its estimate of those events at t (pfModelCount)
// + n <= Rate.
//
// A grant's slots are events of the window or period Redis took them in,
// usable until it ends: a fleet that used one past its end, or gave back
// one under a Reset it did not see, would admit what the model does not.
// A rejected call the model would have allowed is an under-admission,
// counted. Beside the model, every call allowed from a slot must come from
// a grant its Limiter made at that step or holds still usable (made less
// than Prefetch ago, and in the current window or period), not closed by
// a ban or its own Reset; one allowed from a slot granted before another
// Limiter's Reset is left out of the model, as Redis no longer counts it
// (see runPFDiff).

// pfQuotaZone is the quota's time zone: 11h59m59s east of UTC, so that
// its day ends 876.544ms after testkit.Epoch, within the sequences' reach.
var pfQuotaZone = time.FixedZone("UTC+11:59:59", 11*3600+59*60+59)

// pfKindDiffRules are the kinds' rules, each name once with Prefetch and
// once without (the same meter, decided on Redis). The quota allows 5 a
// day, so that the sequences exhaust its days (the one that ends at
// 876.544ms and the next), where a slot too many would show.
var pfKindDiffRules = func() []ratelimit.Rule {
	var out []ratelimit.Rule
	for _, r := range []ratelimit.Rule{
		{Name: "f", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 6, Window: 100 * time.Millisecond}, Prefetch: 10 * time.Millisecond},
		{Name: "g", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 3, Window: 30 * time.Millisecond}, Prefetch: 3 * time.Millisecond},
		{Name: "h:pen", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 8, Window: 200 * time.Millisecond}, Prefetch: 20 * time.Millisecond, Penalty: pfDiffPenalty},
		{Name: "c", Limit: ratelimit.Limit{Rate: 6, Window: 100 * time.Millisecond}, Approximate: true, Prefetch: 10 * time.Millisecond},
		{Name: "e", Limit: ratelimit.Limit{Rate: 3, Window: 30 * time.Millisecond}, Approximate: true, Prefetch: 3 * time.Millisecond},
		{Name: "d", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 5, Period: ratelimit.Day, Location: pfQuotaZone}, Prefetch: 20 * time.Millisecond},
	} {
		plain := r
		plain.Prefetch = 0
		out = append(out, r, plain)
	}
	return out
}()

// pfWindowed reports whether r's slots are events of a window or period
// (lua/grant.lua): a fixed window, a quota or an approximate counter.
func pfWindowed(r ratelimit.Rule) bool {
	return r.Kind == ratelimit.FixedWindow || r.Kind == ratelimit.CalendarQuota || r.Approximate
}

// pfPeriod returns the window or period of r that holds t (µs since the
// Unix epoch), its start and end in µs: a fixed window's, an approximate
// counter's fixed window, a quota's day; for the exact log, t's window
// looking back: (t - Window, t].
func pfPeriod(r ratelimit.Rule, t int64) (start, end int64) {
	switch {
	case r.Kind == ratelimit.CalendarQuota: // a day
		d := time.UnixMicro(t).In(r.Limit.Location)
		s := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, r.Limit.Location)
		return s.UnixMicro(), s.AddDate(0, 0, 1).UnixMicro()
	case pfWindowed(r):
		w := r.Limit.Window.Microseconds()
		return t / w * w, (t/w + 1) * w
	}
	return t - r.Limit.Window.Microseconds(), t
}

// pfEvent is n events the fleet allowed at at (µs).
type pfEvent struct{ at, n int64 }

// pfModelCount is what r's model counts at t (µs) of the events the fleet
// allowed: the exact log's in (t - Window, t]; a fixed window's or a
// quota's in t's window or period; an approximate counter's estimate,
// computed as lua/counter.lua computes it (the previous fixed window's
// events weighted by how much of it the sliding window still covers, plus
// the current one's, rounded up). The counter's model is its estimate of
// the events used, at their uses: Redis counts a grant's slots in the
// window of the grant, all at once, at least as many and no later in that
// window, so its estimate at each use is no lower.
func pfModelCount(r ratelimit.Rule, events []pfEvent, t int64) int64 {
	start, end := pfPeriod(r, t)
	var cur, prev int64
	for _, e := range events {
		switch {
		case !pfWindowed(r):
			if e.at > start {
				cur += e.n
			}
		case e.at >= start:
			cur += e.n
		case r.Approximate && e.at >= start-(end-start):
			prev += e.n
		}
	}
	if !r.Approximate {
		return cur
	}
	w := float64(end - start)
	return int64(math.Ceil(float64(prev)*((w-float64(t-start))/w) + float64(cur)))
}

// pfUsableUntil is when a grant of r made at at (µs) stops being usable:
// Prefetch after it, and no later than its window's or period's end.
func pfUsableUntil(r ratelimit.Rule, at int64) int64 {
	until := at + r.Prefetch.Microseconds()
	if pfWindowed(r) {
		_, end := pfPeriod(r, at)
		until = min(until, end)
	}
	return until
}

// pfEdge is, for a call at ct (since testkit.Epoch), when what it counted
// stops counting as it did: a window later for the exact log, the end of
// its window or period for the others.
func pfEdge(r ratelimit.Rule, ct time.Duration) time.Duration {
	if !pfWindowed(r) {
		return ct + r.Limit.Window
	}
	e := testkit.Epoch().UnixMicro()
	_, end := pfPeriod(r, e+ct.Microseconds())
	return time.Duration(end-e) * time.Microsecond
}

// TestDifferentialPrefetchKinds runs the kinds' prefetch mode (see the top
// of the file) on redis-server.
func TestDifferentialPrefetchKinds(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	runPFMode(t, pfDiffFleetNew(t, "dpk"), pfMode{name: "kinds' prefetch mode", bound: "its kind's bound", stream: 0x9f6, run: runPFDiff,
		gen: func(rng *rand.Rand, steps, limiters int) []pfStep {
			return genPFSequenceOf(rng, steps, limiters, len(pfDiffRules), len(pfKindDiffRules))
		}})
}

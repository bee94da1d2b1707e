package reliability_test

import (
	"math"
	"math/big"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// The reference model of the GCRA, calendar quota and fixed window kinds,
// written from docs/semantics.md's "Choosing a limit" rather than from the
// Go code: the bucket's theoretical arrival time (TAT) as an exact rational
// number of µs, a quota's count per period computed with the calendar, and
// a fixed window's count per epoch-aligned window. The log's model
// (diffmodel_test.go) dispatches here for rules of these kinds; penalties
// and bans are the same for every kind.

// kinds is the state of a bucket and of a quota.
type kinds struct {
	tat        *big.Rat // µs; nil: a full bucket
	qStart     int64    // µs: the period qCount belongs to
	qCount     int64
	quotaKnown bool
	fWin       int64 // the fixed window fCount belongs to (µs / Window)
	fCount     int64
	// cFixed are an approximate counter's events by fixed window (the
	// index of a Window-long window since the Unix epoch).
	cFixed map[int64]int64
}

// fixedCounts returns cFixed, made if need be.
func (k *kinds) fixedCounts(r ratelimit.Rule) map[int64]int64 {
	if k.cFixed == nil {
		k.cFixed = map[int64]int64{}
	}
	return k.cFixed
}

// floorDiv is a / b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// estimate is an approximate counter's count at t, as docs/semantics.md
// states it: the previous fixed window's events weighted by how much of it
// the sliding window still covers, plus the current window's, rounded up,
// computed with lua/counter.lua's floating-point operations in its order
// (prev * ((window - elapsed) / window) + cur), which both paths share.
func (k *kinds) estimate(r ratelimit.Rule, t int64) int64 {
	w := r.Limit.Window.Microseconds()
	idx := floorDiv(t, w)
	frac := float64(w-(t-idx*w)) / float64(w)
	return int64(math.Ceil(float64(float64(k.cFixed[idx-1])*frac) + float64(k.cFixed[idx])))
}

// estimateRetry is how long until n more events fit in an approximate
// counter whose estimate at t is count: the first µs at which the estimate
// has fallen to Rate - n, found by bisection (the estimate never grows
// while no event is recorded, and is 0 two windows after t's); a Window
// when n alone is more than the Rate.
func (k *kinds) estimateRetry(r ratelimit.Rule, t, count, n int64) int64 {
	need := int64(r.Limit.Rate) - n
	switch {
	case count <= need:
		return 0
	case need < 0:
		return r.Limit.Window.Microseconds()
	}
	w := r.Limit.Window.Microseconds()
	lo, hi := t+1, (floorDiv(t, w)+2)*w
	for lo < hi {
		mid := lo + (hi-lo)/2
		if k.estimate(r, mid) <= need {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo - t
}

// estimateReset is how long until an approximate counter counts nothing
// at t: the end of the window after the last one that holds events.
func (k *kinds) estimateReset(r ratelimit.Rule, t int64) int64 {
	w := r.Limit.Window.Microseconds()
	idx := floorDiv(t, w)
	switch {
	case k.cFixed[idx] > 0:
		return (idx+2)*w - t
	case k.cFixed[idx-1] > 0:
		return (idx+1)*w - t
	}
	return 0
}

// fixedView returns the fixed window t is in and its events: a clock that
// went back into an earlier window still counts in the later one.
func (k *kinds) fixedView(r ratelimit.Rule, t int64) (win, count int64) {
	w := r.Limit.Window.Microseconds()
	idx := t / w
	if t%w != 0 && t < 0 {
		idx--
	}
	if idx > k.fWin {
		return idx, 0
	}
	return k.fWin, k.fCount
}

// emission is Window/Rate in µs, exactly.
func emission(r ratelimit.Rule) *big.Rat {
	return big.NewRat(r.Limit.Window.Microseconds(), int64(r.Limit.Rate))
}

func burst(r ratelimit.Rule) int64 {
	if r.Limit.Burst > 0 {
		return int64(r.Limit.Burst)
	}
	return int64(r.Limit.Rate)
}

// owed returns max(0, TAT - t) in µs.
func (k *kinds) owed(t int64) *big.Rat {
	d := new(big.Rat)
	if k.tat != nil {
		d.Sub(k.tat, big.NewRat(t, 1))
	}
	if d.Sign() < 0 {
		d.SetInt64(0)
	}
	return d
}

// ceilRat returns ceil(x) for x >= 0.
func ceilRat(x *big.Rat) int64 {
	q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// period returns the bounds of the quota's period that holds t: midnight
// to midnight, Monday to Monday, the first of a month to the next.
func period(r ratelimit.Rule, t int64) (start, end int64) {
	loc := r.Limit.Location
	if loc == nil {
		loc = time.UTC
	}
	now := time.UnixMicro(t).In(loc)
	y, m, d := now.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, loc)
	switch r.Limit.Period {
	case ratelimit.Week:
		day = day.AddDate(0, 0, -((int(now.Weekday()) + 6) % 7))
		return day.UnixMicro(), day.AddDate(0, 0, 7).UnixMicro()
	case ratelimit.Month:
		first := time.Date(y, m, 1, 0, 0, 0, 0, loc)
		return first.UnixMicro(), first.AddDate(0, 1, 0).UnixMicro()
	}
	return day.UnixMicro(), day.AddDate(0, 0, 1).UnixMicro()
}

// count is the events the rule counts at t: live events of a log, tokens
// in use of a bucket (TAT - t in emission intervals, rounded up), events in
// a quota's period.
func (s *modelState) count(r ratelimit.Rule, t int64) int64 {
	if r.Approximate {
		return s.estimate(r, t)
	}
	switch r.Kind {
	case ratelimit.GCRA:
		return ceilRat(new(big.Rat).Quo(s.owed(t), emission(r)))
	case ratelimit.CalendarQuota:
		if start, _ := period(r, t); s.quotaKnown && s.qStart == start {
			return s.qCount
		}
		return 0
	case ratelimit.FixedWindow:
		_, n := s.fixedView(r, t)
		return n
	}
	return s.live(t, r.Limit.Window.Microseconds())
}

// retryFor is how long until n more events fit, given count: for a bucket
// until TAT + n·T - Burst·T, for a quota until its period ends.
func (s *modelState) retryFor(r ratelimit.Rule, t, count, n int64) int64 {
	if r.Approximate {
		return s.estimateRetry(r, t, count, n)
	}
	switch r.Kind {
	case ratelimit.GCRA:
		if count+n <= burst(r) {
			return 0
		}
		x := new(big.Rat).Add(s.owed(t), new(big.Rat).Mul(big.NewRat(n-burst(r), 1), emission(r)))
		return max(1, ceilRat(x))
	case ratelimit.CalendarQuota:
		if count+n <= int64(r.Limit.Rate) {
			return 0
		}
		_, end := period(r, t)
		return end - t
	case ratelimit.FixedWindow:
		if count+n <= int64(r.Limit.Rate) {
			return 0
		}
		win, _ := s.fixedView(r, t)
		return (win+1)*r.Limit.Window.Microseconds() - t
	}
	return s.retry(t, r.Limit.Window.Microseconds(), int64(r.Limit.Rate), count, n)
}

// resetFor is how long until nothing counts: until the TAT, or the end of
// a period that holds events.
func (s *modelState) resetFor(r ratelimit.Rule, t int64) int64 {
	if r.Approximate {
		return s.estimateReset(r, t)
	}
	switch r.Kind {
	case ratelimit.GCRA:
		return ceilRat(s.owed(t))
	case ratelimit.CalendarQuota:
		if s.count(r, t) == 0 {
			return 0
		}
		_, end := period(r, t)
		return end - t
	case ratelimit.FixedWindow:
		win, n := s.fixedView(r, t)
		if n == 0 {
			return 0
		}
		return (win+1)*r.Limit.Window.Microseconds() - t
	}
	return s.resetAfter(t, r.Limit.Window.Microseconds())
}

// record records n events at t, as one of the state's ops (see apply).
func (s *modelState) record(r ratelimit.Rule, t, n int64) {
	s.ops = append(s.ops, meterOp{rule: r, at: t, n: n})
	s.apply(r, t, n)
}

// apply records n events at t: the TAT moves to max(TAT, t) + n·T; a
// quota's count grows (from 0 in another period); an approximate
// counter's fixed window grows.
func (s *modelState) apply(r ratelimit.Rule, t, n int64) {
	if r.Approximate {
		s.fixedCounts(r)[floorDiv(t, r.Limit.Window.Microseconds())] += n
		return
	}
	switch r.Kind {
	case ratelimit.GCRA:
		base := big.NewRat(t, 1)
		if s.tat != nil && s.tat.Cmp(base) > 0 {
			base = s.tat
		}
		s.tat = new(big.Rat).Add(base, new(big.Rat).Mul(big.NewRat(n, 1), emission(r)))
	case ratelimit.CalendarQuota:
		s.qCount = s.count(r, t) + n
		s.qStart, _ = period(r, t)
		s.quotaKnown = true
	case ratelimit.FixedWindow:
		win, count := s.fixedView(r, t)
		s.fWin, s.fCount = win, count+n
	default:
		s.add(t, n)
	}
}

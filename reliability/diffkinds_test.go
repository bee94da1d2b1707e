package reliability_test

import (
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

// record records n events at t: the TAT moves to max(TAT, t) + n·T; a
// quota's count grows (from 0 in another period).
func (s *modelState) record(r ratelimit.Rule, t, n int64) {
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

package ratelimit

import (
	"fmt"
	"time"
)

// Kind says which algorithm a Rule enforces. The zero value is SlidingLog.
type Kind int

const (
	// SlidingLog, the default, allows at most Limit.Rate events in any
	// Limit.Window-long interval, exactly (one entry per event), or
	// approximately with Rule.Approximate (a sliding-window counter).
	SlidingLog Kind = iota
	// GCRA is the generic cell rate algorithm, a token bucket kept as one
	// number per key (the theoretical arrival time): a bucket of
	// Limit.Burst tokens (Limit.Rate when Burst is 0) that refills one token
	// every Window/Rate. It allows at most Burst + Rate·t/Window events in
	// any interval of length t: bursts up to Burst, then a smooth Rate per
	// Window.
	GCRA
	// CalendarQuota allows Limit.Rate events per calendar Limit.Period (day,
	// week from Monday, month) in Limit.Location, periods starting at local
	// midnight, daylight-saving days of 23 or 25 hours included.
	CalendarQuota
	// Concurrency allows at most Limit.Rate leases held at once per key:
	// Limiter.Acquire takes one, Lease.Release gives it back, and a lease
	// neither released nor renewed (Lease.Renew) expires Limit.Window
	// (its TTL, at least 100ms) after it was taken or last renewed. Burst,
	// Period and Location must be zero, and Approximate false. The rate
	// methods (Allow, AllowN, Wait, AllowAll, AllowGroup) refuse it: a
	// slot must be given back. See docs/concurrency.md.
	Concurrency
)

// Period is the calendar period of a CalendarQuota. The zero value is no
// period, which only the other kinds take.
type Period int

const (
	// Day runs from local midnight to the next local midnight (23, 24 or
	// 25 hours).
	Day Period = iota + 1
	// Week runs from Monday's local midnight to the next Monday's.
	Week
	// Month runs from local midnight of its first day to that of the next
	// month's first day.
	Month
)

// String returns the period's name: "day", "week" or "month".
func (p Period) String() string {
	switch p {
	case 0:
		return "none"
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Period(%d)", int(p))
}

// Limit is what a Rule allows. For a SlidingLog rule it is a rate: at most
// Rate events in any Window-long interval. An event recorded at t0 counts at
// time t while t - t0 < Window, so the window slides with every call; it
// never resets at fixed boundaries. For GCRA it is a bucket of Burst tokens
// refilled at Rate per Window; for a CalendarQuota, Rate events per Period in
// Location. Fields a kind does not use must be zero (ErrInvalidRule
// otherwise).
//
// Windows are kept in whole microseconds: a Window that is not a multiple of
// a microsecond is truncated.
type Limit struct {
	// Rate is how many events any Window-long interval may hold (>= 1); for
	// GCRA the tokens refilled per Window; for a CalendarQuota the events
	// per Period.
	Rate int
	// Window is the length of the sliding window, or GCRA's refill period
	// (>= 1µs). It must be 0 for a CalendarQuota.
	Window time.Duration
	// Burst is GCRA's bucket size: how many events may pass at once when
	// the bucket is full (>= 0). 0 means Rate. Other kinds take 0 only.
	Burst int
	// Period is a CalendarQuota's period (required there); other kinds
	// take 0 only.
	Period Period
	// Location is the time zone a CalendarQuota's periods follow; nil means
	// UTC. Other kinds take nil only.
	Location *time.Location
}

// PerSecond returns a Limit of rate events in any one-second interval.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Window: time.Second} }

// PerMinute returns a Limit of rate events in any one-minute interval.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Window: time.Minute} }

// PerHour returns a Limit of rate events in any one-hour interval.
func PerHour(rate int) Limit { return Limit{Rate: rate, Window: time.Hour} }

// String describes the limit: "5 per 1m0s" for a rate, "5 per 1s, burst
// 10" with a Burst, and "1000 per day in Europe/Berlin" for a quota.
func (l Limit) String() string {
	switch {
	case l.Period != 0:
		loc := "UTC"
		if l.Location != nil {
			loc = l.Location.String()
		}
		return fmt.Sprintf("%d per %v in %s", l.Rate, l.Period, loc)
	case l.Burst != 0:
		return fmt.Sprintf("%d per %v, burst %d", l.Rate, l.Window, l.Burst)
	}
	return fmt.Sprintf("%d per %v", l.Rate, l.Window)
}

// PeriodAt returns the bounds [start, end) of the calendar period that
// holds t in the limit's Location, for a limit with a Period; zero times
// otherwise.
func (l Limit) PeriodAt(t time.Time) (start, end time.Time) {
	if l.Period < Day || l.Period > Month {
		return time.Time{}, time.Time{}
	}
	loc := l.Location
	if loc == nil {
		loc = time.UTC
	}
	s, e := periodBounds(l.Period, loc, t.UnixMicro())
	return time.UnixMicro(s).In(loc), time.UnixMicro(e).In(loc)
}

package ratelimit

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// span is a calendar period computed once and reused by every call inside
// it (see periodBounds).
type span struct {
	loc        *time.Location
	period     Period
	start, end int64 // µs
}

// spans caches the last period computed per slot, a slot chosen by the
// location and the period: the hot path reads one atomic pointer instead
// of computing calendar dates, and allocates only when a period ends.
var spans [16]atomic.Pointer[span]

// periodBounds returns the bounds [start, end) in µs of the period that
// holds now in loc. Days start at local midnight and end at the next one,
// however long the day (23 or 25 hours on a daylight-saving change); weeks
// start on Monday; months on their first day. The dates are normalised by
// time.Date.
func periodBounds(period Period, loc *time.Location, now int64) (start, end int64) {
	slot := &spans[(uintptr(unsafe.Pointer(loc))>>4^uintptr(period))%uintptr(len(spans))]
	if s := slot.Load(); s != nil && s.loc == loc && s.period == period && s.start <= now && now < s.end {
		return s.start, s.end
	}
	t := time.UnixMicro(now).In(loc)
	y, m, d := t.Date()
	var from, to time.Time
	switch period {
	case Week:
		d -= (int(t.Weekday()) + 6) % 7 // back to Monday
		from, to = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+7, 0, 0, 0, 0, loc)
	case Month:
		from, to = time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		from, to = time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
	start, end = from.UnixMicro(), to.UnixMicro()
	if start <= now && now < end {
		slot.Store(&span{loc: loc, period: period, start: start, end: end})
	}
	return start, end
}

// quotaKind is the calendar quota's algorithm (Kind CalendarQuota): the
// period and its count in Redis (lua/quota.lua), a meter.Quota here. The call's
// time fixes its period.
type quotaKind struct{}

func (quotaKind) name() string                            { return "calendar quota" }
func (quotaKind) capacity() string                        { return "Rate" }
func (quotaKind) timed() bool                             { return true }
func (quotaKind) letter() byte                            { return 'q' }
func (quotaKind) windowed() bool                          { return false }
func (quotaKind) grouped() string                         { return "" }
func (quotaKind) leased() bool                            { return false }
func (quotaKind) degrade(p plan, _ *settings) plan        { return p }
func (quotaKind) named() bool                             { return false }
func (quotaKind) stamp(p plan, _ int64) int64             { return p.start }
func (quotaKind) undoArgs(p plan, _ int64) (int64, int64) { return p.start, 0 }

// setTime sets the bounds of the period that holds now.
func (quotaKind) setTime(p plan, now int64) plan {
	p.start, p.end = periodBounds(p.period, p.loc, now)
	return p
}

func (quotaKind) compile(r Rule, p plan) (plan, string) {
	l := &r.Limit
	switch {
	case l.Burst != 0:
		return p, fmt.Sprintf("Burst %d is for GCRA only", l.Burst)
	case l.Period < Day || l.Period > Month:
		return p, fmt.Sprintf("unknown Period %d (Day, Week or Month)", int(l.Period))
	case l.Window != 0:
		return p, fmt.Sprintf("Window %v must be 0 for a calendar quota (its Period is the window)", l.Window)
	}
	p.period, p.loc = l.Period, l.Location
	if p.loc == nil {
		p.loc = time.UTC
	}
	return p, ""
}

func (quotaKind) scripts() *kindScripts { return quotaScripts }

// quotaScripts are the entries composed with lua/quota.lua's pieces
// (see composeKind).
var quotaScripts = composeKind("quota")

// args: the bounds of the call's period.
func (quotaKind) args(p plan) (int64, int64, bool) { return p.start, p.end, false }

// shortReset: an allowing call's reset is until its period ends
// (quota.record), from the time Go sent (a quota's script always gets it).
func (quotaKind) shortReset(p plan, now int64) int64 { return p.end - now }

// shieldMark is the period's start: a rejection of one period never
// answers a call in the next.
func (quotaKind) shieldMark(p plan) int64 { return p.start }
func (quotaKind) horizon(p plan) int64    { return p.end }

// dueFrom: events of a period that has ended no longer count.
func (quotaKind) dueFrom(p plan, now int64) int64 {
	start, _ := periodBounds(p.period, p.loc, now)
	return start
}

// kept: until the period ends.
func (quotaKind) kept(p plan, now int64) int64 {
	_, end := periodBounds(p.period, p.loc, now)
	return end - now
}

// lost: a quota counts every event of its period, so what Redis lost at
// at counts, whole, while now is in the period that held at (p's, set for
// now: see setTime).
func (quotaKind) lost(p plan, at, now, events int64) (int64, bool) {
	if p.end > p.start && at >= p.start {
		return events, true
	}
	return 0, false
}

func (quotaKind) meter(ms *meterTables, f meterFit, h uint64, now int64, create bool, k lkey) (meter.Meter, bool) {
	q := metersOf[meter.Quota](ms, quotaMeters).GetOrAdd(&k, h, now, create)
	if q == nil {
		return nil, false
	}
	q.SetPeriod(f.start, f.end)
	return q, true
}

func (quotaKind) unrecord(ms *meterTables, k lkey, h uint64, f meterFit, _, n int64) {
	if q := metersOf[meter.Quota](ms, quotaMeters).Peek(&k, h); q != nil {
		q.Unrecord(f.start, n)
	}
}

func (quotaKind) dropEmpty(ms *meterTables, k lkey, h uint64, _ int64) {
	if q := metersOf[meter.Quota](ms, quotaMeters).Peek(&k, h); q != nil && q.Empty() {
		metersOf[meter.Quota](ms, quotaMeters).Remove(&k, h)
	}
}

// quotaMeters is the slot of the shard's table of quotas.
var quotaMeters = meterSlot('q')

func (quotaKind) newMeters(size int) meterTable { return newMeters[meter.Quota](size) }
func (quotaKind) meterName() string             { return "quota" }

package ratelimit

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// quota is the local path's calendar quota of one key (Kind CalendarQuota):
// the start of the period its count belongs to and the count. lua/quota.lua
// keeps the same two numbers in Redis. A count of another period than the
// call's counts as 0. Its shard's lock guards it.
type quota struct {
	start int64 // µs: the period the count belongs to
	n     int64 // events in it
	// The call's period, set by localShard.meter from its plan.
	at, end int64
}

func (q *quota) prune(int64, int64) {}

func (q *quota) count(int64, int64) int64 {
	if q.start != q.at {
		return 0
	}
	return q.n
}

// retryIn returns how long until the next period starts: a spent quota
// comes back only then.
func (q *quota) retryIn(now, _, _, _ int64) int64 { return q.end - now }

func (q *quota) reset(now, window int64, justAdded bool) int64 {
	if justAdded || q.count(now, window) > 0 {
		return q.end - now
	}
	return 0
}

func (q *quota) add(now, window, n int64) {
	q.n = q.count(now, window) + n
	q.start = q.at
}

// copyFrom merges what Redis answered into the quota: count events in the
// call's period, unless the quota counts more of them itself.
func (q *quota) copyFrom(_, count, _ int64) {
	if q.start != q.at {
		q.start, q.n = q.at, 0
	}
	q.n = max(q.n, count)
}

// unrecord takes back n events recorded in the period that starts at start.
func (q *quota) unrecord(start, n int64) {
	if q.start == start {
		q.n = max(0, q.n-n)
	}
}

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

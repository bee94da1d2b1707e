package meter

// Quota is the local path's calendar quota of one key (Kind
// CalendarQuota): the start of the period its count belongs to and the
// count. lua/quota.lua keeps the same two numbers in Redis. A count of
// another period than the call's counts as 0. The zero Quota is empty;
// SetPeriod gives it the call's period before any other method is called.
type Quota struct {
	start int64 // µs: the period the count belongs to
	n     int64 // events in it
	// The call's period, set by SetPeriod from its plan.
	at, end int64
}

// SetPeriod sets the call's period: [start, end), in µs.
func (q *Quota) SetPeriod(start, end int64) { q.at, q.end = start, end }

// Prune does nothing: a count of another period counts as 0 until events
// are recorded in the call's.
func (q *Quota) Prune(int64, int64) {}

// Count returns the events of the call's period.
func (q *Quota) Count(int64, int64) int64 {
	if q.start != q.at {
		return 0
	}
	return q.n
}

// RetryIn returns how long until the next period starts: a spent quota
// comes back only then.
func (q *Quota) RetryIn(now, _, _, _ int64) int64 { return q.end - now }

// Reset returns how long until the call's period ends, when it counts
// events (or justAdded some).
func (q *Quota) Reset(now, window int64, justAdded bool) int64 {
	if justAdded || q.Count(now, window) > 0 {
		return q.end - now
	}
	return 0
}

// Add records n events in the call's period.
func (q *Quota) Add(now, window, n int64) {
	q.n = q.Count(now, window) + n
	q.start = q.at
}

// CopyFrom merges what Redis answered into the quota: count events in the
// call's period less the givenBack that settles may have given back since,
// unless the quota counts more of them itself.
func (q *Quota) CopyFrom(_, count, _, givenBack int64) {
	if q.start != q.at {
		q.start, q.n = q.at, 0
	}
	q.n = max(q.n, count-givenBack)
}

// ReplaceFrom sets the quota to count events in the call's period less the
// givenBack that settles may have given back since (see CountReplacer).
func (q *Quota) ReplaceFrom(_, count, _, givenBack int64) {
	q.start, q.n = q.at, max(0, count-givenBack)
}

// Unrecord takes back n events recorded in the period that starts at start.
func (q *Quota) Unrecord(start, n int64) {
	if q.start == start {
		q.n = max(0, q.n-n)
	}
}

// Empty reports whether the quota counts no events.
func (q *Quota) Empty() bool { return q.n == 0 }

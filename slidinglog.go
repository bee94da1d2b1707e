package ratelimit

// event is n events recorded at one instant (µs). Events that share an
// instant are kept as one entry; the Redis log keeps one member each, which
// counts the same.
type event struct {
	at int64
	n  int64
}

// slidingLog is the local path's exact sliding-window log of one key: the
// events in ascending time order, events[head:] still unexpired as of the
// last trim. It is not safe for concurrent use; its shard's lock guards it.
type slidingLog struct {
	events  []event
	head    int
	total   int64 // sum of n over events[head:]
	touched int64 // µs when the LRU last moved this log to its front
}

// trim drops the events that have left the window at now: an event at t0
// counts while now - t0 < window.
func (l *slidingLog) trim(now, window int64) {
	cut := now - window
	for l.head < len(l.events) && l.events[l.head].at <= cut {
		l.total -= l.events[l.head].n
		l.head++
	}
	if l.head == len(l.events) {
		l.events, l.head = l.events[:0], 0
	}
}

// count returns the events in the log (call trim first).
func (l *slidingLog) count() int64 { return l.total }

// retryAfter returns how long after now enough events leave the window for n
// more to fit under rate: when the k-th oldest event leaves, at most rate - n
// remain. A request that can never fit (n > rate) waits a whole window.
func (l *slidingLog) retryAfter(now, window, rate, n int64) int64 {
	k := l.total + n - rate
	if k <= 0 {
		return 0
	}
	if n > rate {
		return window
	}
	var seen int64
	for _, e := range l.events[l.head:] {
		seen += e.n
		if seen >= k {
			return e.at + window - now
		}
	}
	return window // unreachable: k <= total
}

// resetAfter returns how long after now the window holds no events.
func (l *slidingLog) resetAfter(now, window int64) int64 {
	if l.head == len(l.events) {
		return 0
	}
	left := l.events[len(l.events)-1].at + window - now
	if left < 0 {
		return 0
	}
	return left
}

// add records n events at now, keeping time order even when the clock went
// backwards. It reuses the slice's room before it grows it.
func (l *slidingLog) add(now, n int64) {
	l.total += n
	last := len(l.events) - 1
	if last >= l.head && l.events[last].at == now {
		l.events[last].n += n
		return
	}
	if l.head > 0 && len(l.events) == cap(l.events) {
		live := copy(l.events, l.events[l.head:])
		l.events, l.head = l.events[:live], 0
		last = live - 1
	}
	if last < l.head || l.events[last].at < now {
		l.events = append(l.events, event{at: now, n: n})
		return
	}
	// The clock went backwards: insert in order, merging with an equal time.
	i := l.head
	for i < len(l.events) && l.events[i].at < now {
		i++
	}
	if l.events[i].at == now {
		l.events[i].n += n
		return
	}
	l.events = append(l.events, event{})
	copy(l.events[i+1:], l.events[i:])
	l.events[i] = event{at: now, n: n}
}

// bound drops the oldest events beyond max, so that a log mirrored from
// Redis cannot grow past the rate it serves.
func (l *slidingLog) bound(max int64) {
	for l.total > max && l.head < len(l.events) {
		e := &l.events[l.head]
		drop := l.total - max
		if drop >= e.n {
			l.total -= e.n
			l.head++
			continue
		}
		e.n -= drop
		l.total -= drop
	}
}

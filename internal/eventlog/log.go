// Package eventlog is the exact sliding-window log of one key in process:
// its events in time order in a ring buffer that a steady key reuses
// without allocating, counted, trimmed and taken back as lua/sliding.lua
// does in Redis, so that both decide alike. A Log is not safe for
// concurrent use: its owner's lock guards it.
package eventlog

// Event is n events recorded at one instant (µs). Events that share an
// instant are kept as one entry; the Redis log keeps one member each, which
// counts the same.
type Event struct {
	At int64 // µs
	N  int64
}

// Log is the exact sliding-window log of one key: the
// events in ascending time order, in a ring buffer. Entries are numbered
// by position, head the oldest and tail one past the newest; entry i is
// ring[i mod len(ring)], so numbers stay valid while the head moves on and
// when the ring grows. Events at or before gone have left the log (see
// prune) even while they still occupy the ring: they are dropped in bulk,
// when it is full, so that a call touches only the newest events and the
// oldest live one. The ring doubles only when it is full of events that
// still count (or may again, see prune): an allowing call never lets more
// than the rule's rate into a window, so its room stays bounded by what two
// windows at that rate hold, and a steady key reuses it without
// allocating. It is not safe for concurrent use.
type Log struct {
	ring       []Event // len(ring) is 0 or a power of two
	head, tail int
	total      int64 // sum of n over the entries, gone events included
	gone       int64 // events at or before gone no longer count

	// A cache of live: entries first to tail are the events later than
	// cut, and they number firstTotal; next is entry first's time (MaxTime
	// when first is the tail), so that a call in which no Event leaves the
	// window does not read the events at all. Time mostly moves forward,
	// so live only advances first; anything else that moves events resets
	// it (first < head means unknown).
	first      int
	firstTotal int64
	cut        int64
	next       int64
}

// minRing is the room of a log's first ring.
const minRing = 2

// at returns entry i, head <= i < tail.
func (l *Log) at(i int) *Event { return &l.ring[uint(i)&uint(len(l.ring)-1)] }

// grow doubles the ring, keeping every entry's number.
func (l *Log) grow() {
	ring := make([]Event, max(minRing, 2*len(l.ring)))
	mask := uint(len(ring) - 1)
	for i := l.head; i < l.tail; i++ {
		ring[uint(i)&mask] = *l.at(i)
	}
	l.ring = ring
}

// AppendEntries appends the entries, the oldest first, up to limit of them,
// to dst, and reports whether the log holds more.
func (l *Log) AppendEntries(dst []Event, limit int) ([]Event, bool) {
	end := min(l.tail, l.head+limit)
	for i := l.head; i < end; i++ {
		dst = append(dst, *l.at(i))
	}
	return dst, end < l.tail
}

// MaxTime is later than every Event.
const MaxTime = 1<<63 - 1

// New returns an empty log.
func New() Log {
	return Log{gone: -MaxTime - 1, first: -1}
}

// Drop removes the events at or before cut from the ring.
func (l *Log) Drop(cut int64) {
	for l.head < l.tail && l.at(l.head).At <= cut {
		l.total -= l.at(l.head).N
		l.head++
	}
	if l.head == l.tail {
		l.head, l.tail = 0, 0
		l.forget()
	}
}

// forget drops live's cache after events moved.
func (l *Log) forget() { l.first = -1 }

// Record records n events at now, keeping time order even when the clock
// went backwards. It reuses the ring's room before it grows it.
func (l *Log) Record(now, n int64) {
	if now <= l.gone || l.tail-l.head == len(l.ring) {
		// Events gone before the clock went back this far would count
		// again beside the new one; and a full ring makes room first.
		l.Drop(l.gone)
		l.gone = -MaxTime - 1
	}
	l.total += n
	last := l.tail - 1
	if last >= l.head && l.at(last).At == now {
		l.at(last).N += n
		if l.first >= l.head && l.first <= last && now > l.cut {
			l.firstTotal += n
		}
		return
	}
	if l.tail-l.head == len(l.ring) {
		l.grow() // full of events that count: twice the room
	}
	if last < l.head || l.at(last).At < now {
		switch {
		case l.first < l.head:
		case now > l.cut:
			l.firstTotal += n
			if l.first == l.tail {
				l.next = now
			}
		default: // already outside the window live last looked at
			l.forget()
		}
		*l.at(l.tail) = Event{At: now, N: n}
		l.tail++
		return
	}
	l.forget()
	// The clock went backwards: insert in order, merging with an equal time.
	i := l.head
	for i < l.tail && l.at(i).At < now {
		i++
	}
	if e := l.at(i); e.At == now {
		e.N += n
		return
	}
	for j := l.tail; j > i; j-- {
		*l.at(j) = *l.at(j - 1)
	}
	*l.at(i) = Event{At: now, N: n}
	l.tail++
}

// Remove takes back up to n events recorded at at.
func (l *Log) Remove(at, n int64) {
	defer l.forget()
	l.Drop(l.gone)
	for i := l.tail - 1; i >= l.head; i-- {
		e := l.at(i)
		if e.At != at {
			continue
		}
		n = min(n, e.N)
		e.N -= n
		l.total -= n
		if e.N == 0 {
			for j := i + 1; j < l.tail; j++ {
				*l.at(j - 1) = *l.at(j)
			}
			l.tail--
		}
		return
	}
}

// Subtract takes back the events of sent, whose times ascend, from the
// log, each at most as many as the log holds at its time, and returns how
// many it took back. One pass over both, for the write-back (writeback.go).
func (l *Log) Subtract(sent []Event) (removed int64) {
	defer l.forget()
	w, j := l.head, 0
	for i := l.head; i < l.tail; i++ {
		e := *l.at(i)
		for j < len(sent) && sent[j].At < e.At {
			j++
		}
		if j < len(sent) && sent[j].At == e.At {
			take := min(e.N, sent[j].N)
			e.N -= take
			removed += take
			j++
		}
		if e.N > 0 {
			*l.at(w) = e
			w++
		}
	}
	l.tail = w
	l.total -= removed
	if l.head == l.tail {
		l.head, l.tail = 0, 0
	}
	return removed
}

// Oldest returns the time of the oldest event still in the window at now
// (MaxTime when there is none).
func (l *Log) Oldest(now, window int64) int64 {
	first, _ := l.live(now, window)
	if first < l.tail {
		return l.at(first).At
	}
	return MaxTime
}

// Since returns how many events the log holds at from or later (the events of a write-back's debt that
// still count).
func (l *Log) Since(from int64) (n int64) {
	for i := l.head; i < l.tail; i++ {
		if e := l.at(i); e.At >= from && e.At > l.gone {
			n += e.N
		}
	}
	return n
}

// Bound drops the oldest events beyond limit, so that a log mirrored from
// Redis cannot grow past the rate it serves.
func (l *Log) Bound(limit int64) {
	defer l.forget()
	l.Drop(l.gone)
	for l.total > limit && l.head < l.tail {
		e := l.at(l.head)
		drop := l.total - limit
		if drop >= e.N {
			l.total -= e.N
			l.head++
			continue
		}
		e.N -= drop
		l.total -= drop
	}
}

// Prune drops the events more than two windows old, as lua/sliding.lua's
// trim does: counting goes by time (live), so pruning only bounds memory,
// and the extra window keeps what a call stamped up to a window earlier
// than calls already decided still counts. It only moves gone: the ring
// sheds them when it is full (see Record), and live and reset skip them
// meanwhile. Every Event at or before gone was in the log when gone
// reached it (Record drops them before it adds one at or before gone),
// so gone events are exactly those a trim at each call would have dropped.
func (l *Log) Prune(now, window int64) { l.gone = max(l.gone, now-2*window) }

// live returns where the events still in the window at now start, and how
// many there are, without trimming.
func (l *Log) live(now, window int64) (int, int64) {
	cut := max(now-window, l.gone)
	if l.first < l.head || cut < l.cut {
		l.first, l.firstTotal = l.head, l.total
	} else if l.next > cut {
		l.cut = cut
		return l.first, l.firstTotal
	}
	for l.first < l.tail && l.at(l.first).At <= cut {
		l.firstTotal -= l.at(l.first).N
		l.first++
	}
	l.next = MaxTime
	if l.first < l.tail {
		l.next = l.at(l.first).At
	}
	l.cut = cut
	return l.first, l.firstTotal
}

// Count returns the events in the window at now.
func (l *Log) Count(now, window int64) int64 {
	_, total := l.live(now, window)
	return total
}

// RetryIn returns how long until enough events leave the window for asked
// more to fit under rate: when the k-th oldest live Event leaves, at most
// rate - asked remain. A request that can never fit (asked > rate) waits a
// whole window.
func (l *Log) RetryIn(now, window, rate, asked int64) int64 {
	first, total := l.live(now, window)
	k := total + asked - rate
	if k <= 0 {
		return 0
	}
	if asked > rate {
		return window
	}
	var seen int64
	for i := first; i < l.tail; i++ {
		e := l.at(i)
		seen += e.N
		if seen >= k {
			return e.At + window - now
		}
	}
	return window // unreachable: k <= total
}

// Reset returns how long until the window holds no events: the window
// itself right after an add, as lua/decide.lua answers without looking the
// newest Event up.
func (l *Log) Reset(now, window int64, justAdded bool) int64 {
	if justAdded {
		return window
	}
	if l.head == l.tail || l.at(l.tail-1).At <= l.gone {
		return 0
	}
	return max(0, l.at(l.tail-1).At+window-now)
}

// Add records n events at now (the window is the log's caller's).
func (l *Log) Add(now, _, n int64) { l.Record(now, n) }

// Total returns the events the log holds, those that no longer count
// included until they are dropped.
func (l *Log) Total() int64 { return l.total }

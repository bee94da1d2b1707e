package ratelimit

// event is n events recorded at one instant (µs). Events that share an
// instant are kept as one entry; the Redis log keeps one member each, which
// counts the same.
type event struct {
	at int64
	n  int64
}

// slidingLog is the local path's exact sliding-window log of one key: the
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
// allocating. It is not safe for concurrent use; its shard's lock guards
// it.
type slidingLog struct {
	ring       []event // len(ring) is 0 or a power of two
	head, tail int
	total      int64 // sum of n over the entries, gone events included
	gone       int64 // events at or before gone no longer count

	// A cache of live: entries first to tail are the events later than
	// cut, and they number firstTotal; next is entry first's time (maxTime
	// when first is the tail), so that a call in which no event leaves the
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
func (l *slidingLog) at(i int) *event { return &l.ring[uint(i)&uint(len(l.ring)-1)] }

// grow doubles the ring, keeping every entry's number.
func (l *slidingLog) grow() {
	ring := make([]event, max(minRing, 2*len(l.ring)))
	mask := uint(len(ring) - 1)
	for i := l.head; i < l.tail; i++ {
		ring[uint(i)&mask] = *l.at(i)
	}
	l.ring = ring
}

// appendEntries appends the entries, the oldest first, up to limit of them,
// to dst, and reports whether the log holds more.
func (l *slidingLog) appendEntries(dst []event, limit int) ([]event, bool) {
	end := min(l.tail, l.head+limit)
	for i := l.head; i < end; i++ {
		dst = append(dst, *l.at(i))
	}
	return dst, end < l.tail
}

// maxTime is later than every event.
const maxTime = 1<<63 - 1

// newSlidingLog returns an empty log.
func newSlidingLog() slidingLog {
	return slidingLog{gone: -maxTime - 1, first: -1}
}

// drop removes the events at or before cut from the ring.
func (l *slidingLog) drop(cut int64) {
	for l.head < l.tail && l.at(l.head).at <= cut {
		l.total -= l.at(l.head).n
		l.head++
	}
	if l.head == l.tail {
		l.head, l.tail = 0, 0
		l.forget()
	}
}

// forget drops live's cache after events moved.
func (l *slidingLog) forget() { l.first = -1 }

// addEvents records n events at now, keeping time order even when the clock
// went backwards. It reuses the ring's room before it grows it.
func (l *slidingLog) addEvents(now, n int64) {
	if now <= l.gone || l.tail-l.head == len(l.ring) {
		// Events gone before the clock went back this far would count
		// again beside the new one; and a full ring makes room first.
		l.drop(l.gone)
		l.gone = -maxTime - 1
	}
	l.total += n
	last := l.tail - 1
	if last >= l.head && l.at(last).at == now {
		l.at(last).n += n
		if l.first >= l.head && l.first <= last && now > l.cut {
			l.firstTotal += n
		}
		return
	}
	if l.tail-l.head == len(l.ring) {
		l.grow() // full of events that count: twice the room
	}
	if last < l.head || l.at(last).at < now {
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
		*l.at(l.tail) = event{at: now, n: n}
		l.tail++
		return
	}
	l.forget()
	// The clock went backwards: insert in order, merging with an equal time.
	i := l.head
	for i < l.tail && l.at(i).at < now {
		i++
	}
	if e := l.at(i); e.at == now {
		e.n += n
		return
	}
	for j := l.tail; j > i; j-- {
		*l.at(j) = *l.at(j - 1)
	}
	*l.at(i) = event{at: now, n: n}
	l.tail++
}

// removeEvents takes back up to n events recorded at at.
func (l *slidingLog) removeEvents(at, n int64) {
	defer l.forget()
	l.drop(l.gone)
	for i := l.tail - 1; i >= l.head; i-- {
		e := l.at(i)
		if e.at != at {
			continue
		}
		n = min(n, e.n)
		e.n -= n
		l.total -= n
		if e.n == 0 {
			for j := i + 1; j < l.tail; j++ {
				*l.at(j - 1) = *l.at(j)
			}
			l.tail--
		}
		return
	}
}

// subtract takes back the events of sent, whose times ascend, from the
// log, each at most as many as the log holds at its time, and returns how
// many it took back. One pass over both, for the write-back (writeback.go).
func (l *slidingLog) subtract(sent []event) (removed int64) {
	defer l.forget()
	w, j := l.head, 0
	for i := l.head; i < l.tail; i++ {
		e := *l.at(i)
		for j < len(sent) && sent[j].at < e.at {
			j++
		}
		if j < len(sent) && sent[j].at == e.at {
			take := min(e.n, sent[j].n)
			e.n -= take
			removed += take
			j++
		}
		if e.n > 0 {
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

// ager is a meter that knows when its oldest event still in the window was
// recorded, which lets a script tell the events a Reset voided from those
// it did not (see held.since): the sliding log is one.
type ager interface {
	// oldest returns the time of the oldest event still in the window at
	// now (maxTime when there is none).
	oldest(now, window int64) int64
}

// oldest returns the time of the oldest event still in the window at now
// (maxTime when there is none).
func (l *slidingLog) oldest(now, window int64) int64 {
	first, _ := l.live(now, window)
	if first < l.tail {
		return l.at(first).at
	}
	return maxTime
}

// since returns how many events the log holds at from or later (a debt's
// events that still count, see writeback.go's dueFrom).
func (l *slidingLog) since(from int64) (n int64) {
	for i := l.head; i < l.tail; i++ {
		if e := l.at(i); e.at >= from && e.at > l.gone {
			n += e.n
		}
	}
	return n
}

// bound drops the oldest events beyond limit, so that a log mirrored from
// Redis cannot grow past the rate it serves.
func (l *slidingLog) bound(limit int64) {
	defer l.forget()
	l.drop(l.gone)
	for l.total > limit && l.head < l.tail {
		e := l.at(l.head)
		drop := l.total - limit
		if drop >= e.n {
			l.total -= e.n
			l.head++
			continue
		}
		e.n -= drop
		l.total -= drop
	}
}

// meter is what a local decision needs of a key's record of events: the
// exact sliding log or the approximate counter. Only prune and add change
// it, where the scripts write: a peek, a rejection and a banned call read
// without writing on both paths, so a clock that later goes backwards finds
// the same state in Redis and locally.
type meter interface {
	// prune drops what no call can count any more, as an allowing or
	// rejecting call does in Redis.
	prune(now, window int64)
	// count returns the count at now.
	count(now, window int64) int64
	// retryIn returns how long until asked more events fit under rate;
	// called only when they do not fit now.
	retryIn(now, window, rate, asked int64) int64
	// reset returns how long until the record is empty; justAdded says the
	// call has just added events at now.
	reset(now, window int64, justAdded bool) int64
	// add records n events at now.
	add(now, window, n int64)
}

// prune drops the events more than two windows old, as lua/sliding.lua's
// trim does: counting goes by time (live), so pruning only bounds memory,
// and the extra window keeps what a call stamped up to a window earlier
// than calls already decided still counts. It only moves gone: the ring
// sheds them when it is full (see addEvents), and live and reset skip them
// meanwhile. Every event at or before gone was in the log when gone
// reached it (addEvents drops them before it adds one at or before gone),
// so gone events are exactly those a trim at each call would have dropped.
func (l *slidingLog) prune(now, window int64) { l.gone = max(l.gone, now-2*window) }

// live returns where the events still in the window at now start, and how
// many there are, without trimming.
func (l *slidingLog) live(now, window int64) (int, int64) {
	cut := max(now-window, l.gone)
	if l.first < l.head || cut < l.cut {
		l.first, l.firstTotal = l.head, l.total
	} else if l.next > cut {
		l.cut = cut
		return l.first, l.firstTotal
	}
	for l.first < l.tail && l.at(l.first).at <= cut {
		l.firstTotal -= l.at(l.first).n
		l.first++
	}
	l.next = maxTime
	if l.first < l.tail {
		l.next = l.at(l.first).at
	}
	l.cut = cut
	return l.first, l.firstTotal
}

func (l *slidingLog) count(now, window int64) int64 {
	_, total := l.live(now, window)
	return total
}

// retryIn returns how long until enough events leave the window for asked
// more to fit under rate: when the k-th oldest live event leaves, at most
// rate - asked remain. A request that can never fit (asked > rate) waits a
// whole window.
func (l *slidingLog) retryIn(now, window, rate, asked int64) int64 {
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
		seen += e.n
		if seen >= k {
			return e.at + window - now
		}
	}
	return window // unreachable: k <= total
}

// reset returns how long until the window holds no events: the window
// itself right after an add, as lua/decide.lua answers without looking the
// newest event up.
func (l *slidingLog) reset(now, window int64, justAdded bool) int64 {
	if justAdded {
		return window
	}
	if l.head == l.tail || l.at(l.tail-1).at <= l.gone {
		return 0
	}
	return max(0, l.at(l.tail-1).at+window-now)
}

func (l *slidingLog) add(now, _, n int64) { l.addEvents(now, n) }

// slidingKind is the exact sliding log's algorithm (Kind SlidingLog): a
// ZSET of events in Redis (lua/sliding.lua), a slidingLog here.
type slidingKind struct{ windowKind }

func (slidingKind) name() string                              { return "sliding log" }
func (slidingKind) compile(r Rule, p plan) (plan, string)     { return p, checkWindow(&r, false) }
func (slidingKind) letter() byte                              { return 'l' }
func (slidingKind) windowed() bool                            { return false }
func (slidingKind) grouped() string                           { return "" }
func (slidingKind) stamp(_ plan, now int64) int64             { return now }
func (slidingKind) dueFrom(p plan, now int64) int64           { return now - p.window + 1 }
func (slidingKind) named() bool                               { return true }
func (slidingKind) undoArgs(_ plan, win int64) (int64, int64) { return win, 0 }

func (slidingKind) scripts() *kindScripts { return slidingScripts }

// slidingScripts are the entries composed with lua/sliding.lua's pieces
// (see composeKind).
var slidingScripts = composeKind("sliding")

// args: the window, and the call's member id.
func (slidingKind) args(p plan) (int64, int64, bool) { return p.window, 0, true }

func (slidingKind) meter(sh *localShard, k lkey, h uint64, _ plan, now int64, create bool) (meter, bool) {
	lg := metersOf[slidingLog](sh, logMeters).getAt(&k, h, now)
	if lg == nil {
		if !create {
			return nil, false
		}
		lg = metersOf[slidingLog](sh, logMeters).add(&k, h, newSlidingLog())
	}
	return lg, true
}

func (slidingKind) unrecord(sh *localShard, k lkey, h uint64, _ plan, now, n int64) {
	if lg := metersOf[slidingLog](sh, logMeters).peek(&k, h); lg != nil {
		lg.removeEvents(now, n)
	}
}

func (slidingKind) dropEmpty(sh *localShard, k lkey, h uint64, _ int64) {
	if lg := metersOf[slidingLog](sh, logMeters).peek(&k, h); lg != nil && lg.total == 0 {
		metersOf[slidingLog](sh, logMeters).remove(&k, h)
	}
}

// logMeters is the slot of the shard's table of slidingLogs.
var logMeters = meterSlot('l')

func (slidingKind) newMeters(size int) meterTable { return newMeters[slidingLog](size) }
func (slidingKind) meterName() string             { return "log" }

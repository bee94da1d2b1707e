package ratelimit

// event is n events recorded at one instant (µs). Events that share an
// instant are kept as one entry; the Redis log keeps one member each, which
// counts the same.
type event struct {
	at int64
	n  int64
}

// slidingLog is the local path's exact sliding-window log of one key: the
// events in ascending time order from events[head]. Events at or before
// gone have left the log (see prune) even while they still occupy
// events[head:]: they are dropped from the slice in bulk, when it is full,
// so that a call touches only the newest events and the oldest live one. It
// is not safe for concurrent use; its shard's lock guards it.
type slidingLog struct {
	events []event
	head   int
	total  int64 // sum of n over events[head:], gone events included
	gone   int64 // events at or before gone no longer count

	// A cache of live: events[first:] are the events later than cut, and
	// they number firstTotal; next is events[first].at (maxTime when first
	// is the end), so that a call in which no event leaves the window does
	// not read the events at all. Time mostly moves forward, so live only
	// advances first; anything else that moves events resets it (first <
	// head means unknown).
	first      int
	firstTotal int64
	cut        int64
	next       int64
}

// maxTime is later than every event.
const maxTime = 1<<63 - 1

// newSlidingLog returns an empty log.
func newSlidingLog() slidingLog {
	return slidingLog{gone: -maxTime - 1, first: -1}
}

// trim drops the events that have left the window at now: an event at t0
// counts while now - t0 < window.
func (l *slidingLog) trim(now, window int64) { l.drop(now - window) }

// drop removes the events at or before cut from the slice.
func (l *slidingLog) drop(cut int64) {
	for l.head < len(l.events) && l.events[l.head].at <= cut {
		l.total -= l.events[l.head].n
		l.head++
	}
	if l.head == len(l.events) {
		l.events, l.head = l.events[:0], 0
		l.forget()
	}
}

// forget drops live's cache after events moved.
func (l *slidingLog) forget() { l.first = -1 }

// addEvents records n events at now, keeping time order even when the clock
// went backwards. It reuses the slice's room before it grows it.
func (l *slidingLog) addEvents(now, n int64) {
	if now <= l.gone || len(l.events) == cap(l.events) {
		// Events gone before the clock went back this far would count
		// again beside the new one; and a full slice makes room first.
		l.drop(l.gone)
		l.gone = -maxTime - 1
	}
	l.total += n
	last := len(l.events) - 1
	if last >= l.head && l.events[last].at == now {
		l.events[last].n += n
		if l.first >= l.head && l.first <= last && now > l.cut {
			l.firstTotal += n
		}
		return
	}
	if len(l.events) == cap(l.events) && len(l.events) > 0 {
		// Full: move what is left down when that frees a quarter of the
		// room at least, otherwise into twice the room, so that each event
		// is copied a bounded number of times.
		live := len(l.events) - l.head
		if l.head < len(l.events)/4 || l.head == 0 {
			// append grows a full slice as it always does, copying only
			// what is left.
			l.events = append(l.events[l.head:], event{})[:live]
		} else {
			l.events = l.events[:copy(l.events, l.events[l.head:])]
		}
		l.head = 0
		last = live - 1
		l.forget()
	}
	if last < l.head || l.events[last].at < now {
		switch {
		case l.first < l.head:
		case now > l.cut:
			l.firstTotal += n
			if l.first == len(l.events) {
				l.next = now
			}
		default: // already outside the window live last looked at
			l.forget()
		}
		l.events = append(l.events, event{at: now, n: n})
		return
	}
	l.forget()
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

// removeEvents takes back up to n events recorded at at.
func (l *slidingLog) removeEvents(at, n int64) {
	defer l.forget()
	l.drop(l.gone)
	for i := len(l.events) - 1; i >= l.head; i-- {
		e := &l.events[i]
		if e.at != at {
			continue
		}
		n = min(n, e.n)
		e.n -= n
		l.total -= n
		if e.n == 0 {
			l.events = append(l.events[:i], l.events[i+1:]...)
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
	for i := l.head; i < len(l.events); i++ {
		e := l.events[i]
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
			l.events[w] = e
			w++
		}
	}
	l.events = l.events[:w]
	l.total -= removed
	if l.head == len(l.events) {
		l.events, l.head = l.events[:0], 0
	}
	return removed
}

// oldest returns the time of the oldest event still in the window at now
// (maxTime when there is none).
func (l *slidingLog) oldest(now, window int64) int64 {
	first, _ := l.live(now, window)
	if first < len(l.events) {
		return l.events[first].at
	}
	return maxTime
}

// since returns how many events the log holds at from or later (a debt's
// events that still count, see writeback.go's dueFrom).
func (l *slidingLog) since(from int64) (n int64) {
	for _, e := range l.events[l.head:] {
		if e.at >= from && e.at > l.gone {
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
	for l.total > limit && l.head < len(l.events) {
		e := &l.events[l.head]
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
// than calls already decided still counts. It only moves gone: the slice
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
	for l.first < len(l.events) && l.events[l.first].at <= cut {
		l.firstTotal -= l.events[l.first].n
		l.first++
	}
	l.next = maxTime
	if l.first < len(l.events) {
		l.next = l.events[l.first].at
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
	for _, e := range l.events[first:] {
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
	if l.head == len(l.events) || l.events[len(l.events)-1].at <= l.gone {
		return 0
	}
	return max(0, l.events[len(l.events)-1].at+window-now)
}

func (l *slidingLog) add(now, _, n int64) { l.addEvents(now, n) }

// slidingKind is the exact sliding log's algorithm (Kind SlidingLog): a
// ZSET of events in Redis (lua/window.lua), a slidingLog here.
type slidingKind struct{ windowKind }

func (slidingKind) name() string                              { return "sliding log" }
func (slidingKind) compile(r *Rule, _ *plan) string           { return checkWindow(r, false) }
func (slidingKind) letter() byte                              { return 'l' }
func (slidingKind) windowed() bool                            { return false }
func (slidingKind) grouped() (string, bool)                   { return "", true }
func (slidingKind) stamp(_ plan, now int64) int64             { return now }
func (slidingKind) dueFrom(p plan, now int64) int64           { return now - p.window + 1 }
func (slidingKind) named() bool                               { return true }
func (slidingKind) undoArgs(_ plan, win int64) (int64, int64) { return win, 0 }

func (slidingKind) script(penalize bool) *script {
	if penalize {
		return penaltyScript
	}
	return allowScript
}

// args: the window, and the call's member id.
func (slidingKind) args(p plan) (int64, int64, bool) { return p.window, 0, true }

func (slidingKind) meter(sh *localShard, k *lkey, h uint64, _ *plan, now int64, create bool) (meter, bool) {
	lg := sh.logs.getAt(k, h, now)
	if lg == nil {
		if !create {
			return nil, false
		}
		lg = sh.logs.add(k, h, newSlidingLog())
	}
	return lg, true
}

func (slidingKind) unrecord(sh *localShard, k *lkey, h uint64, _ *plan, now, n int64) {
	if lg := sh.logs.peek(k, h); lg != nil {
		lg.removeEvents(now, n)
	}
}

func (slidingKind) dropEmpty(sh *localShard, k *lkey, h uint64, _ int64) {
	if lg := sh.logs.peek(k, h); lg != nil && lg.total == 0 {
		sh.logs.remove(k, h)
	}
}

func (slidingKind) forget(sh *localShard, k *lkey, h uint64) { sh.logs.remove(k, h) }

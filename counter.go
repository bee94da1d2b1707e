package ratelimit

import "math"

// counter is the local path's approximate sliding-window counter of one key
// (Rule.Approximate): the events of the current fixed window and of the one
// before it. lua/counter.lua computes the same numbers with the same
// floating-point operations in the same order; the explicit float64
// conversions below keep the compiler from fusing a multiply and an add,
// which would round differently. Its shard's lock guards it.
type counter struct {
	win  int64 // index of the current fixed window: now / window
	cur  int64 // events in it
	prev int64 // events in the window before it
}

// view returns the counter as it stands at now, without changing it: the
// window now is in (a clock that went back into an earlier window counts as
// the start of the current one), its events, the previous window's, and how
// far into the window now is.
func (c *counter) view(now, window int64) (win, cur, prev, elapsed int64) {
	win, cur, prev = c.win, c.cur, c.prev
	if idx := floorDiv(now, window); idx > win {
		if idx == win+1 {
			prev = cur
		} else {
			prev = 0
		}
		cur, win = 0, idx
	}
	return win, cur, prev, max(0, now-win*window)
}

// Prune does nothing: like lua/counter.lua, the counter moves to a new
// window only when it records events there.
func (c *counter) Prune(int64, int64) {}

func (c *counter) Count(now, window int64) int64 {
	_, cur, prev, elapsed := c.view(now, window)
	frac := float64(window-elapsed) / float64(window)
	return int64(math.Ceil(float64(float64(prev)*frac) + float64(cur)))
}

// RetryIn returns how long until the estimate has room for asked more:
// until the previous window's weight has fallen far enough, or, when the
// current window alone is too full, until it has become the previous one
// and fallen far enough in turn.
func (c *counter) RetryIn(now, window, rate, asked int64) int64 {
	need := rate - asked
	if need < 0 {
		return window
	}
	win, cur, prev, _ := c.view(now, window)
	w := float64(window)
	var at float64
	if cur <= need {
		at = float64(win*window) + (w - float64(float64(need-cur)*w)/float64(prev))
	} else {
		at = float64((win+1)*window) + (w - float64(float64(need)*w)/float64(cur))
	}
	return max(int64(math.Ceil(at-float64(now))), 1)
}

func (c *counter) Reset(now, window int64, _ bool) int64 {
	win, cur, prev, _ := c.view(now, window)
	switch {
	case cur > 0:
		return (win+2)*window - now
	case prev > 0:
		return (win+1)*window - now
	}
	return 0
}

// lostWeight returns how much of events recorded at or before at (lost
// from Redis) the counter counts at now: all of them in at's fixed window
// (its own and, weighted, the one before it), those of at's window weighed
// as the previous window's in the next one, rounded up, as Count weighs
// them; none later.
func lostWeight(window, at, now, events int64) (int64, bool) {
	switch win := floorDiv(now, window); {
	case win <= floorDiv(at, window):
		return events, true
	case win == floorDiv(at, window)+1:
		frac := float64(window-(now-win*window)) / float64(window)
		return int64(math.Ceil(float64(events) * frac)), true
	}
	return 0, false
}

// Add moves the counter to now's window and records n events there.
func (c *counter) Add(now, window, n int64) {
	c.win, c.cur, c.prev, _ = c.view(now, window)
	c.cur += n
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// counterKind is the approximate counter's algorithm (a SlidingLog rule
// with Approximate): two fixed windows' counts in a Redis hash
// (lua/counter.lua), a counter here.
type counterKind struct{ windowKind }

func (counterKind) name() string                              { return "sliding log" }
func (counterKind) compile(r Rule, p plan) (plan, string)     { return p, checkWindow(&r, false) }
func (counterKind) letter() byte                              { return 'c' }
func (counterKind) windowed() bool                            { return true }
func (counterKind) grouped() string                           { return "approximate rules cannot be grouped" }
func (counterKind) dueFrom(p plan, now int64) int64           { return floorDiv(now, p.window) - 1 }
func (counterKind) named() bool                               { return false }
func (counterKind) undoArgs(_ plan, win int64) (int64, int64) { return win, 0 }

// lost: what Redis lost counts as the counter weighs it (lostWeight):
// through the fixed window after the loss's, fading.
func (counterKind) lost(p plan, at, now, events int64) (int64, bool) {
	return lostWeight(p.window, at, now, events)
}

// stamp: the index of the fixed window the event went into.
func (counterKind) stamp(p plan, now int64) int64 { return floorDiv(now, p.window) }

func (counterKind) scripts() *kindScripts { return counterScripts }

// counterScripts are the entries composed with lua/counter.lua's pieces
// (see composeKind).
var counterScripts = composeKind("counter")

func (counterKind) args(p plan) (int64, int64, bool) { return p.window, 0, false }

func (counterKind) meter(sh *localShard, k lkey, h uint64, _ plan, now int64, create bool) (meter, bool) {
	if c := metersOf[counter](sh, counterMeters).GetOrAdd(&k, h, now, create); c != nil {
		return c, true
	}
	return nil, false
}

// unrecord takes events allowed at now back from the fixed window they
// went into while it still counts: the current one, or the one before it
// (as lua/counter.lua's counter.undo).
func (counterKind) unrecord(sh *localShard, k lkey, h uint64, p plan, now, n int64) {
	c := metersOf[counter](sh, counterMeters).Peek(&k, h)
	if c == nil {
		return
	}
	switch floorDiv(now, p.window) {
	case c.win:
		c.cur = max(0, c.cur-n)
	case c.win - 1:
		c.prev = max(0, c.prev-n)
	}
}

func (counterKind) dropEmpty(sh *localShard, k lkey, h uint64, _ int64) {
	if c := metersOf[counter](sh, counterMeters).Peek(&k, h); c != nil && c.cur == 0 && c.prev == 0 {
		metersOf[counter](sh, counterMeters).Remove(&k, h)
	}
}

// counterMeters is the slot of the shard's table of counters.
var counterMeters = meterSlot('c')

func (counterKind) newMeters(size int) meterTable { return newMeters[counter](size) }
func (counterKind) meterName() string             { return "counter" }

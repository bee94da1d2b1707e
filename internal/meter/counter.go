package meter

import "math"

// Counter is the local path's approximate sliding-window counter of one key
// (Rule.Approximate): the events of the current fixed window and of the one
// before it. lua/counter.lua computes the same numbers with the same
// floating-point operations in the same order; the explicit float64
// conversions below keep the compiler from fusing a multiply and an add,
// which would round differently. The zero Counter is empty.
type Counter struct {
	win  int64 // index of the current fixed window: now / window
	cur  int64 // events in it
	prev int64 // events in the window before it
}

// view returns the counter as it stands at now, without changing it: the
// window now is in (a clock that went back into an earlier window counts as
// the start of the current one), its events, the previous window's, and how
// far into the window now is.
func (c *Counter) view(now, window int64) (win, cur, prev, elapsed int64) {
	win, cur, prev = c.win, c.cur, c.prev
	if idx := FloorDiv(now, window); idx > win {
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
func (c *Counter) Prune(int64, int64) {}

// Count returns the estimate at now: the previous window's events weighted
// by the part of it still inside the sliding window, plus the current
// window's, rounded up.
func (c *Counter) Count(now, window int64) int64 {
	_, cur, prev, elapsed := c.view(now, window)
	frac := float64(window-elapsed) / float64(window)
	return int64(math.Ceil(float64(float64(prev)*frac) + float64(cur)))
}

// RetryIn returns how long until the estimate has room for asked more:
// until the previous window's weight has fallen far enough, or, when the
// current window alone is too full, until it has become the previous one
// and fallen far enough in turn.
func (c *Counter) RetryIn(now, window, rate, asked int64) int64 {
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

// Reset returns how long until neither window counts any more events.
func (c *Counter) Reset(now, window int64, _ bool) int64 {
	win, cur, prev, _ := c.view(now, window)
	switch {
	case cur > 0:
		return (win+2)*window - now
	case prev > 0:
		return (win+1)*window - now
	}
	return 0
}

// Add moves the counter to now's window and records n events there.
func (c *Counter) Add(now, window, n int64) {
	c.win, c.cur, c.prev, _ = c.view(now, window)
	c.cur += n
}

// Unrecord takes n events allowed at now back from the fixed window they
// went into while it still counts: the current one, or the one before it
// (as lua/counter.lua's counter.undo). Once the counter has moved on
// further they no longer count, and nothing is taken back.
func (c *Counter) Unrecord(now, window, n int64) {
	switch FloorDiv(now, window) {
	case c.win:
		c.cur = max(0, c.cur-n)
	case c.win - 1:
		c.prev = max(0, c.prev-n)
	}
}

// Empty reports whether the counter holds no events.
func (c *Counter) Empty() bool { return c.cur == 0 && c.prev == 0 }

// CounterLost returns how much of events recorded at or before at (and
// lost since) a counter counts at now: all of them in at's fixed window
// (its own and, weighed, the one before it), those of at's window weighed
// as the previous window's in the next one, rounded up, as Count weighs
// them; none later. It reports whether they count at all.
func CounterLost(window, at, now, events int64) (int64, bool) {
	switch win := FloorDiv(now, window); {
	case win <= FloorDiv(at, window):
		return events, true
	case win == FloorDiv(at, window)+1:
		frac := float64(window-(now-win*window)) / float64(window)
		return int64(math.Ceil(float64(events) * frac)), true
	}
	return 0, false
}

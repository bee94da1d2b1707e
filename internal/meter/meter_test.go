package meter

import (
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
)

// Each meter is a Meter, and offers what the root asks of it beside.
var (
	_ Meter       = (*Bucket)(nil)
	_ Meter       = (*Counter)(nil)
	_ Meter       = (*Quota)(nil)
	_ Meter       = (*FixedWindow)(nil)
	_ Meter       = (*eventlog.Log)(nil)
	_ Ager        = (*eventlog.Log)(nil)
	_ StateCopier = (*Bucket)(nil)
	_ StateCopier = (*Quota)(nil)
	_ StateCopier = (*FixedWindow)(nil)
	_ IDMeter     = (*Bucket)(nil)
)

func TestFloorAndCeilDiv(t *testing.T) {
	for _, c := range []struct{ a, b, floor, ceil int64 }{
		{7, 2, 3, 4}, {6, 2, 3, 3}, {-7, 2, -4, -3}, {-6, 2, -3, -3}, {0, 5, 0, 0}, {-1, 5, -1, 0}, {1, 5, 0, 1},
	} {
		if got := FloorDiv(c.a, c.b); got != c.floor {
			t.Errorf("FloorDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.floor)
		}
		if got := CeilDiv(c.a, c.b); got != c.ceil {
			t.Errorf("CeilDiv(%d, %d) = %d, want %d", c.a, c.b, got, c.ceil)
		}
	}
	if got := FloorDiv(7, -2); got != -4 {
		t.Errorf("FloorDiv(7, -2) = %d, want -4", got)
	}
}

func TestCounterWeighsThePreviousWindow(t *testing.T) {
	var c Counter
	const w = 10
	c.Add(5, w, 4)
	if c.Count(5, w) != 4 || c.Empty() {
		t.Fatalf("count at 5 = %d, empty %v; want 4", c.Count(5, w), c.Empty())
	}
	// At 15 the window before holds 4, half of it still inside.
	if got := c.Count(15, w); got != 2 {
		t.Fatalf("count at 15 = %d, want 2", got)
	}
	if got := c.Reset(15, w, false); got != 5 {
		t.Fatalf("reset at 15 = %d, want 5 (the previous window stops counting at 20)", got)
	}
	// Room for 3 of a rate of 4 at 12: the previous window's weight must
	// fall to 1 event, at 10 + (10 - 1·10/4) = 17.5, so 6 µs from 12.
	if got := c.RetryIn(12, w, 4, 3); got != 6 {
		t.Fatalf("retry at 12 = %d, want 6", got)
	}
	if got := c.RetryIn(12, w, 4, 5); got != w {
		t.Fatalf("retry for more than the rate = %d, want the window", got)
	}
	c.Add(15, w, 2) // moves to window 1: prev 4, cur 2
	if got := c.Reset(15, w, true); got != 15 {
		t.Fatalf("reset with events in the current window = %d, want 15", got)
	}
	c.Unrecord(5, w, 1) // window 0, the one before: still counts
	c.Unrecord(15, w, 5)
	if c.prev != 3 || c.cur != 0 {
		t.Fatalf("after the undos prev %d cur %d, want 3 and 0", c.prev, c.cur)
	}
	c.Unrecord(-5, w, 3) // window -1: no longer counts
	if c.prev != 3 {
		t.Fatalf("an undo of an older window took from prev: %d", c.prev)
	}
	// A clock gone back into an earlier window counts as the current one.
	if got := c.Count(3, w); got != 3 {
		t.Fatalf("count at 3, after window 1 = %d, want 3 (the current window's start)", got)
	}
	if c.Reset(40, w, false) != 0 {
		t.Fatalf("reset two windows later = %d, want 0", c.Reset(40, w, false))
	}
	c.Unrecord(5, w, 3) // window 0 is still the one before
	if !c.Empty() {
		t.Fatal("a counter of no events is not empty")
	}
}

func TestQuotaCountsTheCallsPeriod(t *testing.T) {
	var q Quota
	q.SetPeriod(100, 200)
	if q.Count(150, 0) != 0 || q.Reset(150, 0, false) != 0 || !q.Empty() {
		t.Fatal("a new quota is not empty")
	}
	q.Add(150, 0, 3)
	if q.Count(150, 0) != 3 || q.RetryIn(150, 0, 3, 1) != 50 || q.Reset(150, 0, false) != 50 {
		t.Fatalf("count %d retry %d reset %d, want 3, 50, 50", q.Count(150, 0), q.RetryIn(150, 0, 3, 1), q.Reset(150, 0, false))
	}
	q.CopyFrom(150, 7, 50, 2) // Redis counts 7, 2 of them given back since
	if q.Count(150, 0) != 5 {
		t.Fatalf("count after Redis' 7 less 2 = %d, want 5", q.Count(150, 0))
	}
	q.CopyFrom(150, 4, 50, 0) // fewer than the quota's own: it keeps its own
	if q.Count(150, 0) != 5 {
		t.Fatalf("count after Redis' 4 = %d, want 5", q.Count(150, 0))
	}
	q.Unrecord(0, 5) // another period's events: nothing
	q.Unrecord(100, 2)
	if q.Count(150, 0) != 3 {
		t.Fatalf("count after undos = %d, want 3", q.Count(150, 0))
	}
	q.SetPeriod(200, 300) // the next period: the count is the last one's
	if q.Count(250, 0) != 0 || q.Reset(250, 0, false) != 0 || q.Reset(250, 0, true) != 50 {
		t.Fatalf("next period: count %d reset %d", q.Count(250, 0), q.Reset(250, 0, false))
	}
	q.Add(250, 0, 1)
	if q.Count(250, 0) != 1 {
		t.Fatalf("count in the next period = %d, want 1", q.Count(250, 0))
	}
	q.SetPeriod(300, 400)
	q.CopyFrom(300, 2, 100, 0) // Redis' count of a period the quota has none of
	if q.Count(300, 0) != 2 {
		t.Fatalf("count copied into a new period = %d, want 2", q.Count(300, 0))
	}
}

func TestFixedWindowCountsItsWindow(t *testing.T) {
	var f FixedWindow
	const w = 10
	f.SetSize(w)
	f.Add(12, w, 3)
	if f.Count(19, w) != 3 || f.RetryIn(12, w, 3, 1) != 8 || f.Reset(12, w, false) != 8 || f.Empty() {
		t.Fatalf("count %d retry %d reset %d", f.Count(19, w), f.RetryIn(12, w, 3, 1), f.Reset(12, w, false))
	}
	if f.Count(20, w) != 0 || f.Reset(20, w, false) != 0 || f.RetryIn(25, w, 3, 1) != 5 {
		t.Fatalf("next window: count %d reset %d retry %d", f.Count(20, w), f.Reset(20, w, false), f.RetryIn(25, w, 3, 1))
	}
	// A clock gone back into an earlier window counts as still in this one.
	if f.Count(5, w) != 3 || f.RetryIn(5, w, 3, 1) != 15 {
		t.Fatalf("earlier window: count %d retry %d, want 3, 15", f.Count(5, w), f.RetryIn(5, w, 3, 1))
	}
	f.Unrecord(5, w, 1) // not the count's window: nothing
	f.Unrecord(15, w, 1)
	if f.Count(15, w) != 2 {
		t.Fatalf("count after undos = %d, want 2", f.Count(15, w))
	}
	f.CopyFrom(15, 6, 5, 1) // Redis counts 6, 1 given back since
	if f.Count(15, w) != 5 {
		t.Fatalf("count after Redis' 6 less 1 = %d, want 5", f.Count(15, w))
	}
	f.CopyFrom(25, 1, 5, 0) // the next window, in the rule's size
	if f.Count(25, w) != 1 || f.win != 2 {
		t.Fatalf("count copied into the next window = %d (window %d), want 1 in 2", f.Count(25, w), f.win)
	}
	f.Unrecord(25, w, 4)
	if !f.Empty() {
		t.Fatal("a window of no events is not empty")
	}
}

package crowd

import (
	"context"
	"time"
)

// Waiting is one call's waits for a seat: they end together, a budget
// after the first began. Its zero value is ready to use; Stop releases
// its timer.
type Waiting struct {
	until time.Time
	timer *time.Timer
}

// Await waits on w until it is woken (woken: true), ctx ends (its error)
// or the budget of the call's waits runs out, counted from its first
// Await (false, nil). Unless woken, the caller must take w out of its
// crowd with Leave, under its owner's lock: a seat may have been given
// meanwhile.
func (wt *Waiting) Await(ctx context.Context, w *Seat, budget time.Duration) (woken bool, err error) {
	if wt.until.IsZero() {
		wt.until = time.Now().Add(budget)
	}
	left := time.Until(wt.until)
	if left <= 0 {
		return false, nil
	}
	if wt.timer == nil {
		wt.timer = time.NewTimer(left)
	} else {
		wt.timer.Reset(left)
	}
	select {
	case <-w.ready:
		return true, nil
	case <-wt.timer.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Stop releases the timer, if the call waited.
func (wt *Waiting) Stop() {
	if wt.timer != nil {
		wt.timer.Stop()
	}
}

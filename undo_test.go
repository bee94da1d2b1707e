package ratelimit

import (
	"context"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// TestUndoTakesCounterEventsOnlyFromTheirWindow: events an AllowAll pair
// (or a reservation) recorded in an approximate counter are taken back from
// the fixed window they went into while it still counts, the current one or
// the one before it, as meter.Counter.Unrecord does; an older window's no
// longer count, and the counter's count is other events.
func TestUndoTakesCounterEventsOnlyFromTheirWindow(t *testing.T) {
	mr := miniredis.RunT(t)
	c := miniClient(t, mr)
	ctx := context.Background()
	const key = "rl:v1:{4:rule:=k}:c"
	mr.HSet(key, "w", "41", "c", "5", "p", "1") // the counter is in window 41
	undo := func(win int) int64 {
		n, err := algCounter.redis.scripts().undo.Exec(ctx, c, []string{key}, []string{"member", "2", strconv.Itoa(win)}).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if back := undo(39); back != 0 || mr.HGet(key, "c") != "5" || mr.HGet(key, "p") != "1" {
		t.Fatalf("undo of events from window 39 took back %d, left c = %s, p = %s; want nothing taken", back, mr.HGet(key, "c"), mr.HGet(key, "p"))
	}
	if back := undo(40); back != 1 || mr.HGet(key, "c") != "5" || mr.HGet(key, "p") != "0" {
		t.Fatalf("undo of events from window 40 took back %d, left c = %s, p = %s; want the previous window's 1 taken", back, mr.HGet(key, "c"), mr.HGet(key, "p"))
	}
	if back := undo(41); back != 2 || mr.HGet(key, "c") != "3" {
		t.Fatalf("undo of events from window 41 took back %d, left c = %s; want 2 taken, c = 3", back, mr.HGet(key, "c"))
	}
}

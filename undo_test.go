package ratelimit

import (
	"context"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

// TestUndoTakesCounterEventsOnlyFromTheirWindow: events an AllowAll pair
// recorded in an approximate counter are taken back only while the counter
// is still in the fixed window they went into, as counter.go's unrecord
// does; once another call moved the counter on, its count is other events.
func TestUndoTakesCounterEventsOnlyFromTheirWindow(t *testing.T) {
	mr := miniredis.RunT(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	if back := undo(40); back != 0 || mr.HGet(key, "c") != "5" {
		t.Fatalf("undo of events from window 40 took back %d, left c = %s; want nothing taken from window 41", back, mr.HGet(key, "c"))
	}
	if back := undo(41); back != 2 || mr.HGet(key, "c") != "3" {
		t.Fatalf("undo of events from window 41 took back %d, left c = %s; want 2 taken, c = 3", back, mr.HGet(key, "c"))
	}
}

package meter

import "testing"

// TestCarryOwesWhatItsTokensHold drives a share's bucket of 100 tokens at
// 500 a second (T = 2ms) as the fallback does through an outage: seeded
// full with Redis' bucket (TAT 200ms ahead), then one token each 2ms as
// the bucket frees one. The process' tokens queue behind Redis' TAT, so
// what is owed is every token until that TAT has passed, and then what the
// bucket holds beyond now: 100, the whole share, for as long as the
// bucket stays busy, however long ago the outage began.
func TestCarryOwesWhatItsTokensHold(t *testing.T) {
	const ms = 1000
	b := newBucket(1_000_000, 500, 100)
	b.w = 1_200 * ms // seeded: full at 1s
	var c Carry
	take := func(now int64) {
		if b.Count(now, 0)+1 > b.burst {
			t.Fatalf("the share's bucket is full at %dµs", now)
		}
		b.Add(now, 0, 1)
		b.CarryOn(&c, now, 1)
	}
	owed := func(now, want int64) {
		t.Helper()
		if got := c.Owed(now); got != want {
			t.Errorf("owed at +%dms = %d, want %d", now/ms-1000, got, want)
		}
	}
	owed(1_000*ms, 0)
	now := int64(1_000 * ms)
	for i := 1; i <= 50; i++ {
		now += 2 * ms
		take(now)
	}
	owed(now, 50)        // +100ms: all 50, behind Redis' TAT
	owed(now+100*ms, 50) // Redis' TAT reached: the 50 still wait their turn
	owed(now+150*ms, 25) // then drain, one each 2ms
	owed(now+200*ms, 0)  //
	for i := 51; i <= 1000; i++ {
		now += 2 * ms
		take(now)
	}
	owed(now, 100) // +2s: a full share, far more than the last 200ms of tokens would be
	w, r := c.Mark()
	c.Paid(w, r) // a write-back brought it all to Redis
	owed(now, 0)
	now += 2 * ms
	take(now)
	owed(now, 1)
	c.Restart() // an undo: what is left owed is replayed, nothing here
	owed(now, 0)
	c.Replay(now-10*ms, 2) // two tokens of an earlier time, queued behind Redis'
	owed(now, 2)
	c.Clear()
	if c.On() || c.Owed(now) != 0 {
		t.Errorf("a cleared Carry owes %d", c.Owed(now))
	}
}

// TestCarryOfAnIdleBucket: a bucket with nothing in it owes its own
// tokens, as they drain at its rate.
func TestCarryOfAnIdleBucket(t *testing.T) {
	b := newBucket(1_000_000, 3, 3) // T = 333333⅓µs
	b.Add(10_000_000, 0, 2)
	var c Carry
	b.CarryOn(&c, 10_000_000, 2)
	for _, x := range []struct{ now, want int64 }{
		{10_000_000, 2}, {10_333_333, 2}, {10_333_334, 1}, {10_666_666, 1}, {10_666_667, 0},
	} {
		if got := c.Owed(x.now); got != x.want {
			t.Errorf("owed at %dµs = %d, want %d", x.now, got, x.want)
		}
	}
}

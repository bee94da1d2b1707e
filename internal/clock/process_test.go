package clock

import (
	"testing"
	"time"
)

// TestProcessFollowsTheWallClock: a Process reads the wall clock's time
// when it is made, and never goes back.
func TestProcessFollowsTheWallClock(t *testing.T) {
	before := time.Now().UnixMicro()
	c := NewProcess()
	first := c.Now()
	after := time.Now().UnixMicro()
	if first < before || first > after {
		t.Fatalf("a new Process reads %d, outside the wall clock's [%d, %d]", first, before, after)
	}
	last := first
	for i := 0; i < 1000; i++ {
		now := c.Now()
		if now < last {
			t.Fatalf("the Process went back from %d to %d", last, now)
		}
		last = now
	}
}

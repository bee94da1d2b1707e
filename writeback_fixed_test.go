package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// The write-back of a fixed window (see writeback.go): the events decided
// without Redis are owed under the window they went into, and Redis counts
// them only while that window lasts.

// TestWriteBackFixedWindow: 5 an hour, 3 calls on Redis, 2 allowed
// locally, Redis back: Redis' count of the window holds all 5, and another
// process waits for the next window. Events of a window that ended before
// Redis came back are neither sent nor dropped.
func TestWriteBackFixedWindow(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "hourly", Kind: FixedWindow, Limit: Limit{Rate: 5, Window: time.Hour}}
	window := time.Hour.Microseconds()
	e.outage(rule, "bob")
	now := e.clk.Now().UnixMicro()
	win := now / window
	if v, want := e.redisValue(meterKey(rule, "bob")), strconv.FormatInt(win, 10)+" 5"; v != want {
		t.Fatalf("redis' window after the write-back = %q, want %q", v, want)
	}
	end := time.Duration((win+1)*window-now) * time.Microsecond
	other := e.rejectedOnRedis(rule, "bob", end)

	fresh := Rule{Name: "fresh", Kind: FixedWindow, Limit: Limit{Rate: 2, Window: time.Hour}}
	e.refuse()
	if r := e.allow(e.l, fresh, "bob"); !r.Allowed || !r.Degraded {
		t.Fatalf("a call without redis = %+v", r)
	}
	e.clk.advance(end)
	e.endedUnsent(other, fresh, "bob")
}

// TestWriteBackFixedWindowResetAndReplay: a Reset made while Redis refused
// it empties a spent window on Redis before the events decided after it
// are added, once however often the batch is sent.
func TestWriteBackFixedWindowResetAndReplay(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "f", Kind: FixedWindow, Limit: Limit{Rate: 4, Window: 24 * time.Hour}}
	for i := 0; i < 4; i++ {
		e.allow(e.l, rule, "k")
	}
	e.refuse()
	e.clk.advance(time.Second)
	if err := e.l.Reset(context.Background(), rule, "k"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reset without redis: %v, want ErrUnavailable", err)
	}
	for i := 0; i < 3; i++ {
		if r := e.allow(e.l, rule, "k"); !r.Allowed || !r.Degraded {
			t.Fatalf("call %d after the Reset = %+v", i, r)
		}
	}
	e.back()
	e.sendTwice(1)
	other := e.limiter(Options{})
	if r := e.allow(other, rule, "k"); !r.Allowed || r.Degraded || r.Remaining != 0 {
		t.Fatalf("the fourth call since the Reset = %+v, want allowed on redis, none left", r)
	}
	if r := e.allow(other, rule, "k"); r.Allowed || r.Degraded {
		t.Fatalf("the fifth call since the Reset = %+v, want rejected on redis", r)
	}
}

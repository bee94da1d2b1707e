package ratelimit

import (
	"context"
	"testing"
	"time"
)

// TestRestingBreakerStillAnnounces: an instance whose breaker opened (a
// refused call, here) and rests decides without Redis and owes it; its
// heartbeat still reaches Redis and says so, and the other instance counts
// its share on top of Redis' count. Before, the heartbeat went through the
// resting breaker, was not sent, and the other admitted the whole Rate on
// Redis beside the resting instance's share (10 + 5 of a Rate of 10); on
// redis-server, four processes of an exact log of 5,000 a second, one of
// them cut off its rule's keys by an ACL for 4 s (1 s heartbeats): 6,250
// in three of those seconds.
func TestRestingBreakerStillAnnounces(t *testing.T) {
	mr, a, b := fleetOfTwo(t, "rest:", func(o *Options) { o.ProbeAfter = time.Hour })
	ctx := context.Background()
	rule := Rule{Name: "sale", Limit: PerMinute(10)} // a share of 5
	mr.SetError(noperm)
	for i := range 5 {
		if r, err := a.Allow(ctx, rule, "k"); err != nil || !r.Allowed || !r.Degraded {
			t.Fatalf("a's call %d while Redis refuses it = %+v, %v; want allowed without Redis", i, r, err)
		}
	}
	mr.SetError("")
	if a.Stats().BreakersOpen != 1 {
		t.Fatal("a's breaker is not open")
	}
	beat(t, a) // its breaker rests: a owes
	beat(t, b)
	allowed := 0
	for range 10 {
		r, err := b.Allow(ctx, rule, "k")
		if err != nil || r.Degraded {
			t.Fatalf("b's call = %+v, %v; want decided on Redis", r, err)
		}
		if r.Allowed {
			allowed++
		}
	}
	if allowed != 5 {
		t.Errorf("b allowed %d of 10 on Redis while a, its breaker resting, allowed 5 without it: want 5 (a Rate of 10)", allowed)
	}
}

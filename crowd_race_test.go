package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestCallThatRacedALandingLooksAtTheShieldAgain: a call of a crowded pair
// looked at the shield and found nothing, then, before it was held, a call
// of the pair landed that left the pair full and cached the rejection the
// next call would get (see shieldFull). Held, the call finds the own count
// full: it must look at the shield again and be answered there. Before, it
// went to Redis as the pair's probe and was rejected on held: a GCRA
// bucket under a crowd paid Redis such a probe for one freed slot in
// about ten (TestHotKeyCrowd).
func TestCallThatRacedALandingLooksAtTheShieldAgain(t *testing.T) {
	var log pathLog
	clk := &setClock{at: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	l, err := New(miniClient(t, miniredis.RunT(t)), Options{Clock: clk, HeartbeatInterval: -1, Logger: discard, OnDecision: log.hook})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	rule := Rule{Name: "hot", Kind: GCRA, Limit: Limit{Rate: 1, Window: time.Minute, Burst: 1}}
	allow := func() Result {
		t.Helper()
		r, err := l.Allow(ctx, rule, "k")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The token taken, then a rejection on Redis: the pair has a crowd.
	if r := allow(); !r.Allowed {
		t.Fatalf("the token = %+v", r)
	}
	if r := allow(); r.Allowed {
		t.Fatalf("the full bucket = %+v, want rejected", r)
	}
	clk.advance(time.Minute) // the token is back; the cached rejection ended

	// Between the next call's look at the shield and its hold, another
	// call takes the token, leaving the bucket full.
	raced := false
	testHookShieldLooked = func() {
		if raced {
			return
		}
		raced = true
		if r := allow(); !r.Allowed || r.Remaining != 0 {
			t.Errorf("the call that landed in between = %+v, want allowed with none remaining", r)
		}
	}
	defer func() { testHookShieldLooked = nil }()
	log.reset()
	r := allow()
	if !raced {
		t.Fatal("the hook did not run")
	}
	if r.Allowed || r.RetryAfter != time.Minute {
		t.Errorf("the call that raced the landing = %+v, want rejected for a minute", r)
	}
	paths := log.all()
	// OnDecision reports the call that landed in between first.
	if want := []Path{PathRedis, PathShield}; len(paths) != 2 || paths[0] != want[0] || paths[1] != want[1] {
		t.Errorf("decided on %v, want %v: the call that raced the landing is the shield's", paths, want)
	}
}

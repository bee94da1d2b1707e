package ratelimit

import (
	"context"
	"testing"
	"time"
)

// TestShieldKeepsNoRejectionAGiveBackLifted: a call for 60 of 100 is on
// its way to Redis while a reservation of 60 stands, Redis rejects it, and
// the reservation is cancelled before the rejection lands. The shield must
// not cache that rejection: the cancel freed the 60, and nothing else would
// lift the cached rejection before its window ends. Before, the next
// Reserve(60) was answered from the shield (RetryAfter 1m, Remaining 59)
// on a key that held no event; a real client saw it in 40 of 40 runs of
// 20 goroutines reserving 60 and cancelling at once on redis-server.
func TestShieldKeepsNoRejectionAGiveBackLifted(t *testing.T) {
	e := newWBEnv(t, Options{})
	ctx := context.Background()
	rule := Rule{Name: "tokens", Limit: PerMinute(100)}
	r1, _, err := e.l.Reserve(ctx, rule, "k", 60)
	if err != nil || r1 == nil {
		t.Fatalf("Reserve(60) = %v, %v", r1, err)
	}
	p, k := e.pair(rule, "k")
	// The call's hold, Redis' rejection of it (60 counted), the cancel,
	// then the rejection lands.
	now := e.l.localNow()
	lg := leg{k: &k, p: &p, n: 60}
	hd, _ := e.l.local.hold(&lg, now)
	d := decision{count: 60, retry: int64(time.Minute / time.Microsecond), reset: int64(time.Minute / time.Microsecond)}
	if err := r1.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	e.l.local.record(k, &p, now, now, 60, false, &d, &hd, 0)

	r2, res, err := e.l.Reserve(ctx, rule, "k", 60)
	if err != nil || r2 == nil {
		t.Fatalf("Reserve(60) on a key the cancel emptied = %+v, %v; want allowed (Peek: %+v)", res, err, e.peek(e.l, rule, "k"))
	}
	if res.Remaining != 40 {
		t.Fatalf("Reserve(60) on a key the cancel emptied: Remaining %d, want 40", res.Remaining)
	}
}

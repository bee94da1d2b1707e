package ratelimit

import (
	"context"
	"testing"
	"time"
)

// TestLateDecisionsWithoutRedisCount: calls that began to be decided
// without Redis while their instance's breaker rested, and record their
// decisions only after the breaker has closed, the write-back has brought
// everything and a heartbeat has announced the instance, are still counted
// by the other instance: the heartbeat says that the instance owes, and
// the other counts its share on top of Redis' count. Before, that
// heartbeat said nothing was owed (the breakers closed, nothing pending),
// and the other admitted the whole Rate on Redis beside the late decisions
// (10 + 5 of a Rate of 10). A goroutine descheduled between the two steps
// is enough; the test stops five there with a hook.
func TestLateDecisionsWithoutRedisCount(t *testing.T) {
	mr, a, b := fleetOfTwo(t, "late:", func(o *Options) { o.ProbeAfter = 20 * time.Millisecond })
	ctx := context.Background()
	rule := Rule{Name: "sale", Limit: PerMinute(10)} // a share of 5

	// Redis refuses a's call, and a's breaker opens (TripAfter 1).
	mr.SetError(noperm)
	if r, err := a.Allow(ctx, rule, "other"); err != nil || !r.Degraded {
		t.Fatalf("a's call while Redis refuses it = %+v, %v; want decided without Redis", r, err)
	}
	mr.SetError("")

	// Five calls of a begin without Redis while its breaker rests, and
	// stop there.
	const late = 5
	entered, resume := make(chan struct{}), make(chan struct{})
	testHookResting = func() {
		entered <- struct{}{}
		<-resume
	}
	t.Cleanup(func() { testHookResting = nil })
	results := make(chan Result, late)
	for range late {
		go func() {
			r, err := a.Allow(ctx, rule, "k")
			if err != nil || !r.Degraded {
				t.Errorf("a's late call = %+v, %v; want decided without Redis", r, err)
			}
			results <- r
		}()
	}
	for range late {
		<-entered
	}
	testHookResting = nil

	// The breaker's rest ends, a's next call closes it, the write-back
	// brings what a decided without Redis, and both announce themselves.
	br := a.conn.Load().breakers.All()[0]
	waitFor(t, "a's breaker due for a probe", func() bool { return !br.Resting() })
	if r, err := a.Allow(ctx, rule, "other"); err != nil || r.Degraded {
		t.Fatalf("a's probe = %+v, %v; want decided on Redis", r, err)
	}
	for a.writeBack(ctx) {
	}
	if s := a.Stats(); s.BreakersOpen != 0 || s.WriteBackPending != 0 {
		t.Fatalf("a's Stats = %+v; want its breaker closed and nothing pending", s)
	}
	beat(t, a)
	beat(t, b)

	onRedis := 0
	for range 10 {
		r, err := b.Allow(ctx, rule, "k")
		if err != nil || r.Degraded {
			t.Fatalf("b's call = %+v, %v; want decided on Redis", r, err)
		}
		if r.Allowed {
			onRedis++
		}
	}
	close(resume)
	withoutRedis := 0
	for range late {
		if r := <-results; r.Allowed {
			withoutRedis++
		}
	}
	if onRedis+withoutRedis > 10 || onRedis != 5 {
		t.Errorf("b allowed %d on Redis and a %d without it (its calls begun while its breaker rested): want 5 and 5 (a Rate of 10, a share of 5)", onRedis, withoutRedis)
	}
	// Once those decisions are written back, a owes nothing again.
	for a.writeBack(ctx) {
	}
	if a.owes(a.conn.Load()) {
		t.Error("a owes Redis after its late decisions were written back: a hold outlived its decision")
	}
}

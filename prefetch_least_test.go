package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestGrantTooSmallForItsCall: a request made for a call of n events is
// granted n slots at least, or none, and then the pair waits as when Redis
// had no slot. Before, a full log that freed its slots one at a time (the
// other process' events leaving, 10ms apart) granted each AllowN(3) a slot
// or two that served nothing: the call went to Redis as well and was
// rejected there, two scripts a call, while the process held 9 slots
// unused. Now those calls are rejected in-process (PathShield), no slot is
// taken until three are free, and the calls after the pause are allowed
// from a grant: as many as before (two). (A refresh, made for the pair's
// next calls whatever their size, still takes what is free.)
// Environment of writeback_test.go: miniredis, one fake clock.
func TestGrantTooSmallForItsCall(t *testing.T) {
	var mu sync.Mutex
	var path Path
	e := newWBEnv(t, Options{OnDecision: func(d Decision) { mu.Lock(); path = d.Path; mu.Unlock() }})
	l, other := e.l, e.limiter(Options{})
	rule := Rule{Name: "n", Limit: Limit{Rate: 10, Window: time.Second}, Prefetch: 100 * time.Millisecond}
	plain := rule
	plain.Prefetch = 0
	ctx := context.Background()
	t0 := e.clk.Now()
	at := func(ms int) { e.clk.advance(t0.Add(time.Duration(ms) * time.Millisecond).Sub(e.clk.Now())) }
	for i := range 6 { // the other process' events at 0, 10, ... 50ms
		at(10 * i)
		if r, err := other.Allow(ctx, plain, "k"); err != nil || !r.Allowed {
			t.Fatalf("the other process' call %d = %+v, %v", i, r, err)
		}
	}
	call := func(ms int) (Result, Path) {
		at(ms)
		r, err := l.AllowN(ctx, rule, "k", 3)
		if err != nil {
			t.Fatalf("AllowN at %dms: %v", ms, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return r, path
	}
	if r, p := call(950); !r.Allowed || p != PathRedis { // 9 of 10: the pair is hot
		t.Fatalf("AllowN(3) at 950ms = %+v on %v, want allowed on Redis", r, p)
	}
	// One slot frees at 1000ms and one every 10ms after: never three
	// before 1020ms, and the pair waits a Prefetch after a refusal.
	for _, ms := range []int{960, 1001, 1011, 1021, 1031, 1041, 1051} {
		r, p := call(ms)
		st := l.Stats()
		if r.Allowed || p != PathShield || st.PrefetchSlotsGranted != 0 {
			t.Fatalf("AllowN(3) at %dms = allowed %v on %v, %d slots granted so far; want rejected in-process, no slot granted", ms, r.Allowed, p, st.PrefetchSlotsGranted)
		}
	}
	for _, ms := range []int{1061, 1071} {
		if r, p := call(ms); !r.Allowed || p != PathPrefetch {
			t.Fatalf("AllowN(3) at %dms = %+v on %v, want allowed from a grant", ms, r, p)
		}
	}
}

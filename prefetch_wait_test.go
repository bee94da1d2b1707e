package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// hotPair makes rule's pair k hot on l (two calls on Redis), takes a grant
// with the third call, and returns the pair's grant and key.
func hotPair(t *testing.T, l *Limiter, rule Rule) (*pairGrants, lkey) {
	t.Helper()
	for i := range 3 {
		if r, err := l.Allow(context.Background(), rule, "k"); err != nil || !r.Allowed {
			t.Fatalf("call %d = %+v, %v", i, r, err)
		}
	}
	k, err := localKey(rule.Name, "k")
	if err != nil {
		t.Fatal(err)
	}
	return l.pairOf(k, nil), k
}

// TestPrefetchNextGrantWaits: a grant that comes while the live one still
// has slots waits for them to be used: none of them goes back, and the
// calls after them take the next grant's.
func TestPrefetchNextGrantWaits(t *testing.T) {
	mr := miniredis.RunT(t)
	at := time.Unix(1_700_000_000, 0)
	l := fleetLimiter(t, mr, "pfnext:", at)
	rule := Rule{Name: "n", Limit: Limit{Rate: 100, Window: time.Second}, Prefetch: 50 * time.Millisecond}
	g, k := hotPair(t, l, rule)
	g.mu.Lock()
	s, used := g.Live()
	live, left, p := s.ID, s.N-used, s.Plan
	g.asking = make(chan struct{}) // the test's request, early
	g.mu.Unlock()
	if left < 1 {
		t.Fatalf("the grant has %d slots left, want some", left)
	}
	l.askFor(context.Background(), l.conn.Load(), g, &p, k, 4, 0, at.UnixMicro(), nil)
	g.mu.Lock()
	if s, _ := g.Live(); s.ID != live || g.Next().N != 4 {
		t.Fatalf("after the early request: live grant %q (was %q), next of %d slots; want the live one kept, the next of 4 waiting", s.ID, live, g.Next().N)
	}
	g.mu.Unlock()
	for i := range left + 1 {
		if r, err := l.Allow(context.Background(), rule, "k"); err != nil || !r.Allowed {
			t.Fatalf("call %d after the early request = %+v, %v", i, r, err)
		}
	}
	g.mu.Lock()
	if s, used := g.Live(); g.Next().ID != "" || used != 1 || s.N != 4 {
		t.Errorf("after the live grant's slots and one more: next %q, live %d of %d used; want the next one live, 1 of 4 used", g.Next().ID, used, s.N)
	}
	g.mu.Unlock()
	if st := l.Stats(); st.PrefetchSlotsReturned != 0 || st.PrefetchSlotsUsed != uint64(1+left+1) {
		t.Errorf("Stats: %d slots used, %d returned; want %d used, none returned", st.PrefetchSlotsUsed, st.PrefetchSlotsReturned, 1+left+1)
	}
}

// TestPrefetchWaitersTakeIncomingGrant: calls that find no slot while a
// request is on its way wait for it, and the grant it brings serves them as
// it comes, first come first, before any other call: the first three of
// five waiters are allowed from a grant of three (Remaining falling in the
// order they came, PathPrefetch), the other two wake and ask for their
// own. PrefetchSlotsUsed counts every slot used exactly once, and never
// more than granted.
func TestPrefetchWaitersTakeIncomingGrant(t *testing.T) {
	mr := miniredis.RunT(t)
	at := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	paths := map[Path]int{}
	l := fleetLimiter(t, mr, "pfwait:", at, func(o *Options) {
		o.OnDecision = func(d Decision) { mu.Lock(); paths[d.Path]++; mu.Unlock() }
	})
	rule := Rule{Name: "w", Limit: Limit{Rate: 100, Window: time.Second}, Prefetch: 50 * time.Millisecond}
	ctx := context.Background()
	g, k := hotPair(t, l, rule)
	// The live grant is gone, and a request is on its way (this test's).
	g.mu.Lock()
	l.giveBackLater(g)
	ch := make(chan struct{})
	g.asking = ch
	g.ResetQueue()
	p := *g.Plan()
	g.mu.Unlock()
	before := l.Stats()

	const waiters = 5
	results := make([]Result, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := l.Allow(ctx, rule, "k")
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
			results[i] = r
		}()
		waitFor(t, "the waiter in the queue", func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.Queued() == i+1
		})
	}
	// The request returns with three slots.
	l.askFor(ctx, l.conn.Load(), g, &p, k, 3, 0, at.UnixMicro(), nil)
	wg.Wait()

	after := l.Stats()
	if got := after.PrefetchSlotsGranted - before.PrefetchSlotsGranted; got < 3 {
		t.Fatalf("%d slots granted, want the 3 of the test's request at least", got)
	}
	first := results[0].Remaining
	for i, r := range results {
		if !r.Allowed {
			t.Errorf("waiter %d = %+v, want allowed", i, r)
		}
		if i < 3 && r.Remaining != first-i {
			t.Errorf("waiter %d's Remaining = %d, want %d: served in the order they came", i, r.Remaining, first-i)
		}
	}
	used := after.PrefetchSlotsUsed - before.PrefetchSlotsUsed
	if used != waiters {
		t.Errorf("PrefetchSlotsUsed rose by %d, want %d", used, waiters)
	}
	mu.Lock()
	if paths[PathPrefetch] != 1+waiters {
		t.Errorf("%d decisions on path prefetch, want %d: %v", paths[PathPrefetch], 1+waiters, paths)
	}
	mu.Unlock()
	l.Close()
	st := l.Stats()
	if st.PrefetchSlotsUsed+st.PrefetchSlotsReturned != st.PrefetchSlotsGranted {
		t.Errorf("after Close: %d slots granted, %d used, %d returned", st.PrefetchSlotsGranted, st.PrefetchSlotsUsed, st.PrefetchSlotsReturned)
	}
}

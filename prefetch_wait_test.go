package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// hotPair makes rule's pair k hot on l (two calls on Redis), takes a grant
// with the third call, and returns the pair's grant and key.
func hotPair(t *testing.T, l *Limiter, rule Rule) (*grant, lkey) {
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
	return l.prefetch.pair(k, nil, l.local), k
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
	live, left, p := g.id, g.slots-g.used, g.p
	g.asking = make(chan struct{}) // the test's request, early
	g.mu.Unlock()
	if left < 1 {
		t.Fatalf("the grant has %d slots left, want some", left)
	}
	l.askFor(context.Background(), l.conn.Load(), g, &p, k, 4, at.UnixMicro(), nil)
	g.mu.Lock()
	if g.id != live || g.next.slots != 4 {
		t.Fatalf("after the early request: live grant %q (was %q), next of %d slots; want the live one kept, the next of 4 waiting", g.id, live, g.next.slots)
	}
	g.mu.Unlock()
	for i := range left + 1 {
		if r, err := l.Allow(context.Background(), rule, "k"); err != nil || !r.Allowed {
			t.Fatalf("call %d after the early request = %+v, %v", i, r, err)
		}
	}
	g.mu.Lock()
	if g.next.id != "" || g.used != 1 || g.slots != 4 {
		t.Errorf("after the live grant's slots and one more: next %q, live %d of %d used; want the next one live, 1 of 4 used", g.next.id, g.used, g.slots)
	}
	g.mu.Unlock()
	if st := l.Stats(); st.PrefetchSlotsReturned != 0 || st.PrefetchSlotsUsed != uint64(1+left+1) {
		t.Errorf("Stats: %d slots used, %d returned; want %d used, none returned", st.PrefetchSlotsUsed, st.PrefetchSlotsReturned, 1+left+1)
	}
}

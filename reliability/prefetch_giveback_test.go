package reliability_test

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestPrefetchBanGivesBack: a ban stops a process' use of its slots at
// once, and what it left of them goes back to Redis (docs/prefetch.md,
// "Penalties"; "what a grant left goes back with the next request"). A
// takes a grant of 3 slots of a rule of 10 (banned at the first
// violation) and uses 1; B fills the log; A's AllowN(3) finds 2 slots, no
// more to be granted, and is rejected on Redis, and banned. After A's
// Close its Stats count every slot granted as used or returned, and
// Redis' log holds none of the 2 it did not use.
func TestPrefetchBanGivesBack(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	clk := testkit.NewClock()
	opts := testkit.Options(clk)
	opts.KeyPrefix = "pfban:"
	a := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	b := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	pen := &ratelimit.Penalty{BanAfter: 1, BanFor: 100 * time.Millisecond}
	rule := ratelimit.Rule{Name: "ban", Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Penalty: pen, Prefetch: 50 * time.Millisecond}
	plain := rule
	plain.Prefetch = 0
	for i := range 3 {
		if r := testkit.Allow(t, a, rule, "k"); !r.Allowed {
			t.Fatalf("A's call %d = %+v, want allowed", i, r)
		}
	}
	if st := a.Stats(); st.PrefetchSlotsGranted != 3 || st.PrefetchSlotsUsed != 1 {
		t.Fatalf("A's third call: %d slots granted, %d used; want 3 and 1", st.PrefetchSlotsGranted, st.PrefetchSlotsUsed)
	}
	clk.Advance(10 * time.Millisecond) // A's grant holds 2 slots until 50ms
	if r, err := b.AllowN(t.Context(), plain, "k", 5); err != nil || !r.Allowed {
		t.Fatalf("B's AllowN(5) = %+v, %v; want allowed: 2 + 3 slots + 5", r, err)
	}
	if r, err := a.AllowN(t.Context(), rule, "k", 3); err != nil || r.Allowed || !r.Banned {
		t.Fatalf("A's AllowN(3) on a full log = %+v, %v; want rejected and banned", r, err)
	}
	a.Close()
	st := a.Stats()
	logKey, _ := layoutKeys("pfban:", rule.Name, "k")
	if st.PrefetchSlotsGranted != st.PrefetchSlotsUsed+st.PrefetchSlotsReturned {
		t.Errorf("after Close A's Stats count %d slots granted, %d used, %d returned", st.PrefetchSlotsGranted, st.PrefetchSlotsUsed, st.PrefetchSlotsReturned)
	}
	if n := weightedCount(t, srv, logKey); n != 8 {
		t.Errorf("Redis' log holds %d events after A's Close, want 8: 2 on Redis, 1 slot used, B's 5", n)
	}
}

// TestPrefetchLapsedGivesBack: what a lapsed grant left unused goes back
// with the pair's next request (docs/prefetch.md, "Its price"), even when
// that request finds the log full but for those slots. A takes a grant of
// 3 slots of a rule of 10, uses 1, and its grant lapses; B fills the log
// (2 + 3 + 5); A's next call gives the 2 back with its request, which can
// then grant them again: it is allowed from a slot.
func TestPrefetchLapsedGivesBack(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	clk := testkit.NewClock()
	opts := testkit.Options(clk)
	opts.KeyPrefix = "pflapse:"
	var path ratelimit.Path
	aOpts := opts
	aOpts.OnDecision = func(d ratelimit.Decision) { path = d.Path }
	a := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), aOpts)
	b := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	rule := ratelimit.Rule{Name: "lapse", Limit: ratelimit.Limit{Rate: 10, Window: time.Second}, Prefetch: 50 * time.Millisecond}
	plain := rule
	plain.Prefetch = 0
	for i := range 3 {
		if r := testkit.Allow(t, a, rule, "k"); !r.Allowed {
			t.Fatalf("A's call %d = %+v, want allowed", i, r)
		}
	}
	if st := a.Stats(); st.PrefetchSlotsGranted != 3 || st.PrefetchSlotsUsed != 1 {
		t.Fatalf("A's third call: %d slots granted, %d used; want 3 and 1", st.PrefetchSlotsGranted, st.PrefetchSlotsUsed)
	}
	clk.Advance(60 * time.Millisecond) // A's grant lapsed, 2 slots unused
	if r, err := b.AllowN(t.Context(), plain, "k", 5); err != nil || !r.Allowed {
		t.Fatalf("B's AllowN(5) = %+v, %v; want allowed: 2 + 3 slots + 5", r, err)
	}
	if r := testkit.Allow(t, a, rule, "k"); !r.Allowed || path != ratelimit.PathPrefetch {
		t.Errorf("A's call after its grant lapsed = %+v on %v, want allowed from a slot it gave back and was granted again; stats %+v", r, path, a.Stats())
	}
	if st := a.Stats(); st.PrefetchSlotsReturned != 2 {
		t.Errorf("A returned %d slots, want the 2 its lapsed grant left", st.PrefetchSlotsReturned)
	}
}

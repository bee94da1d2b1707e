package grant

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// books records what a Pair reports.
type books struct {
	unmirrored []string // "plan at n"
	owed       []Back[string, string]
}

func (b *books) Unmirror(k string, p *string, at, n int64) {
	b.unmirrored = append(b.unmirrored, fmt.Sprintf("%s %s %d %d", k, *p, at, n))
}

func (b *books) Owe(gb Back[string, string]) { b.owed = append(b.owed, gb) }

var _ Books[string, string] = (*books)(nil)

// terms: Rate 100, Prefetch 20ms.
var terms = Terms{Rate: 100, Prefetch: 20_000}

// newPair returns key "k"'s Pair under plan "p" and terms, and its books.
func newPair(t Terms) (*Pair[string, string], *books) {
	b := &books{}
	g := New[string, string]("k", "p", t, b)
	return &g, b
}

// slots is a grant of n slots under id, made at at (µs), usable for 20ms,
// the meter's count 10 before it.
func slots(id string, n, at int64) Slots[string] {
	return Slots[string]{Plan: "p", Terms: terms, ID: id, N: n, Until: at + 20_000, Count: 10, At: 7, Mark: 3, Empty: at + 1_000_000}
}

// TestHas: a grant's slots are usable while the clock reads less than its
// Until, and while it has them.
func TestHas(t *testing.T) {
	g, _ := newPair(terms)
	if g.Has(0, 1) {
		t.Fatal("a pair with no grant has slots")
	}
	g.Install(slots("a", 3, 0), 0)
	for _, c := range []struct {
		now, n int64
		want   bool
	}{
		{0, 1, true},
		{0, 3, true},
		{0, 4, false},
		{19_999, 3, true},
		{20_000, 1, false}, // Until: lapsed
		{25_000, 1, false},
	} {
		if got := g.Has(c.now, c.n); got != c.want {
			t.Errorf("Has(%d, %d) = %v, want %v", c.now, c.n, got, c.want)
		}
	}
	g.Use(2, 1_000)
	if g.Has(1_000, 2) || !g.Has(1_000, 1) {
		t.Errorf("after 2 of 3 used: Has(2) = %v, Has(1) = %v; want false, true", g.Has(1_000, 2), g.Has(1_000, 1))
	}
}

// TestUseReports: a call allowed from a grant reports the meter's count at
// the grant less what the process used of it since, and when the meter is
// empty.
func TestUseReports(t *testing.T) {
	g, _ := newPair(terms)
	g.Install(slots("a", 95, 0), 0)
	for i, c := range []struct {
		n, now int64
		want   Use
	}{
		{1, 0, Use{Limit: 100, Remaining: 89, ResetAfter: time.Second}},
		{3, 500, Use{Limit: 100, Remaining: 86, ResetAfter: time.Second - 500*time.Microsecond}},
		{86, 1_000, Use{Limit: 100, Remaining: 0, ResetAfter: time.Second - time.Millisecond}},
		{5, 1_000, Use{Limit: 100, Remaining: 0, ResetAfter: time.Second - time.Millisecond}}, // past Rate: 0, never negative
	} {
		if got, _ := g.Use(c.n, c.now); got != c.want {
			t.Errorf("use %d: Use(%d, %d) = %+v, want %+v", i, c.n, c.now, got, c.want)
		}
	}
}

// TestNextWaitsForLive: a grant that comes while the live one has slots
// waits until they are used or lapse; the live one's leftover then goes
// back with the next request, and nothing is owed or unmirrored.
func TestNextWaitsForLive(t *testing.T) {
	for _, c := range []struct {
		name     string
		use      int64 // of the live grant's 3 slots, before the check
		now      int64 // the check's instant
		wantLive string
		pending  Back[string, string]
	}{
		{"slots left, in time", 2, 10_000, "a", Back[string, string]{}},
		{"used up", 3, 10_000, "b", Back[string, string]{}}, // nothing left: nothing pending
		{"lapsed", 1, 20_000, "b", Back[string, string]{Key: "k", Plan: "p", ID: "a", From: 2, To: 3, At: 7, Mark: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, bk := newPair(terms)
			g.Install(slots("a", 3, 0), 0)
			if served := g.Install(slots("b", 4, 5_000), 5_000); served != 0 {
				t.Fatalf("a next grant served %d", served)
			}
			if s, _ := g.Live(); s.ID != "a" || g.Next().ID != "b" {
				t.Fatalf("after the early grant: live %q, next %q; want a, b", s.ID, g.Next().ID)
			}
			if c.use > 0 {
				g.Use(c.use, 1_000)
			}
			g.Current(c.now, 1)
			s, used := g.Live()
			if s.ID != c.wantLive {
				t.Fatalf("Current(%d): live %q, want %q", c.now, s.ID, c.wantLive)
			}
			if c.wantLive == "b" && (used != 0 || g.Next().ID != "") {
				t.Errorf("the next grant made live: %d used, next %q; want 0, none", used, g.Next().ID)
			}
			if b, _ := g.TakePending(); b != c.pending {
				t.Errorf("pending = %+v, want %+v", b, c.pending)
			}
			wantUnmirrored := []string(nil)
			if c.pending.ID != "" {
				wantUnmirrored = []string{"k p 19999 2"}
			}
			if !reflect.DeepEqual(bk.unmirrored, wantUnmirrored) || len(bk.owed) != 0 {
				t.Errorf("unmirrored %q, owed %+v; want %q, none", bk.unmirrored, bk.owed, wantUnmirrored)
			}
		})
	}
}

// TestThirdGrant: a grant that comes while a next one waits makes the live
// one give way: the next becomes live, the third waits.
func TestThirdGrant(t *testing.T) {
	g, _ := newPair(terms)
	g.Install(slots("a", 3, 0), 0)
	g.Install(slots("b", 3, 1_000), 1_000)
	g.Install(slots("c", 3, 2_000), 2_000)
	if s, _ := g.Live(); s.ID != "b" || g.Next().ID != "c" {
		t.Errorf("live %q, next %q; want b, c", s.ID, g.Next().ID)
	}
	if b, _ := g.TakePending(); b.ID != "a" || b.From != 1 || b.To != 3 {
		t.Errorf("pending = %+v, want a's slots 1..3", b)
	}
}

// TestWaitersServedInOrder: the grant a request brings serves the calls
// that waited for it first come first, while it holds their slots; a call
// that left is skipped, and one it cannot serve stops the others.
func TestWaitersServedInOrder(t *testing.T) {
	for _, c := range []struct {
		name   string
		ns     []int64 // the waiters' events, in the order they came
		leave  int     // index of a waiter that left (-1: none)
		slots  int64
		served []bool
		total  int64
	}{
		{"three of five", []int64{1, 1, 1, 1, 1}, -1, 3, []bool{true, true, true, false, false}, 3},
		{"one left", []int64{1, 1, 1, 1}, 1, 3, []bool{true, false, true, true}, 3},
		{"a big one stops the rest", []int64{2, 2, 1}, -1, 3, []bool{true, false, false}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _ := newPair(terms)
			ws := make([]*Waiter, len(c.ns))
			for i, n := range c.ns {
				ws[i] = g.Enqueue(n)
			}
			if c.leave >= 0 {
				ws[c.leave].Leave()
			}
			if g.Queued() != len(c.ns) {
				t.Fatalf("Queued() = %d, want %d", g.Queued(), len(c.ns))
			}
			if total := g.Install(slots("a", c.slots, 0), 100); total != c.total {
				t.Errorf("Install served %d slots, want %d", total, c.total)
			}
			remaining := 100 - 10
			for i, w := range ws {
				u, ok := w.Served()
				if ok != c.served[i] {
					t.Errorf("waiter %d served %v, want %v", i, ok, c.served[i])
				}
				if ok {
					remaining -= int(c.ns[i])
					if u.Remaining != remaining {
						t.Errorf("waiter %d's Remaining = %d, want %d: served in the order they came", i, u.Remaining, remaining)
					}
				}
			}
			if g.Queued() != 0 {
				t.Errorf("the queue holds %d after the grant came", g.Queued())
			}
		})
	}
}

// TestDemand: the pair's rate is its allowed events in the current
// Prefetch-long bucket or the one before, or its calls' waits in them, when
// more; a bucket skipped forgets both.
func TestDemand(t *testing.T) {
	g, _ := newPair(terms) // buckets of 20ms
	for i, s := range []struct {
		now            int64
		allowed, waits int64
		want           int64
	}{
		{0, 2, 0, 2},
		{19_999, 3, 0, 5},
		{20_000, 1, 0, 5},  // the bucket before: 5
		{39_999, 0, 7, 7},  // waits: 7
		{40_000, 0, 0, 7},  // the bucket before's waits
		{60_000, 4, 0, 4},  // 40ms's bucket held nothing
		{100_000, 0, 0, 0}, // a bucket skipped: nothing
		{-5, 0, 0, 0},      // the clock went back: no roll
	} {
		g.Roll(s.now)
		g.Allowed(s.allowed)
		g.Waited(s.waits)
		if got := g.Demand(); got != s.want {
			t.Errorf("step %d at %dµs: Demand() = %d, want %d", i, s.now, got, s.want)
		}
	}
}

// TestUseAsks: a call that finds the grant low (under a quarter of the
// pair's rate left, under an eighth of its time, or less than a round trip
// of it at the pair's rate) asks for the pair's rate less what the grant
// still serves before it lapses, and none while a next grant waits.
func TestUseAsks(t *testing.T) {
	const at = 20_000 // the grant's time: the pair's rate is the bucket before's
	for _, c := range []struct {
		name  string
		rate  int64 // allowed in the bucket before
		lat   int64 // a request's round trip (0: none yet)
		slots int64
		now   int64 // the use's instant, from the grant's (usable for 20ms)
		next  bool
		want  int64
	}{
		{"plenty left", 40, 0, 100, 1_000, false, 0},
		{"under a quarter of the rate left", 40, 0, 10, 1_000, false, 40 - 9},
		{"under an eighth of the time left", 40, 0, 100, 17_501, false, 40 - 40*2_499/20_000},
		{"a round trip outlasts it", 40, 19_500, 100, 1_000, false, 40 - 40*19_000/20_000},
		{"a next grant waits", 40, 0, 10, 1_000, true, 0},
		{"cold: the call alone", 0, 0, 10, 1_000, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _ := newPair(terms)
			g.Allowed(c.rate)
			g.Roll(at)
			if c.lat > 0 {
				g.lat = c.lat
			}
			g.Install(slots("a", c.slots, at), at)
			if c.next {
				g.Install(slots("b", 5, at), at)
			}
			if _, want := g.Use(1, at+c.now); want != c.want {
				t.Errorf("Use(1, %d) asks for %d, want %d", at+c.now, want, c.want)
			}
		})
	}
}

// TestRoundTrip: a request's cap halves after a round trip longer than
// half of Prefetch (to MinCap at least), doubles after one shorter than a
// quarter, and stops capping past 2^40; Ask caps at it, 1 at least.
func TestRoundTrip(t *testing.T) {
	g, _ := newPair(terms)
	for i, s := range []struct {
		want, rt int64
		ask      int64 // Ask(1000) after it
		lat      int64
	}{
		{1000, 5_000, 1000, 5_000}, // a quarter: no cap yet
		{1000, 10_001, 500, 6_250}, // over half: 1000/2
		{1000, 7_000, 500, 6_437},  // between: kept
		{100, 10_001, 64, 7_328},   // halved to MinCap at least
		{1000, 4_999, 128, 6_745},  // under a quarter: doubled
		{1000, 1_000, 256, 5_308},  // doubled again
	} {
		g.RoundTrip(terms.Prefetch, s.want, s.rt)
		if got := g.Ask(1000); got != s.ask || g.lat != s.lat {
			t.Errorf("step %d: Ask(1000) = %d, lat %d; want %d, %d", i, got, g.lat, s.ask, s.lat)
		}
	}
	if got := g.Ask(0); got != 1 {
		t.Errorf("Ask(0) under a cap = %d, want 1", got)
	}
	g.capSlots = 1 << 40
	g.RoundTrip(terms.Prefetch, 1000, 0)
	if g.capSlots != 0 || g.Ask(5000) != 5000 {
		t.Errorf("past 2^40: cap %d, Ask(5000) = %d; want no cap", g.capSlots, g.Ask(5000))
	}
}

// TestGiveBack: what goes back of a pair's grants, and where from: the live
// one's unused slots (used+1 .. N), the next one's all, the pending one;
// a reservation's grant even when all used; a ban's, owed at once.
func TestGiveBack(t *testing.T) {
	back := func(id string, from, to int64) Back[string, string] {
		return Back[string, string]{Key: "k", Plan: "p", ID: id, From: from, To: to, At: 7, Mark: 3}
	}
	t.Run("drop", func(t *testing.T) {
		g, bk := newPair(terms)
		g.Install(slots("a", 5, 0), 0)
		g.Use(2, 0)
		g.Current(20_000, 1) // no next: a stays
		g.Install(slots("b", 4, 1_000), 1_000)
		g.Current(20_000, 1) // a lapsed: b live, a's 3..5 pending
		g.Use(1, 20_000)
		g.Install(slots("c", 6, 20_500), 20_500)
		got := g.Drop()
		want := []Back[string, string]{back("b", 2, 4), back("c", 1, 6), back("a", 3, 5)}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Drop() = %+v\nwant %+v", got, want)
		}
		wantUn := []string{"k p 19999 3", "k p 20999 3", "k p 40499 6"}
		if !reflect.DeepEqual(bk.unmirrored, wantUn) {
			t.Errorf("unmirrored %q, want %q", bk.unmirrored, wantUn)
		}
		if got := g.Drop(); got != nil || g.Has(20_500, 1) {
			t.Errorf("a second Drop() = %+v, Has %v; want nothing", got, g.Has(20_500, 1))
		}
	})
	t.Run("all used", func(t *testing.T) {
		for _, records := range []bool{false, true} {
			tm := terms
			tm.Records = records
			g, bk := newPair(tm)
			s := slots("a", 2, 0)
			s.Terms = tm
			g.Install(s, 0)
			g.Use(2, 0)
			got := g.Drop()
			var want []Back[string, string]
			if records {
				want = []Back[string, string]{back("a", 3, 2)} // a reservation, settled at what was used
			}
			if !reflect.DeepEqual(got, want) || len(bk.unmirrored) != 0 {
				t.Errorf("Records %v: Drop() = %+v, unmirrored %q; want %+v, none", records, got, bk.unmirrored, want)
			}
		}
	})
	t.Run("ban", func(t *testing.T) {
		g, bk := newPair(terms)
		g.Install(slots("a", 5, 0), 0)
		g.Use(1, 0)
		g.Install(slots("b", 4, 0), 0)
		g.Ban()
		if g.Has(0, 1) || g.Next().ID != "" {
			t.Errorf("after Ban: Has %v, next %q; want no slot", g.Has(0, 1), g.Next().ID)
		}
		if want := []Back[string, string]{back("b", 1, 4)}; !reflect.DeepEqual(bk.owed, want) {
			t.Errorf("owed %+v, want %+v", bk.owed, want)
		}
		if b, _ := g.TakePending(); b != back("a", 2, 5) {
			t.Errorf("pending %+v, want a's 2..5", b)
		}
	})
	t.Run("a pending one displaced is owed", func(t *testing.T) {
		g, bk := newPair(terms)
		g.Install(slots("a", 5, 0), 0)
		g.Ban() // a's 1..5 pending
		g.Install(slots("b", 4, 0), 0)
		g.Ban() // b's 1..4 pending; a's owed
		if want := []Back[string, string]{back("a", 1, 5)}; !reflect.DeepEqual(bk.owed, want) {
			t.Errorf("owed %+v, want %+v", bk.owed, want)
		}
		if b, ok := g.TakePending(); !ok || b != back("b", 1, 4) {
			t.Errorf("pending %+v, %v; want b's 1..4", b, ok)
		}
		if _, ok := g.TakePending(); ok {
			t.Error("TakePending twice took something")
		}
	})
}

// TestSetPlan: a changed plan takes effect in the rate's buckets and in
// what the next grant carries.
func TestSetPlan(t *testing.T) {
	g, _ := newPair(terms)
	g.SetPlan("q", Terms{Rate: 50, Prefetch: 10_000})
	if *g.Plan() != "q" {
		t.Errorf("Plan() = %q, want q", *g.Plan())
	}
	g.Roll(10_000) // bucket 1 of 10ms
	g.Allowed(3)
	g.Roll(20_000)
	if got := g.Demand(); got != 3 {
		t.Errorf("Demand() = %d after a 10ms bucket, want 3", got)
	}
}

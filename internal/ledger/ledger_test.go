package ledger

import (
	"slices"
	"testing"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// key and plan stand for the caller's pair key and plan.
type key struct{ rule, key string }

type plan struct{ due int64 }

var (
	log10 = Terms{Stamps: Stamps{Kind: "log", Window: 10}}
	p0    = plan{}
)

func dueOf(p *plan, _ int64) int64 { return p.due }

// ids returns a newID that names batches b1, b2, …
func ids() func() string {
	n := 0
	return func() string { n++; return "b" + string(rune('0'+n)) }
}

func newLedger(max int64) (*Ledger[key, plan], *Owing) {
	o := &Owing{}
	o.SetMax(max)
	l := New[key, plan](64, o)
	return &l, o
}

func checkOwing(t *testing.T, o *Owing, events, debts int64, written, dropped uint64) {
	t.Helper()
	if o.Events() != events || o.Debts() != debts || o.Written() != written || o.Dropped() != dropped {
		t.Fatalf("owing: events %d, debts %d, written %d, dropped %d; want %d, %d, %d, %d",
			o.Events(), o.Debts(), o.Written(), o.Dropped(), events, debts, written, dropped)
	}
}

// TestDebtCollision: a debt that gives way to another pair under the same
// hash has its events counted as dropped, as an eviction would.
func TestDebtCollision(t *testing.T) {
	l, o := newLedger(1000)
	a, b := key{"r", "a"}, key{"r", "b"}
	l.OweEvents(&a, 7, &p0, log10, nil, 100, 100, 3, "")
	l.OweEvents(&b, 7, &p0, log10, nil, 100, 100, 2, "") // b under a's hash
	checkOwing(t, o, 2, 1, 0, 3)
	if l.Of(&a, 7) != nil || l.Of(&b, 7).Since(0) != 2 {
		t.Fatal("b's debt should have replaced a's")
	}
}

// TestOwingBound: past its Max, the oldest events of the least recently
// owing debts are dropped first, the owing pair's own included.
func TestOwingBound(t *testing.T) {
	l, o := newLedger(5)
	a, b := key{"r", "a"}, key{"r", "b"}
	l.OweEvents(&a, 1, &p0, log10, nil, 1, 1, 3, "")
	l.OweEvents(&b, 2, &p0, log10, nil, 2, 2, 4, "") // 7: two of a's go
	checkOwing(t, o, 5, 2, 0, 2)
	if got := l.Of(&a, 1).Since(0); got != 1 {
		t.Fatalf("a owes %d, want 1", got)
	}
	l.OweEvents(&b, 2, &p0, log10, nil, 3, 3, 3, "") // 8: a's last, then b's two oldest
	checkOwing(t, o, 5, 1, 0, 5)
	d := l.Of(&b, 2)
	if l.Of(&a, 1) != nil || d.Since(0) != 5 || d.Since(3) != 3 {
		t.Fatalf("b owes %d (%d from 3), a's debt %v; want 5 (3), none", d.Since(0), d.Since(3), l.Of(&a, 1))
	}
}

// TestCutAndSettle: a batch carries what still counts; a lost reply's
// batch is sent again as it is, under its id; an applied one leaves the
// debt, a refused one is dropped, an unsent one is cut afresh.
func TestCutAndSettle(t *testing.T) {
	l, o := newLedger(100)
	k := key{"r", "k"}
	p := plan{due: 15}
	l.OweEvents(&k, 3, &p, log10, nil, 10, 10, 3, "")
	l.OweEvents(&k, 3, &p, log10, nil, 20, 20, 2, "")
	newID := ids()
	bs := l.Cut(30, dueOf, newID)
	if len(bs) != 1 || bs[0].ID != "b1" || !slices.Equal(bs[0].Events, []eventlog.Event{{At: 20, N: 2}}) || bs[0].Key != k {
		t.Fatalf("cut %+v; want one batch b1 of 2 events at 20 (those at 10 are due no more)", bs)
	}
	checkOwing(t, o, 2, 1, 0, 0)
	l.Settle(bs[0], 3, Unsure)
	re := l.Cut(30, dueOf, newID)
	if len(re) != 1 || re[0] != bs[0] {
		t.Fatalf("after a lost reply the cut gave %+v; want b1 again as it was", re)
	}
	l.Settle(re[0], 3, Applied)
	checkOwing(t, o, 0, 0, 2, 0)
	if l.Len() != 0 {
		t.Fatal("a paid debt stays")
	}

	l.OweEvents(&k, 3, &p, log10, nil, 20, 20, 4, "")
	bs = l.Cut(30, dueOf, newID)
	l.Settle(bs[0], 3, Unsent)
	fresh := l.Cut(30, dueOf, newID)
	if len(fresh) != 1 || fresh[0] == bs[0] || fresh[0].ID == bs[0].ID {
		t.Fatalf("after an unsent batch the cut gave %+v; want a fresh one", fresh)
	}
	l.Settle(fresh[0], 3, Refused)
	checkOwing(t, o, 0, 0, 2, 4)
}

// TestStampsChangeDropsWhatWasOwed: a rule that stamps otherwise under the
// same name (another window here) drops what its pair owed.
func TestStampsChangeDropsWhatWasOwed(t *testing.T) {
	l, o := newLedger(100)
	k := key{"r", "k"}
	l.OweEvents(&k, 3, &p0, log10, nil, 10, 10, 3, "")
	log20 := log10
	log20.Stamps.Window = 20
	l.OweEvents(&k, 3, &p0, log20, nil, 11, 11, 1, "")
	checkOwing(t, o, 1, 1, 0, 3)
	if l.OfKind(&k, 3, "log") == nil || l.OfKind(&k, 3, "bucket") != nil {
		t.Fatal("OfKind should find the debt by its kind only")
	}
}

// TestNamedEvents: events owed under a member are written back under it,
// at most as many as the debt still holds at their stamp.
func TestNamedEvents(t *testing.T) {
	l, _ := newLedger(100)
	k := key{"r", "k"}
	l.OweEvents(&k, 3, &p0, log10, nil, 5, 5, 2, "m1")
	l.OweEvents(&k, 3, &p0, log10, nil, 5, 5, 1, "")
	l.OweEvents(&k, 3, &p0, log10, nil, 6, 6, 1, "m2")
	if got := l.Forget(&k, 3, "log", 5, 2); got != 2 {
		t.Fatalf("Forget took %d, want 2", got)
	}
	l.LessNamed(&k, 3, "m2", -1)
	bs := l.Cut(7, dueOf, ids())
	if len(bs) != 1 || !slices.Equal(bs[0].Named, []Named{{At: 5, N: 1, Member: "m1"}}) {
		t.Fatalf("named %+v; want m1's one event left at 5", bs[0].Named)
	}
}

// TestViolationsHandedAndOwed: the violations a debt owes are handed to a
// call that delivers them, given back when it does not, forgotten after
// the ladder's memory, and written back with a batch.
func TestViolationsHandedAndOwed(t *testing.T) {
	l, _ := newLedger(100)
	k := key{"r", "k"}
	ladder := Terms{Stamps: log10.Stamps, Penalize: true, Memory: 100}
	l.OweViolation(&k, 3, &p0, ladder, 10, 0)
	l.OweViolation(&k, 3, &p0, ladder, 20, 50) // and a ban until 70
	d := l.Of(&k, 3)
	if v, b := d.Strikes(50, 100); v != 2 || b != 1 {
		t.Fatalf("strikes %d, %d; want 2, 1", v, b)
	}
	if v, b := d.Strikes(120, 100); v != 0 || b != 0 {
		t.Fatalf("strikes after the memory %d, %d; want none", v, b)
	}
	v, at := d.Hand(50)
	if v != 2 || at != 20 {
		t.Fatalf("handed %d at %d; want 2 at 20", v, at)
	}
	if v, _ := d.Strikes(50, 100); v != 0 {
		t.Fatalf("%d violations owed once handed, want none", v)
	}
	if v, _ := d.Hand(50); v != 0 {
		t.Fatal("handed twice")
	}
	l.OweStrikes(&k, 3, &p0, ladder, v, at) // not delivered
	bs := l.Cut(60, dueOf, ids())
	if len(bs) != 1 || bs[0].Violations != 2 || bs[0].Bans != 1 || bs[0].BanEnd != 70 || bs[0].LastViolation != 20 {
		t.Fatalf("batch %+v; want 2 violations, 1 ban until 70, the last at 20", bs)
	}
	if v, _ := d.Hand(60); v != 0 {
		t.Fatal("violations of a batch on its way were handed")
	}
	l.Settle(bs[0], 3, Applied)
	if l.Len() != 0 {
		t.Fatal("a paid debt of violations stays")
	}
}

// TestResetWhileOnItsWay: a Reset forgets the debt; with a batch of it on
// its way, the Reset itself is owed, to land after the batch.
func TestResetWhileOnItsWay(t *testing.T) {
	l, o := newLedger(100)
	k := key{"r", "k"}
	l.OweEvents(&k, 3, &p0, log10, nil, 10, 10, 3, "")
	l.Reset(&k, 3, &p0, log10, 11)
	checkOwing(t, o, 0, 0, 0, 0)
	l.OweEvents(&k, 3, &p0, log10, nil, 12, 12, 3, "")
	bs := l.Cut(13, dueOf, ids())
	l.Reset(&k, 3, &p0, log10, 14)
	l.Settle(bs[0], 3, Applied) // the debt it came from is gone: nothing
	next := l.Cut(15, dueOf, ids())
	if len(next) != 1 || !next[0].Reset || next[0].ResetAt != 14 || len(next[0].Events) != 0 {
		t.Fatalf("after a Reset with a batch on its way the cut gave %+v; want the Reset at 14 alone", next)
	}
}

// TestFoldedCarry: a bucket's tokens are owed as what they hold of it; a
// cut folds them into one lump at the cut, and once Redis has it only the
// tokens taken since are owed, queued behind it.
func TestFoldedCarry(t *testing.T) {
	l, o := newLedger(100)
	k := key{"r", "k"}
	bucket := Terms{Stamps: Stamps{Kind: "gcra", Window: 1_000_000}}
	var b meter.Bucket
	wq, rq := meter.Ticks(1_000_000, 10) // 10 a second: a token each 100ms
	b.Fit(wq, rq, 10)
	const t0 = 5_000_000
	for i := range int64(10) { // the burst, one token each 10ms
		now := t0 + i*10_000
		b.Add(now, 0, 1)
		l.OweEvents(&k, 3, &p0, bucket, &b, now, now, 1, "")
	}
	cut := int64(t0 + 500_000)
	d := l.Of(&k, 3)
	// The bucket's TAT is t0 + 1s: at the cut, 500ms of it, 5 tokens, lie
	// beyond now; the 10 tokens' events alone would say 10.
	if got := d.OwedAt(cut, 0); got != 5 {
		t.Fatalf("owed at the cut %d, want 5", got)
	}
	bs := l.Cut(cut, dueOf, ids())
	if len(bs) != 1 || !slices.Equal(bs[0].Events, []eventlog.Event{{At: cut, N: 5}}) {
		t.Fatalf("cut %+v; want one lump of 5 tokens at the cut", bs)
	}
	checkOwing(t, o, 5, 1, 0, 0)
	now := cut + 10_000
	for range 3 { // taken while the batch is on its way
		b.Add(now, 0, 1)
		l.OweEvents(&k, 3, &p0, bucket, &b, now, now, 1, "")
	}
	l.Settle(bs[0], 3, Applied)
	checkOwing(t, o, 3, 1, 5, 0)
	if got := d.OwedAt(now, 0); got != 3 {
		t.Fatalf("owed once the lump landed %d, want the 3 tokens taken since", got)
	}
	// An undo of one: the other two queue behind what Redis holds since
	// the lump landed (its TAT t0+1s), as they did in the bucket.
	if got := l.Forget(&k, 3, "gcra", now, 1); got != 1 {
		t.Fatalf("Forget took %d, want 1", got)
	}
	if got := d.OwedAt(t0+900_000, 0); got != 2 {
		t.Fatalf("owed at t0+900ms after the undo %d, want 2", got)
	}
}

// TestQueue: what waits is taken oldest first, once; past its bound the
// oldest is dropped and returned.
func TestQueue(t *testing.T) {
	var q Queue[int]
	if q.Pending() || q.Take() != nil {
		t.Fatal("a zero Queue holds something")
	}
	for i := 1; i <= 3; i++ {
		if _, dropped := q.Add(i, 3); dropped {
			t.Fatalf("adding %d within the bound dropped one", i)
		}
	}
	if old, dropped := q.Add(4, 3); !dropped || old != 1 {
		t.Fatalf("adding past the bound dropped %d, %v; want 1", old, dropped)
	}
	if !q.Pending() {
		t.Fatal("nothing pending")
	}
	if got := q.Take(); !slices.Equal(got, []int{2, 3, 4}) || q.Pending() {
		t.Fatalf("took %v (pending after: %v), want [2 3 4] once", got, q.Pending())
	}
}

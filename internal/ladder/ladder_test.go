package ladder

import (
	"strconv"
	"testing"
)

func TestBanLength(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Plan
		want []int64 // after 0, 1, 2… bans
	}{
		{"no growth", Plan{BanFor: 7, Growth: 1, MaxBan: 100}, []int64{7, 7, 7}},
		{"doubling, capped", Plan{BanFor: 3, Growth: 2, MaxBan: 20}, []int64{3, 6, 12, 20, 20}},
		// Repeated products, floored once: 4.5, 6.75, 10.125 (a power
		// floored at each step would give 4, 6, 9).
		{"fractional", Plan{BanFor: 3, Growth: 1.5, MaxBan: 1000}, []int64{3, 4, 6, 10}},
	} {
		for bans, want := range c.want {
			if got := c.p.BanLength(int64(bans)); got != want {
				t.Errorf("%s: after %d bans %d, want %d", c.name, bans, got, want)
			}
		}
	}
}

// TestClimb walks one pair up the ladder at exact instants: a warning from
// WarnAfter, a ban at BanAfter, a longer ban while the violations are
// remembered, and a fresh start once they are forgotten.
func TestClimb(t *testing.T) {
	p := Plan{WarnAfter: 2, BanAfter: 3, BanFor: 100, Memory: 1000, Growth: 2, MaxBan: 1000}
	var s Strikes
	for _, c := range []struct {
		now, ban     int64
		warned       bool
		violations   int64
		banEnd, bans int64
	}{
		{now: 0, violations: 1},
		{now: 10, warned: true, violations: 2},
		{now: 20, ban: 100, violations: 3, banEnd: 120, bans: 1},
		{now: 500, ban: 200, violations: 4, banEnd: 700, bans: 2},
		{now: 1500, violations: 1, banEnd: 700}, // 1000 after the last: forgotten, bans too
	} {
		ban, warned := p.Violate(&s, c.now)
		if ban != c.ban || warned != c.warned || s.Violations != c.violations || s.Last != c.now || s.BanEnd != c.banEnd || s.Bans != c.bans {
			t.Fatalf("at %d: ban %d, warned %v, %+v; want ban %d, warned %v, %+v", c.now, ban, warned, s, c.ban, c.warned, c)
		}
	}
	if got := p.Remembered(&s, 2499); got != 1 {
		t.Errorf("remembered at 2499: %d, want 1", got)
	}
	if got := p.Remembered(&s, 2500); got != 0 {
		t.Errorf("remembered at 2500, Memory after the last: %d, want 0", got)
	}
	if got := p.Remembered(nil, 0); got != 0 {
		t.Errorf("remembered of no record: %d", got)
	}
}

type pair struct{ rule, key string }

// wantLen fails t unless b holds strikes violation records and bans bans.
func wantLen(t *testing.T, b *Book[pair], strikes, bans int) {
	t.Helper()
	if s, n := b.Len(); s != strikes || n != bans {
		t.Fatalf("%d violation records and %d bans, want %d and %d", s, n, strikes, bans)
	}
}

func TestBookBanAndItsEnd(t *testing.T) {
	b := New[pair](8)
	p := Plan{BanAfter: 2, BanFor: 100, Memory: 1000, Growth: 1, MaxBan: 100}
	k := pair{"r", "k"}
	if v, ban, warned := b.Violate(&k, 1, &p, 0); v != 1 || ban != 0 || warned {
		t.Fatalf("first violation: %d, %d, %v", v, ban, warned)
	}
	if !b.WouldBan(&k, 1, &p, 5) {
		t.Fatal("the second violation bans, WouldBan says no")
	}
	if v, ban, _ := b.Violate(&k, 1, &p, 10); v != 2 || ban != 100 {
		t.Fatalf("second violation: %d, ban %d, want 2, 100", v, ban)
	}
	wantLen(t, &b, 0, 1)
	if !b.Banning() {
		t.Fatal("a Book with a ban says it holds none")
	}
	if v, left := b.Standing(&k, 1, &p, 60); v != 2 || left != 50 {
		t.Fatalf("standing at 60: %d, %d left, want 2, 50", v, left)
	}
	if left := b.BanLeft(&k, 1, 110); left != 0 {
		t.Fatalf("ban left at its end: %d", left)
	}
	// Looked at after its end, the ban went back among the violations,
	// which it did not clear.
	wantLen(t, &b, 1, 0)
	if v := b.Remembered(&k, 1, &p, 110); v != 2 {
		t.Fatalf("violations after the ban: %d, want 2", v)
	}
	b.Forget(&k, 1)
	if st := b.Find(&k, 1, 110); st != nil {
		t.Fatalf("forgotten, found %+v", st)
	}
}

func TestBookBanByHand(t *testing.T) {
	b := New[pair](8)
	p := Plan{BanAfter: 5, BanFor: 100, Memory: 1000, Growth: 1, MaxBan: 100}
	k := pair{"r", "k"}
	b.Violate(&k, 1, &p, 0)
	b.Ban(&k, 1, 10, 60)
	if v, left := b.Standing(&k, 1, &p, 20); v != 1 || left != 40 {
		t.Fatalf("banned by hand: %d violations, %d left; want 1, 40", v, left)
	}
	other := pair{"r", "other"}
	b.Ban(&other, 2, 10, 30)
	wantLen(t, &b, 0, 2)
}

func TestBookMirror(t *testing.T) {
	b := New[pair](8)
	p := Plan{BanAfter: 5, BanFor: 100, Memory: 1000, Growth: 1, MaxBan: 100}
	k := pair{"r", "k"}
	b.Mirror(&k, 1, 10, Strikes{Violations: 3, Bans: 1}, true)
	if st := b.Find(&k, 1, 10); st == nil || *st != (Strikes{Violations: 3, Last: 10, Bans: 1}) {
		t.Fatalf("mirrored a violation: %+v", st)
	}
	// An allowed call's reply keeps the last violation's time.
	b.Mirror(&k, 1, 50, Strikes{Violations: 3, Bans: 1}, false)
	if st := b.Find(&k, 1, 50); st.Last != 10 {
		t.Fatalf("an allowed call moved the last violation to %d", st.Last)
	}
	b.Mirror(&k, 1, 60, Strikes{Violations: 5, Bans: 2, BanEnd: 160}, true)
	if v, left := b.Standing(&k, 1, &p, 100); v != 5 || left != 60 {
		t.Fatalf("mirrored ban: %d, %d left", v, left)
	}
	wantLen(t, &b, 0, 1)
	b.Mirror(&k, 1, 200, Strikes{}, false)
	wantLen(t, &b, 0, 0)
}

// TestViolatorsDoNotEvictBans floods a Book with violators: an active ban
// stays, and the tables stay within their size.
func TestViolatorsDoNotEvictBans(t *testing.T) {
	b := New[pair](4)
	p := Plan{BanAfter: 1, BanFor: 1000, Memory: 1000, Growth: 1, MaxBan: 1000}
	bad := pair{"r", "bad"}
	b.Violate(&bad, 0, &p, 0)
	lenient := Plan{BanAfter: 100, BanFor: 1000, Memory: 1000, Growth: 1, MaxBan: 1000}
	for i := 1; i <= 100; i++ {
		k := pair{"r", strconv.Itoa(i)}
		b.Violate(&k, uint64(i), &lenient, 1)
	}
	if left := b.BanLeft(&bad, 0, 2); left != 998 {
		t.Fatalf("after the flood the ban has %d left, want 998", left)
	}
	wantLen(t, &b, 4, 1)
}

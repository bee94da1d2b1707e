package shield

import "testing"

// kind stands for a caller's identity of a rule's kind.
type kind struct{ name string }

var logKind = &kind{"log"}

func rejection(n int64, banned bool, since, until int64) Rejection[*kind] {
	return Rejection[*kind]{
		Terms: Terms[*kind]{Rate: 3, Window: 60e6, Kind: logKind},
		N:     n, Banned: banned, Since: since, Until: until,
		RetryAt: until, ResetAt: until + 10, Violations: 2, ForgetAt: until + 20,
	}
}

// A cached rejection answers calls from its caching until it ends, at
// exact instants; a late call before its caching is answered at its
// caching; a clock gone back behind it ends it.
func TestAtAndEnded(t *testing.T) {
	c := New[string, *kind](8)
	k := "user:1"
	c.Keep(&k, 1, rejection(1, false, 100, 200))
	r := c.Get(&k, 1)
	if r == nil || r.N != 1 {
		t.Fatalf("Get = %+v; want the rejection kept", r)
	}
	for _, tc := range []struct {
		name   string
		now    int64
		late   bool
		at     int64
		ending bool
	}{
		{"at its caching", 100, false, 100, false},
		{"just before it ends", 199, false, 199, false},
		{"at its end", 200, false, 200, true},
		{"a clock gone back behind it", 99, false, 99, true},
		{"a late call before its caching", 90, true, 100, false},
		{"a late call after its caching", 150, true, 150, false},
	} {
		at := r.At(tc.now, tc.late)
		if at != tc.at || r.Ended(at) != tc.ending {
			t.Errorf("%s: At(%d, %v) = %d, Ended %v; want %d, %v", tc.name, tc.now, tc.late, at, r.Ended(at), tc.at, tc.ending)
		}
	}
	other := "user:2"
	if c.Get(&other, 2) != nil || c.Holds(&other, 2) {
		t.Error("a pair never rejected has a rejection")
	}
}

// RemoveBans drops the bans and keeps the other rejections.
func TestRemoveBans(t *testing.T) {
	c := New[string, *kind](8)
	a, b := "a", "b"
	c.Keep(&a, 1, rejection(1, true, 100, 400))
	c.Keep(&b, 2, rejection(1, false, 100, 200))
	c.RemoveBans()
	if c.Holds(&a, 1) || !c.Holds(&b, 2) || c.Len() != 1 {
		t.Errorf("after RemoveBans: ban held %v, rejection held %v, %d cached; want only the rejection", c.Holds(&a, 1), c.Holds(&b, 2), c.Len())
	}
	c.Remove(&b, 2)
	if c.Len() != 0 {
		t.Error("Remove left the rejection cached")
	}
	c.RemoveBans() // on an empty cache
}

// Terms compare as a whole: a rule changed under its name differs.
func TestTerms(t *testing.T) {
	base := Terms[*kind]{Rate: 3, Window: 60e6, Kind: logKind}
	for _, changed := range []Terms[*kind]{
		{Rate: 4, Window: 60e6, Kind: logKind},
		{Rate: 3, Window: 1e6, Kind: logKind},
		{Rate: 3, Window: 60e6, Kind: logKind, Penalize: true},
		{Rate: 3, Window: 60e6, Kind: &kind{"gcra"}},
		{Rate: 3, Window: 60e6, Kind: logKind, Mark: 1},
	} {
		if changed == base {
			t.Errorf("%+v equals %+v", changed, base)
		}
	}
}

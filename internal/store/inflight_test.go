package store

import "testing"

func TestInFlightCountsEachPairApart(t *testing.T) {
	var f InFlight
	if s := f.Add(10, 2); s {
		t.Fatal("the first pair spilled")
	}
	f.Add(20, 1)
	f.Add(10, 3)
	if got := f.Of(10); got != 5 {
		t.Errorf("Of(10) = %d, want 5", got)
	}
	if got := f.Of(20); got != 1 {
		t.Errorf("Of(20) = %d, want 1", got)
	}
	if got := f.Of(30); got != 0 {
		t.Errorf("Of(30), a pair with nothing on its way, = %d, want 0", got)
	}
	f.Take(10, 2, false)
	f.Take(10, 3, false)
	if got := f.Of(10); got != 0 {
		t.Errorf("Of(10) after its calls landed = %d, want 0", got)
	}
	if got := f.Of(20); got != 1 {
		t.Errorf("Of(20) after pair 10 landed = %d, want 1", got)
	}
}

func TestInFlightHashZero(t *testing.T) {
	var f InFlight
	f.Add(0, 4)
	if got := f.Of(0); got != 4 {
		t.Errorf("Of(0) = %d, want 4", got)
	}
	f.Take(0, 4, false)
	if got := f.Of(0); got != 0 {
		t.Errorf("Of(0) after Take = %d, want 0", got)
	}
}

func TestInFlightSpillsOverEveryPair(t *testing.T) {
	var f InFlight
	for h := uint64(1); h <= inFlightPairs; h++ {
		if f.Add(h, 1) {
			t.Fatalf("pair %d spilled with places free", h)
		}
	}
	if !f.Add(100, 7) {
		t.Fatal("a pair beyond the places did not spill")
	}
	// A spilled event may be any pair's: every pair counts it.
	if got := f.Of(1); got != 8 {
		t.Errorf("Of(1) with 7 spilled = %d, want 8", got)
	}
	if got := f.Of(100); got != 7 {
		t.Errorf("Of(100) = %d, want 7", got)
	}
	// A place freed is taken again; the spilled events stay where they were.
	f.Take(1, 1, false)
	if f.Add(200, 2) {
		t.Error("pair 200 spilled with a place free")
	}
	f.Take(100, 7, true)
	if got := f.Of(200); got != 2 {
		t.Errorf("Of(200) = %d, want 2", got)
	}
	if got := f.Of(100); got != 0 {
		t.Errorf("Of(100) after its spilled events landed = %d, want 0", got)
	}
}

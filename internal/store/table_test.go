package store

import (
	"strconv"
	"testing"
)

// pair is a key as the library's tables hold them.
type pair struct{ rule, key string }

// TestTableEvictsTheLeastRecentlyUsed fills a table past its size: the
// values looked at with Get or Add stay, the oldest of the others go.
func TestTableEvictsTheLeastRecentlyUsed(t *testing.T) {
	tb := New[pair, int](3)
	keys := make([]pair, 5)
	for i := range keys {
		keys[i] = pair{rule: "r", key: strconv.Itoa(i)}
	}
	h := func(i int) uint64 { return uint64(i) + 1 }
	for i := range 3 {
		*tb.Add(&keys[i], h(i), i) = i * 10
	}
	if v := tb.Get(&keys[0], h(0)); v == nil || *v != 0 {
		t.Fatalf("get(0) = %v", v)
	}
	tb.Add(&keys[3], h(3), 3) // evicts 1, the least recently used
	if tb.Peek(&keys[1], h(1)) != nil || tb.Len() != 3 {
		t.Fatalf("1 was not evicted (len %d)", tb.Len())
	}
	if v := tb.Peek(&keys[2], h(2)); v == nil || *v != 20 {
		t.Fatalf("peek(2) = %v, want the value set through add's pointer", v)
	}
	if oh, e, ok := tb.Oldest(); !ok || oh != h(2) || e.Key != keys[2] {
		t.Fatalf("oldest %d %+v", oh, e)
	}
	tb.Remove(&keys[2], h(2))
	if got := tb.Hashes(); len(got) != 2 || got[0] != h(0) || got[1] != h(3) {
		t.Fatalf("hashes %v, want [%d %d]", got, h(0), h(3))
	}
}

// TestTableTouchesAtMostEveryTouchEvery: GetAt moves a value to the front
// only when TouchEvery has passed since it last did (or the clock went
// back), so a value read often within that time can still be evicted.
func TestTableTouchesAtMostEveryTouchEvery(t *testing.T) {
	tb := New[pair, int](2)
	a, b, c := pair{key: "a"}, pair{key: "b"}, pair{key: "c"}
	tb.GetOrAdd(&a, 1, 0, true)
	tb.GetAt(&a, 1, TouchEvery) // moved: touched at TouchEvery
	tb.GetOrAdd(&b, 2, TouchEvery, true)
	tb.GetAt(&a, 1, 2*TouchEvery-1) // too soon: a stays the older
	tb.GetOrAdd(&c, 3, 2*TouchEvery-1, true)
	if tb.Peek(&a, 1) != nil || tb.Peek(&b, 2) == nil {
		t.Fatal("a read too soon was moved to the front")
	}
	tb.GetAt(&b, 2, 3*TouchEvery) // b's first GetAt: moved
	tb.GetOrAdd(&a, 1, 3*TouchEvery, true)
	if tb.Peek(&b, 2) == nil || tb.Peek(&c, 3) != nil {
		t.Fatal("a read after TouchEvery was not moved to the front")
	}
	if tb.GetOrAdd(&c, 3, 3*TouchEvery, false) != nil {
		t.Fatal("getOrAdd without create added a value")
	}
}

// TestTableCollision: two pairs under one hash share an entry; a lookup of
// the pair it does not hold is a miss, and adding that pair replaces the
// other's value.
func TestTableCollision(t *testing.T) {
	tb := New[pair, int](4)
	a, b := pair{rule: "r", key: "a"}, pair{rule: "r", key: "b"}
	*tb.Add(&a, 7, 1) = 1
	if tb.Peek(&b, 7) != nil || tb.Get(&b, 7) != nil || tb.GetAt(&b, 7, 0) != nil {
		t.Fatal("a lookup of the other pair under the same hash was a hit")
	}
	tb.Remove(&b, 7) // not b's entry: nothing happens
	if v := tb.Peek(&a, 7); v == nil || *v != 1 {
		t.Fatalf("removing b removed a: %v", v)
	}
	if v := tb.GetOrAdd(&b, 7, 0, true); v == nil || *v != 0 || tb.Len() != 1 {
		t.Fatalf("adding b: %v, len %d", v, tb.Len())
	}
	if tb.Peek(&a, 7) != nil {
		t.Fatal("a survived b's add under its hash")
	}
}

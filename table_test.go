package ratelimit

import (
	"strconv"
	"testing"
)

// TestTableEvictsTheLeastRecentlyUsed fills a table past its size: the
// values looked at with get or add stay, the oldest of the others go.
func TestTableEvictsTheLeastRecentlyUsed(t *testing.T) {
	tb := newTable[int](3)
	keys := make([]lkey, 5)
	for i := range keys {
		keys[i] = lkey{rule: "r", key: strconv.Itoa(i)}
	}
	h := func(i int) uint64 { return uint64(i) + 1 }
	for i := range 3 {
		*tb.add(&keys[i], h(i), i) = i * 10
	}
	if v := tb.get(&keys[0], h(0)); v == nil || *v != 0 {
		t.Fatalf("get(0) = %v", v)
	}
	tb.add(&keys[3], h(3), 3) // evicts 1, the least recently used
	if tb.peek(&keys[1], h(1)) != nil || tb.Len() != 3 {
		t.Fatalf("1 was not evicted (len %d)", tb.Len())
	}
	if v := tb.peek(&keys[2], h(2)); v == nil || *v != 20 {
		t.Fatalf("peek(2) = %v, want the value set through add's pointer", v)
	}
	if oh, e, ok := tb.oldest(); !ok || oh != h(2) || e.k != keys[2] {
		t.Fatalf("oldest %d %+v", oh, e)
	}
	tb.remove(&keys[2], h(2))
	if got := tb.hashes(); len(got) != 2 || got[0] != h(0) || got[1] != h(3) {
		t.Fatalf("hashes %v, want [%d %d]", got, h(0), h(3))
	}
}

// TestTableTouchesAtMostEveryTouchEvery: getAt moves a value to the front
// only when touchEvery has passed since it last did (or the clock went
// back), so a value read often within that time can still be evicted.
func TestTableTouchesAtMostEveryTouchEvery(t *testing.T) {
	tb := newTable[int](2)
	a, b, c := lkey{key: "a"}, lkey{key: "b"}, lkey{key: "c"}
	tb.getOrAdd(&a, 1, 0, true)
	tb.getAt(&a, 1, touchEvery) // moved: touched at touchEvery
	tb.getOrAdd(&b, 2, touchEvery, true)
	tb.getAt(&a, 1, 2*touchEvery-1) // too soon: a stays the older
	tb.getOrAdd(&c, 3, 2*touchEvery-1, true)
	if tb.peek(&a, 1) != nil || tb.peek(&b, 2) == nil {
		t.Fatal("a read too soon was moved to the front")
	}
	tb.getAt(&b, 2, 3*touchEvery) // b's first getAt: moved
	tb.getOrAdd(&a, 1, 3*touchEvery, true)
	if tb.peek(&b, 2) == nil || tb.peek(&c, 3) != nil {
		t.Fatal("a read after touchEvery was not moved to the front")
	}
	if tb.getOrAdd(&c, 3, 3*touchEvery, false) != nil {
		t.Fatal("getOrAdd without create added a value")
	}
}

// TestTableCollision: two pairs under one hash share an entry; a lookup of
// the pair it does not hold is a miss, and adding that pair replaces the
// other's value.
func TestTableCollision(t *testing.T) {
	tb := newTable[int](4)
	a, b := lkey{rule: "r", key: "a"}, lkey{rule: "r", key: "b"}
	*tb.add(&a, 7, 1) = 1
	if tb.peek(&b, 7) != nil || tb.get(&b, 7) != nil || tb.getAt(&b, 7, 0) != nil {
		t.Fatal("a lookup of the other pair under the same hash was a hit")
	}
	tb.remove(&b, 7) // not b's entry: nothing happens
	if v := tb.peek(&a, 7); v == nil || *v != 1 {
		t.Fatalf("removing b removed a: %v", v)
	}
	if v := tb.getOrAdd(&b, 7, 0, true); v == nil || *v != 0 || tb.Len() != 1 {
		t.Fatalf("adding b: %v, len %d", v, tb.Len())
	}
	if tb.peek(&a, 7) != nil {
		t.Fatal("a survived b's add under its hash")
	}
}

// TestDebtCollision: a debt that gives way to another pair under the same
// hash has its events counted as dropped, as an eviction would.
func TestDebtCollision(t *testing.T) {
	s := newLocalStore(64)
	p := plan{rate: 10, window: 1_000_000, alg: algSliding}
	a, b := lkey{rule: "r", key: "a"}, lkey{rule: "r", key: "b"}
	sh, h := s.at(&a)
	sh.mu.Lock()
	sh.oweEvents(&a, h, &p, 100, 3, "")
	sh.oweEvents(&b, h, &p, 100, 2, "") // b under a's hash
	sh.mu.Unlock()
	if got := s.owing.events.Load(); got != 2 {
		t.Fatalf("events owed %d, want 2 (b's)", got)
	}
	if got := s.owing.dropped.Load(); got != 3 {
		t.Fatalf("events dropped %d, want 3 (a's)", got)
	}
	if got := s.owing.debts.Load(); got != 1 {
		t.Fatalf("debts %d, want 1", got)
	}
}

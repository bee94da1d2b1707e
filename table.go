package ratelimit

import (
	"strings"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// table is one of a shard's LRU tables: at most size values, each under an
// lkey, the least recently used evicted first. It is golang-lru's
// simplelru.LRU keyed by the pair's 64-bit hash, computed once per call
// for the shard and every table in it (see localStore.at), so that a
// lookup hashes eight bytes; the entry keeps the pair itself, compared on
// every lookup. Two pairs whose hashes collide (about one chance in 10^9
// among 100,000 keys) share one entry: a lookup of the pair the entry does
// not hold is a miss, and adding it replaces the other pair's value, as an
// eviction would. Values live in the entries, so the hot path mutates a
// meter in place and allocates nothing. It is not safe for concurrent use;
// its shard's lock guards it.
type table[V any] struct {
	lru  *simplelru.LRU[uint64, *entry[V]]
	size int
}

// entry holds one value of a table.
type entry[V any] struct {
	k       lkey
	touched int64 // µs when getAt last moved it to the front
	v       V
}

func newTable[V any](size int) table[V] {
	return newTableEvict[V](size, nil)
}

// newTableEvict is newTable with a function called with each value that
// leaves the table, evicted or removed (not one replaced by add).
func newTableEvict[V any](size int, gone func(*V)) table[V] {
	var onEvict simplelru.EvictCallback[uint64, *entry[V]]
	if gone != nil {
		onEvict = func(_ uint64, e *entry[V]) { gone(&e.v) }
	}
	lru, err := simplelru.NewLRU[uint64, *entry[V]](max(size, 1), onEvict)
	if err != nil {
		panic(err) // unreachable: the size is positive
	}
	return table[V]{lru: lru, size: max(size, 1)}
}

// Len returns the number of values.
func (t *table[V]) Len() int { return t.lru.Len() }

// full reports whether adding a new key would evict one.
func (t *table[V]) full() bool { return t.lru.Len() >= t.size }

// find returns the entry of k, or nil, without moving it.
func (t *table[V]) find(k *lkey, h uint64) *entry[V] {
	if e, ok := t.lru.Peek(h); ok && e.k == *k {
		return e
	}
	return nil
}

// peek returns k's value without moving it, or nil.
func (t *table[V]) peek(k *lkey, h uint64) *V {
	if e := t.find(k, h); e != nil {
		return &e.v
	}
	return nil
}

// get returns k's value, moving it to the front, or nil.
func (t *table[V]) get(k *lkey, h uint64) *V {
	if e, ok := t.lru.Get(h); ok && e.k == *k {
		return &e.v
	}
	return nil
}

// touchEvery is how often, at most, getAt moves a value to the front of its
// LRU: eviction order is kept to a tenth of a second, and a hot key does not
// rewrite the list (and its neighbours' entries) on every call.
const touchEvery = 100_000 // µs

// getAt returns k's value at now, or nil, moving it to the front (a Get)
// when it has not been moved there for touchEvery; otherwise it only
// looks (a Peek).
func (t *table[V]) getAt(k *lkey, h uint64, now int64) *V {
	e := t.find(k, h)
	if e == nil {
		return nil
	}
	if now-e.touched >= touchEvery || now < e.touched {
		t.lru.Get(h)
		e.touched = now
	}
	return &e.v
}

// getOrAdd returns k's value at now (see getAt); when k has none, a new
// zero value when create is set, nil otherwise.
func (t *table[V]) getOrAdd(k *lkey, h uint64, now int64, create bool) *V {
	if v := t.getAt(k, h, now); v != nil || !create {
		return v
	}
	var zero V
	return t.add(k, h, zero)
}

// add sets k's value to v, moving it to the front, and returns where the
// value is kept. Adding a new key to a full table evicts the least recently
// used; adding one whose hash another pair's entry holds replaces that
// pair's value.
func (t *table[V]) add(k *lkey, h uint64, v V) *V {
	if e, ok := t.lru.Get(h); ok {
		e.k, e.touched, e.v = *k, 0, v
		return &e.v
	}
	e := &entry[V]{k: *k, v: v}
	t.lru.Add(h, e)
	return &e.v
}

// remove drops k's value, if any.
func (t *table[V]) remove(k *lkey, h uint64) {
	if t.find(k, h) != nil {
		t.lru.Remove(h)
	}
}

// oldest returns the least recently used entry and its hash, if any.
func (t *table[V]) oldest() (uint64, *entry[V], bool) {
	return t.lru.GetOldest()
}

// hashes returns the hashes of every entry, the least recently used first:
// a copy, so that the caller may remove entries as it walks them.
func (t *table[V]) hashes() []uint64 { return t.lru.Keys() }

// meterTable is a shard's table of one kind of meter, as the work that is
// not the kind's sees it: its size, and forgetting a pair's meter. The kind
// itself reaches its table as the table[V] it is (see metersOf).
type meterTable interface {
	Len() int
	forget(k lkey, h uint64)
}

// maxMeters bounds the kinds of meter a shard keeps, each in its own table.
const maxMeters = 8

// meterMakers make each meter slot's table, in meterLetters' order: the
// first kind in the registry with the slot's letter makes it.
var meterMakers = func() []func(size int) meterTable {
	makers := make([]func(int) meterTable, len(meterLetters))
	for _, a := range algorithms {
		if slot := meterSlot(a.redis.letter()); makers[slot] == nil {
			makers[slot] = a.local.newMeters
		}
	}
	return makers
}()

// meterNames are each meter slot's name, as Limiter.LocalMeters reports
// it: that of the first kind in the registry with the slot's letter.
var meterNames = func() []string {
	names := make([]string, len(meterLetters))
	for _, a := range algorithms {
		if slot := meterSlot(a.redis.letter()); names[slot] == "" {
			names[slot] = a.local.meterName()
		}
	}
	return names
}()

// meterSlot returns the slot of the meters whose keys end in letter.
func meterSlot(letter byte) int {
	slot := strings.IndexByte(meterLetters, letter)
	if slot < 0 || slot >= maxMeters {
		panic("ratelimit: no meter slot for letter " + string(letter)) // unreachable: the registry's letters have slots
	}
	return slot
}

// metersOf returns the table of the meters in slot, of type V.
func metersOf[V any](sh *localShard, slot int) *table[V] {
	return sh.meters[slot].(*table[V])
}

// forget removes k's value, if it has one (a meterTable's, which takes k by
// value: see algorithm).
func (t *table[V]) forget(k lkey, h uint64) { t.remove(&k, h) }

// newMeters returns a new table of meters of type V, for algorithm.newMeters.
func newMeters[V any](size int) meterTable {
	t := newTable[V](size)
	return &t
}

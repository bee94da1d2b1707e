// Package store holds the structure the library's local limiter keeps
// its state in: shards, one picked per key by the key's 64-bit hash, each
// on cache lines of its own (Shards), and in each shard LRU tables of
// values under a key and its hash, whose values stay in place so that a
// hot path mutates them without allocating (Table), and the events each
// pair's calls on their way to Redis reserved (InFlight). Neither is safe
// for concurrent use: its shard's lock guards it.
package store

import "github.com/hashicorp/golang-lru/v2/simplelru"

// Table is an LRU table: at most size values, each under a key, the least
// recently used evicted first. It is golang-lru's simplelru.LRU keyed by
// the key's 64-bit hash, which the caller computes once (for all its
// tables), so that a lookup hashes eight bytes; the entry keeps the key
// itself, compared on every lookup. Two keys whose hashes collide (about
// one chance in 10^9 among 100,000 keys) share one entry: a lookup of the
// key the entry does not hold is a miss, and adding it replaces the other
// key's value, as an eviction would. Values live in the entries, so a hot
// path mutates them in place and allocates nothing. It is not safe for
// concurrent use.
type Table[K comparable, V any] struct {
	lru  *simplelru.LRU[uint64, *Entry[K, V]]
	size int
}

// Entry holds one value of a table, under its key.
type Entry[K comparable, V any] struct {
	Key     K
	touched int64 // µs when GetAt last moved it to the front
	Value   V
}

// New returns a table of at most size values (at least 1).
func New[K comparable, V any](size int) Table[K, V] {
	return NewEvict[K, V](size, nil)
}

// NewEvict is New with a function called with each value that leaves the
// table, evicted or removed (not one replaced by Add).
func NewEvict[K comparable, V any](size int, gone func(*V)) Table[K, V] {
	var onEvict simplelru.EvictCallback[uint64, *Entry[K, V]]
	if gone != nil {
		onEvict = func(_ uint64, e *Entry[K, V]) { gone(&e.Value) }
	}
	lru, err := simplelru.NewLRU[uint64, *Entry[K, V]](max(size, 1), onEvict)
	if err != nil {
		panic(err) // unreachable: the size is positive
	}
	return Table[K, V]{lru: lru, size: max(size, 1)}
}

// Len returns the number of values.
func (t *Table[K, V]) Len() int { return t.lru.Len() }

// Full reports whether adding a new key would evict one.
func (t *Table[K, V]) Full() bool { return t.lru.Len() >= t.size }

// Find returns the entry of k, or nil, without moving it.
func (t *Table[K, V]) Find(k *K, h uint64) *Entry[K, V] {
	if e, ok := t.lru.Peek(h); ok && e.Key == *k {
		return e
	}
	return nil
}

// Peek returns k's value without moving it, or nil.
func (t *Table[K, V]) Peek(k *K, h uint64) *V {
	if e := t.Find(k, h); e != nil {
		return &e.Value
	}
	return nil
}

// Get returns k's value, moving it to the front, or nil.
func (t *Table[K, V]) Get(k *K, h uint64) *V {
	if e, ok := t.lru.Get(h); ok && e.Key == *k {
		return &e.Value
	}
	return nil
}

// TouchEvery is how often, at most, GetAt moves a value to the front of its
// LRU: eviction order is kept to a tenth of a second, and a hot key does not
// rewrite the list (and its neighbours' entries) on every call.
const TouchEvery = 100_000 // µs

// GetAt returns k's value at now, or nil, moving it to the front (a Get)
// when it has not been moved there for TouchEvery; otherwise it only
// looks (a Peek).
func (t *Table[K, V]) GetAt(k *K, h uint64, now int64) *V {
	e := t.Find(k, h)
	if e == nil {
		return nil
	}
	if now-e.touched >= TouchEvery || now < e.touched {
		t.lru.Get(h)
		e.touched = now
	}
	return &e.Value
}

// GetOrAdd returns k's value at now (see GetAt); when k has none, a new
// zero value when create is set, nil otherwise.
func (t *Table[K, V]) GetOrAdd(k *K, h uint64, now int64, create bool) *V {
	if v := t.GetAt(k, h, now); v != nil || !create {
		return v
	}
	var zero V
	return t.Add(k, h, zero)
}

// Add sets k's value to v, moving it to the front, and returns where the
// value is kept. Adding a new key to a full table evicts the least recently
// used; adding one whose hash another key's entry holds replaces that
// key's value.
func (t *Table[K, V]) Add(k *K, h uint64, v V) *V {
	if e, ok := t.lru.Get(h); ok {
		e.Key, e.touched, e.Value = *k, 0, v
		return &e.Value
	}
	e := &Entry[K, V]{Key: *k, Value: v}
	t.lru.Add(h, e)
	return &e.Value
}

// Remove drops k's value, if any.
func (t *Table[K, V]) Remove(k *K, h uint64) {
	if t.Find(k, h) != nil {
		t.lru.Remove(h)
	}
}

// Oldest returns the least recently used entry and its hash, if any.
func (t *Table[K, V]) Oldest() (uint64, *Entry[K, V], bool) {
	return t.lru.GetOldest()
}

// Hashes returns the hashes of every entry, the least recently used first:
// a copy, so that the caller may remove entries as it walks them.
func (t *Table[K, V]) Hashes() []uint64 { return t.lru.Keys() }

// Forget removes k's value, if it has one; it takes k by value, for a
// caller that reaches the table through an interface (a pointer passed
// through one moves what it points to to the heap).
func (t *Table[K, V]) Forget(k K, h uint64) { t.Remove(&k, h) }

// PeekHash returns the entry under hash h, whichever key it holds, without
// moving it.
func (t *Table[K, V]) PeekHash(h uint64) (*Entry[K, V], bool) { return t.lru.Peek(h) }

// RemoveHash drops the entry under hash h, whichever key it holds.
func (t *Table[K, V]) RemoveHash(h uint64) { t.lru.Remove(h) }

package ratelimit

// table is one of a shard's LRU tables: at most size values, each under an
// lkey, the least recently used evicted first. Unlike a map keyed by lkey,
// it is keyed by the pair's hash, computed once per call for the shard and
// every table in it (see localStore.at): a lookup hashes eight bytes and
// compares the pair only on a hash match. Pairs whose hashes collide share a
// chain. Values live in the nodes, so a log is found without another
// pointer. It is not safe for concurrent use; its shard's lock guards it.
type table[V any] struct {
	m          map[uint64]*node[V]
	head, tail *node[V] // most and least recently used
	n, size    int
}

// node holds one value of a table.
type node[V any] struct {
	k          lkey
	h          uint64
	prev, next *node[V] // LRU order; prev is more recent
	chain      *node[V] // the next node with the same hash
	touched    int64    // µs when getAt last moved it to the front
	v          V
}

func newTable[V any](size int) table[V] {
	return table[V]{m: make(map[uint64]*node[V]), size: max(size, 1)}
}

// Len returns the number of values.
func (t *table[V]) Len() int { return t.n }

// find returns the node of k, or nil.
func (t *table[V]) find(k *lkey, h uint64) *node[V] {
	e := t.m[h]
	for e != nil && e.k != *k {
		e = e.chain
	}
	return e
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
	e := t.find(k, h)
	if e == nil {
		return nil
	}
	t.front(e)
	return &e.v
}

// touchEvery is how often, at most, getAt moves a value to the front of its
// LRU: eviction order is kept to a tenth of a second, and a hot key does not
// rewrite the list (and its neighbours' nodes) on every call.
const touchEvery = 100_000 // µs

// getAt returns k's value at now, or nil, moving it to the front when it
// has not been moved there for touchEvery.
func (t *table[V]) getAt(k *lkey, h uint64, now int64) *V {
	e := t.find(k, h)
	if e == nil {
		return nil
	}
	if now-e.touched >= touchEvery || now < e.touched {
		t.front(e)
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

// front moves e to the front of the LRU order.
func (t *table[V]) front(e *node[V]) {
	if t.head == e {
		return
	}
	t.unlink(e)
	t.pushFront(e)
}

// add sets k's value to v, moving it to the front, and returns where the
// value is kept. Adding a new key to a full table evicts the least recently
// used.
func (t *table[V]) add(k *lkey, h uint64, v V) *V {
	if e := t.find(k, h); e != nil {
		e.v = v
		t.front(e)
		return &e.v
	}
	if t.n >= t.size {
		t.removeNode(t.tail)
	}
	e := &node[V]{k: *k, h: h, v: v, chain: t.m[h]}
	t.m[h] = e
	t.pushFront(e)
	t.n++
	return &e.v
}

// remove drops k's value, if any.
func (t *table[V]) remove(k *lkey, h uint64) {
	if e := t.find(k, h); e != nil {
		t.removeNode(e)
	}
}

func (t *table[V]) removeNode(e *node[V]) {
	t.unlink(e)
	t.n--
	if p := t.m[e.h]; p == e {
		if e.chain == nil {
			delete(t.m, e.h)
		} else {
			t.m[e.h] = e.chain
		}
	} else {
		for p.chain != e {
			p = p.chain
		}
		p.chain = e.chain
	}
	e.chain = nil
}

func (t *table[V]) unlink(e *node[V]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		t.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		t.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (t *table[V]) pushFront(e *node[V]) {
	e.next = t.head
	if t.head != nil {
		t.head.prev = e
	}
	t.head = e
	if t.tail == nil {
		t.tail = e
	}
}

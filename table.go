package ratelimit

import (
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/store"
)

// table is a shard's LRU table of values under a pair (see store.Table).
type table[V any] = store.Table[lkey, V]

func newTable[V any](size int) table[V] { return store.New[lkey, V](size) }

// newTableEvict is newTable with a function called with each value that
// leaves the table, evicted or removed (not one replaced by Add).
func newTableEvict[V any](size int, gone func(*V)) table[V] {
	return store.NewEvict[lkey, V](size, gone)
}

// meterTable is a shard's table of one kind of meter, as the work that is
// not the kind's sees it: its size, and forgetting a pair's meter. The kind
// itself reaches its table as the table[V] it is (see metersOf).
type meterTable interface {
	Len() int
	Forget(k lkey, h uint64)
}

// maxMeters bounds the kinds of meter a shard keeps, each in its own table.
const maxMeters = 8

// slotOwners are the kinds that own each meter slot, in meterLetters'
// order: the first kind in the registry with the slot's letter makes the
// slot's tables (newMeters) and names its meters (meterName, as
// Limiter.LocalMeters reports them).
var slotOwners = func() []localKind {
	owners := make([]localKind, len(meterLetters))
	for _, a := range algorithms {
		if slot := meterSlot(a.redis.letter()); owners[slot] == nil {
			owners[slot] = a.local
		}
	}
	return owners
}()

// meterSlot returns the slot of the meters whose keys end in letter.
func meterSlot(letter byte) int {
	slot := strings.IndexByte(meterLetters, letter)
	if slot < 0 || slot >= maxMeters {
		panic("ratelimit: no meter slot for letter " + string(letter)) // unreachable: the registry's letters have slots
	}
	return slot
}

// meterTables are a shard's tables of meters, by meter slot: all a kind's
// local meter sees of its shard.
type meterTables [maxMeters]meterTable

// metersOf returns the table of the meters in slot, of type V.
func metersOf[V any](ms *meterTables, slot int) *table[V] {
	return ms[slot].(*table[V])
}

// newMeters returns a new table of meters of type V, for localKind.newMeters.
func newMeters[V any](size int) meterTable {
	t := newTable[V](size)
	return &t
}

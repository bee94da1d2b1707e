package store

// cacheLine is the span a shard's state is kept apart from its
// neighbours' by: two 64-byte lines, as the processor's adjacent-line
// prefetcher fetches them in pairs.
const cacheLine = 128

// Shards is a fixed set of values of S, the shards of a store, one
// chosen for each key by the key's 64-bit hash (the one its tables are
// looked up with), so that unrelated keys meet at different locks. Each
// shard sits on cache lines of its own: a write to one never takes
// another's line from the core that holds it. The shards are made once,
// zeroed, and never move; Shards itself is safe for concurrent use, each
// shard's state is guarded by its owner's lock.
type Shards[S any] struct {
	mask   uint64
	shards []apart[S]
}

// apart is a shard with a cache line's span before the next one.
type apart[S any] struct {
	s S
	_ [cacheLine]byte
}

// ShardsFor returns the number of shards a store of capacity keys is
// spread over: the most, up to 128, that leave at least 64 keys to each,
// a power of two.
func ShardsFor(capacity int) int {
	n := 1
	for n < 128 && capacity/(n*2) >= 64 {
		n *= 2
	}
	return n
}

// NewShards returns n zeroed shards; n is rounded up to a power of two.
func NewShards[S any](n int) Shards[S] {
	size := 1
	for size < n {
		size *= 2
	}
	return Shards[S]{mask: uint64(size - 1), shards: make([]apart[S], size)}
}

// Of returns the shard of a key whose hash is h, picked by the hash's
// upper half.
func (s *Shards[S]) Of(h uint64) *S { return &s.shards[(h>>32)&s.mask].s }

// Len returns the number of shards.
func (s *Shards[S]) Len() int { return len(s.shards) }

// At returns shard i, for work that goes over every shard.
func (s *Shards[S]) At(i int) *S { return &s.shards[i].s }

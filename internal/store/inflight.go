package store

// InFlight counts, by pair, the events that calls on their way to Redis
// have reserved in a shard's own count: what that count holds that Redis
// may not have decided yet. A pair is named by its 64-bit hash. It keeps
// a few pairs exactly, in place, allocating nothing; the events of a pair
// that finds every place taken are spilled into one count that Of adds to
// every pair's, as if every pair had them on their way: an overestimate,
// which its callers read as "do not trust the own count alone". Two pairs
// whose hashes collide share a place, an overestimate too. The zero value
// is empty. It is not safe for concurrent use: its shard's lock guards it.
type InFlight struct {
	pairs [inFlightPairs]uint64 // the hashes of the pairs kept, or 0 (free; a pair hashed 0 is kept as 1)
	n     [inFlightPairs]int64  // each kept pair's events on their way
	spill int64                 // the events of pairs that found no free place
}

// inFlightPairs is how many pairs an InFlight keeps exactly: a shard of
// 128 rarely has more pairs with calls on their way at once.
const inFlightPairs = 8

// Add counts n events of the pair hashed h, and reports whether they were
// spilled: Take must be told so.
func (f *InFlight) Add(h uint64, n int64) (spilled bool) {
	h = max(h, 1)
	free := -1
	for i, p := range f.pairs {
		if p == h {
			f.n[i] += n
			return false
		}
		if p == 0 && free < 0 {
			free = i
		}
	}
	if free < 0 {
		f.spill += n
		return true
	}
	f.pairs[free], f.n[free] = h, n
	return false
}

// Take takes back n events Add counted for the pair hashed h, spilled as
// Add said.
func (f *InFlight) Take(h uint64, n int64, spilled bool) {
	if spilled {
		f.spill -= n
		return
	}
	h = max(h, 1)
	for i, p := range f.pairs {
		if p == h {
			if f.n[i] -= n; f.n[i] <= 0 {
				f.pairs[i], f.n[i] = 0, 0
			}
			return
		}
	}
}

// Of returns the events on their way of the pair hashed h, with every
// spilled event.
func (f *InFlight) Of(h uint64) int64 {
	h = max(h, 1)
	for i, p := range f.pairs {
		if p == h {
			return f.n[i] + f.spill
		}
	}
	return f.spill
}

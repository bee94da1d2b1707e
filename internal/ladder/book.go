package ladder

import "github.com/ratelimit-go/ratelimit/internal/store"

// Book is the ladders of one shard's pairs, under the caller's pair key K
// and its 64-bit hash (see store.Table), in two LRU tables: the violations
// of pairs that are not banned, and the active bans. A flood of violators
// evicts only violation records, so an active ban is evicted only by newer
// bans. A Book is not safe for concurrent use: its owner's lock guards it.
type Book[K comparable] struct {
	strikes store.Table[K, *Strikes] // violations of pairs not banned
	bans    store.Table[K, *Strikes] // pairs with an active ban
}

// New returns a Book of at most size violation records and size bans.
func New[K comparable](size int) Book[K] {
	return Book[K]{strikes: store.New[K, *Strikes](size), bans: store.New[K, *Strikes](size)}
}

// Len returns the violation records of pairs not banned, and the bans.
func (b *Book[K]) Len() (strikes, bans int) { return b.strikes.Len(), b.bans.Len() }

// Banning reports whether the Book holds a ban, ended or not: a caller
// that only needs a ban's time left looks no further when it holds none.
func (b *Book[K]) Banning() bool { return b.bans.Len() > 0 }

// Find returns k's place on the ladder (nil: none), moving a ban that has
// ended by now back among the violation records.
func (b *Book[K]) Find(k *K, h uint64, now int64) *Strikes {
	if st := b.bans.Get(k, h); st != nil {
		if (*st).BanEnd > now {
			return *st
		}
		s := *st
		b.bans.Remove(k, h)
		b.strikes.Add(k, h, s)
		return s
	}
	if st := b.strikes.Get(k, h); st != nil {
		return *st
	}
	return nil
}

// Standing returns the violations of k that p remembers at now, and how
// long its ban has left then (0: none).
func (b *Book[K]) Standing(k *K, h uint64, p *Plan, now int64) (violations, banLeft int64) {
	st := b.Find(k, h, now)
	if st != nil && st.BanEnd > now {
		banLeft = st.BanEnd - now
	}
	return p.Remembered(st, now), banLeft
}

// BanLeft returns how long k's ban has left at now (0: none).
func (b *Book[K]) BanLeft(k *K, h uint64, now int64) int64 {
	if st := b.Find(k, h, now); st != nil && st.BanEnd > now {
		return st.BanEnd - now
	}
	return 0
}

// Remembered returns the violations of k that p remembers at now.
func (b *Book[K]) Remembered(k *K, h uint64, p *Plan, now int64) int64 {
	return p.Remembered(b.Find(k, h, now), now)
}

// WouldBan reports whether k's next violation at now bans it under p.
func (b *Book[K]) WouldBan(k *K, h uint64, p *Plan, now int64) bool {
	return b.Remembered(k, h, p, now)+1 >= p.BanAfter
}

// Violate records a violation of k at now under p. It returns the
// violations k then has, how long the ban it starts lasts (0: none; the
// pair moves among the bans) and whether it warns.
func (b *Book[K]) Violate(k *K, h uint64, p *Plan, now int64) (violations, ban int64, warned bool) {
	st := b.Find(k, h, now)
	if st == nil {
		st = &Strikes{}
		b.strikes.Add(k, h, st)
	}
	ban, warned = p.Violate(st, now)
	if ban > 0 {
		b.strikes.Remove(k, h)
		b.bans.Add(k, h, st)
	}
	return st.Violations, ban, warned
}

// Ban bans k until end, keeping its violations: a ban made by hand.
func (b *Book[K]) Ban(k *K, h uint64, now, end int64) {
	st := b.Find(k, h, now)
	if st == nil {
		st = &Strikes{}
	}
	st.BanEnd = end
	b.strikes.Remove(k, h)
	b.bans.Add(k, h, st)
}

// Mirror sets k's ladder to what Redis answered for a call at at: s's
// violations and bans, banned until s.BanEnd when it is not 0 (the ban's
// violation, or the last one, was at at). violated says the call was a
// violation, whose time is then the last one's; otherwise a record already
// kept keeps its time. Without violations or a ban, k is forgotten.
func (b *Book[K]) Mirror(k *K, h uint64, at int64, s Strikes, violated bool) {
	switch {
	case s.BanEnd != 0:
		b.strikes.Remove(k, h)
		b.bans.Add(k, h, &Strikes{Violations: s.Violations, Last: at, BanEnd: s.BanEnd, Bans: s.Bans})
	case s.Violations > 0:
		st := b.Find(k, h, at)
		if st == nil {
			st = &Strikes{Last: at}
			b.strikes.Add(k, h, st)
		}
		if violated {
			st.Last = at
		}
		st.Violations, st.BanEnd, st.Bans = s.Violations, 0, s.Bans
	default:
		b.Forget(k, h)
	}
}

// Forget drops k's ladder: its violations and its ban.
func (b *Book[K]) Forget(k *K, h uint64) {
	b.strikes.Remove(k, h)
	b.bans.Remove(k, h)
}

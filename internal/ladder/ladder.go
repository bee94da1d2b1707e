// Package ladder keeps the penalty ladder of a limiter's pairs in process
// (see docs/penalties.md): each pair's violations and the bans they lead
// to, with the arithmetic lua/penalty.lua does on Redis' copy of the same
// four numbers, so that a decision made without Redis climbs the ladder as
// Redis would, and a decision Redis made is copied into it ([Book.Mirror]).
//
// Times are µs.
package ladder

import "math"

// Plan is a validated penalty, in µs: what a violation does to a pair's
// ladder.
type Plan struct {
	WarnAfter int64   // the violations from which a rejection warns (0: never)
	BanAfter  int64   // the violations at which the pair is banned (>= 1)
	BanFor    int64   // the first ban's length
	Memory    int64   // how long violations are remembered after the last one
	Growth    float64 // each ban while the violations are remembered lasts Growth times the last one (1: all BanFor)
	MaxBan    int64   // the longest ban Growth leads to
}

// Strikes is one pair's place on the ladder; Redis keeps the same four
// numbers in a hash (see lua/penalty.lua).
type Strikes struct {
	Violations int64 // as of Last
	Last       int64 // the last violation's time
	BanEnd     int64 // banned while now < BanEnd
	Bans       int64 // the bans while the violations were remembered
}

// BanLength returns how long a pair's next ban lasts after bans remembered
// bans, as lua/penalty.lua's penalty.violate computes it: repeated
// products, not a power, so that both round alike.
func (p *Plan) BanLength(bans int64) int64 {
	d := float64(p.BanFor)
	if p.Growth > 1 {
		for i := int64(0); i < bans; i++ {
			d = math.Min(d*p.Growth, float64(p.MaxBan))
		}
	}
	return int64(math.Floor(d))
}

// Remembered returns the violations of s (nil: none) still remembered at
// now.
func (p *Plan) Remembered(s *Strikes, now int64) int64 {
	if s == nil || s.Violations == 0 || now-s.Last >= p.Memory {
		return 0
	}
	return s.Violations
}

// Warns reports whether a rejection with v violations remembered warns.
func (p *Plan) Warns(v int64) bool { return p.WarnAfter > 0 && v >= p.WarnAfter }

// Violate records one violation in s at now, and returns how long the ban
// it starts lasts (0: none) and whether it warns (a violation that bans
// does not).
func (p *Plan) Violate(s *Strikes, now int64) (ban int64, warned bool) {
	if p.Remembered(s, now) == 0 {
		s.Violations, s.Bans = 0, 0
	}
	s.Violations++
	s.Last = now
	if s.Violations >= p.BanAfter {
		ban = p.BanLength(s.Bans)
		s.BanEnd = now + ban
		s.Bans++
		return ban, false
	}
	return 0, p.Warns(s.Violations)
}

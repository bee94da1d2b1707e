package meter

import "math/bits"

// Bucket is the local path's GCRA state of one key (Kind GCRA): the
// theoretical arrival time TAT, the time at which the bucket is full again,
// kept exactly as whole µs w plus r ticks of 1/rq µs (0 <= r < rq).
// lua/gcra.lua keeps the same two numbers in Redis and computes the same
// integers.
//
// With the emission interval T = Window/Rate normalised by g = gcd(Window
// in µs, Rate) into wq = Window/g and rq = Rate/g (see Ticks), T = wq/rq µs
// exactly: one event costs wq ticks, and the bucket holds burst·wq. At now
// the bucket owes debt = max(0, (w - now)·rq + r) ticks; a call for n
// events fits when debt + n·wq <= burst·wq, which is count + n <= burst for
// count = ceil(debt/wq), the tokens in use: the decision's one test. Every
// product stays below 2^53 (see MaxBucket), so Lua's doubles compute the
// same.
//
// A bucket with outstanding reservations (the root's Reserve, and
// AllowAll's pairs) keeps them, so that each can be given back exactly
// (see reserved); the TAT (w, r) then counts them as the AllowN they were,
// and decides as always.
//
// The zero Bucket is empty; Fit gives it its plan's numbers before any
// other method is called.
type Bucket struct {
	w, r int64
	// The plan's numbers, set by Fit.
	wq, rq, burst int64
	res           *reserved // nil: no reservation outstanding (most buckets)
}

// MaxBucket bounds GCRA's Burst × Window/gcd: the ticks a full bucket
// holds, with room for a clock gone backwards, stay exact as float64.
const MaxBucket = 1 << 52

// Ticks returns a bucket's numbers for rate tokens per window µs (both >
// 0): wq, the cost of an event in ticks, and rq, the ticks per µs, window
// and rate divided by their greatest common divisor.
func Ticks(window, rate int64) (wq, rq int64) {
	g := gcd(window, rate)
	return window / g, rate / g
}

// gcd returns the greatest common divisor of a, b > 0.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Fit sets the bucket's plan: wq ticks an event, rq ticks a µs, a bucket
// of burst tokens. A TAT kept for another rq (the degraded share, a
// changed rule) keeps its whole µs; the remainders, under 1µs, are cut to
// fit, as lua/gcra.lua does (see refit). Fit is inlined into the kind's
// every call: under the same rq the remainders fit already (0 <= r < rq).
func (b *Bucket) Fit(wq, rq, burst int64) {
	if b.rq != rq {
		b.refit(rq)
	}
	b.wq, b.burst = wq, burst
}

// refit is Fit's part for another rq: the TAT's remainder and the
// reservations' are cut to fit rq. It is kept out of line, so that Fit
// stays small enough to inline.
//
//go:noinline
func (b *Bucket) refit(rq int64) {
	if b.res != nil {
		b.res.cut(rq)
	}
	b.rq, b.r = rq, min(b.r, rq-1)
}

// TAT returns the theoretical arrival time: whole µs w and r ticks of
// 1/rq µs.
func (b *Bucket) TAT() (w, r int64) { return b.w, b.r }

// Outstanding returns how many reservations the bucket keeps records of.
func (b *Bucket) Outstanding() int {
	if b.res == nil {
		return 0
	}
	return len(b.res.out)
}

// instant is a time kept as a bucket keeps its TAT: whole µs w plus r
// ticks of 1/rq µs (0 <= r < rq). lua/gcra.lua computes the same pairs.
type instant struct{ w, r int64 }

func (b *Bucket) tat() instant { return instant{b.w, b.r} }

func (a instant) before(b instant) bool { return a.w < b.w || a.w == b.w && a.r < b.r }

// later returns the later of a and b.
func later(a, b instant) instant {
	if a.before(b) {
		return b
	}
	return a
}

// plus returns a moved k >= 0 ticks on.
func (a instant) plus(k, rq int64) instant {
	s := a.r + k
	return instant{a.w + s/rq, s % rq}
}

// shift returns a + (b - c) + k ticks (k >= 0): a moved on by the span
// from c to b, and k.
func (a instant) shift(b, c instant, k, rq int64) instant {
	s := a.r + b.r - c.r + k
	q := FloorDiv(s, rq)
	return instant{a.w + b.w - c.w + q, s - q*rq}
}

// debt returns the ticks owed at now, and whether the TAT lies further
// ahead than any allowed call leaves it (the clock went backwards): then
// debt is not computed, which could overflow, and the bucket counts as full.
func (b *Bucket) debt(now int64) (debt int64, over bool) {
	d := b.w - now
	if d < 0 {
		return 0, false
	}
	if d > b.burst*b.wq/b.rq+1 {
		return 0, true
	}
	return d*b.rq + b.r, false
}

// Prune does nothing: the TAT is all a bucket keeps of its events.
func (b *Bucket) Prune(int64, int64) {}

// Count returns the tokens in use at now: ceil(debt/wq), the whole
// bucket when the TAT lies further ahead than any call leaves it.
func (b *Bucket) Count(now, _ int64) int64 {
	debt, over := b.debt(now)
	if over {
		return b.burst
	}
	return CeilDiv(debt, b.wq)
}

// RetryIn returns how long until asked events fit under a bucket of rate
// tokens: ceil((debt + asked·wq - rate·wq) / rq) µs, computed from w so
// that a clock gone backwards cannot overflow it.
func (b *Bucket) RetryIn(now, _, rate, asked int64) int64 {
	d, r := b.w-now, b.r
	if d < 0 {
		d, r = 0, 0
	}
	return max(1, d+CeilDiv(r+(asked-rate)*b.wq, b.rq))
}

// Reset returns how long until the bucket is full: until the TAT.
func (b *Bucket) Reset(now, _ int64, _ bool) int64 {
	d := b.w - now
	switch {
	case d < 0 || (d == 0 && b.r == 0):
		return 0
	case b.r > 0:
		return d + 1
	}
	return d
}

// Add takes n tokens at now: the TAT becomes max(TAT, now) + n·wq ticks,
// however far ahead of now that leaves it (a settle's extra, a lease: the
// bucket then counts as full until time catches up), as lua/gcra.lua's
// gcra.owe does. The outstanding reservations' main sequence takes them too
// (see reserved), unless the bucket was full: then no give-back can move
// anything any more, and they are forgotten.
func (b *Bucket) Add(now, _, n int64) {
	at := instant{now, 0}
	t := b.tat()
	if rs := b.res; rs != nil {
		if !at.before(t) {
			b.res = nil
		} else {
			rs.add(at, n*b.wq, b.rq)
		}
	}
	t = later(t, at).plus(n*b.wq, b.rq)
	b.w, b.r = t.w, t.r
}

// AddAs takes n tokens at now as the reservation id (see reserved), and
// decides as Add.
func (b *Bucket) AddAs(now, n int64, id uint64) {
	at := instant{now, 0}
	t := b.tat()
	if b.res != nil && !at.before(t) {
		b.res = nil
	}
	if b.res == nil {
		b.res = &reserved{main: t}
	}
	rs := b.res
	rs.out = append(rs.out, outstanding{id: id, x: later(rs.main, at), c: rs.c, n: n})
	t = later(t, at).plus(n*b.wq, b.rq)
	b.w, b.r = t.w, t.r
}

// CopyFrom merges what Redis answered into the bucket: full again after
// reset µs, which Redis rounded up to a whole µs, less the cost of the
// givenBack tokens that settles may have given back in this process since
// Redis decided (see StateCopier), when that is later than the bucket's
// own TAT. A give-back of d tokens moves a TAT back by d·T at most (each
// term of the max over events, see reserved, by d·T or not at all), so
// Redis' TAT once the give-backs reach it is no earlier than its answer
// less their cost: the bucket, which took them back already, must not
// count them again from the answer. It compares Redis' TAT with its own
// plus that cost, both rounded up to a whole µs as Redis rounds (an equal
// TAT keeps the bucket's exact ticks). The count is not used: the TAT is
// the whole state.
func (b *Bucket) CopyFrom(now, _, reset, givenBack int64) {
	b.fromRedis(now, reset, givenBack, false)
}

// ReplaceFrom sets the TAT to Redis' answer, as CopyFrom reads it, even
// when that is earlier than the bucket's own (see CountReplacer): Redis
// marked the bucket as one a give-back moved back, and the bucket's own
// TAT may still hold what another process gave back.
func (b *Bucket) ReplaceFrom(now, _, reset, givenBack int64) {
	b.fromRedis(now, reset, givenBack, true)
}

// fromRedis is CopyFrom, and with replace ReplaceFrom.
func (b *Bucket) fromRedis(now, reset, givenBack int64, replace bool) {
	own := b.tat()
	var q, rem uint64 // the give-backs' cost: q µs and rem ticks
	if givenBack > 0 {
		hi, lo := bits.Mul64(uint64(givenBack), uint64(b.wq))
		if hi < uint64(b.rq) {
			q, rem = bits.Div64(hi, lo, uint64(b.rq))
		}
		if hi >= uint64(b.rq) || q >= uint64(reset) {
			// More than 2^64 µs, or Redis' TAT less the give-backs is no
			// later than now: nothing to learn, or a full bucket.
			if replace && (instant{now, 0}).before(b.tat()) {
				b.w, b.r = now, 0
			}
			return
		}
		own = instant{own.w + int64(q), own.r}.plus(int64(rem), b.rq)
	}
	ceil := own.w
	if own.r > 0 {
		ceil++
	}
	if w := now + reset; w > ceil || replace && w < ceil {
		b.w, b.r = back(instant{w - int64(q), 0}, int64(rem), b.rq)
	}
}

// Unrecord gives n tokens back without a record of them (a hold Redis did
// not confirm, see the root's mirror.go): the TAT moves back by n·wq
// ticks, and so do the main sequence's. It is exact only when no call came
// between, which is why what a reservation or an AllowAll pair took is
// given back by Settle instead, here and in Redis.
func (b *Bucket) Unrecord(n int64) {
	b.w, b.r = back(b.tat(), n*b.wq, b.rq)
	if rs := b.res; rs != nil {
		rs.main.w, rs.main.r = back(rs.main, n*b.wq, b.rq)
		rs.c.w, rs.c.r = back(rs.c, n*b.wq, b.rq)
	}
}

// back returns t moved back by k >= 0 ticks.
func back(t instant, k, rq int64) (w, r int64) {
	w, r = t.w-k/rq, t.r-k%rq
	if r < 0 {
		r += rq
		w--
	}
	return w, r
}

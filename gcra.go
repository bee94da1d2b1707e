package ratelimit

import (
	"cmp"
	"fmt"
	"math/bits"
)

// bucket is the local path's GCRA state of one key (Kind GCRA): the
// theoretical arrival time TAT, the time at which the bucket is full again,
// kept exactly as whole µs w plus r ticks of 1/rq µs (0 <= r < rq).
// lua/gcra.lua keeps the same two numbers in Redis and computes the same
// integers.
//
// With the emission interval T = Window/Rate normalised by g = gcd(Window
// in µs, Rate) into wq = Window/g and rq = Rate/g, T = wq/rq µs exactly: one
// event costs wq ticks, and the bucket holds burst·wq. At now the bucket
// owes debt = max(0, (w - now)·rq + r) ticks; a call for n events fits when
// debt + n·wq <= burst·wq, which is count + n <= burst for count =
// ceil(debt/wq), the tokens in use: decide's one test. Every product stays
// below 2^53 (see Rule.compile), so Lua's doubles compute the same.
//
// A bucket with outstanding reservations (Reserve, and AllowAll's pairs)
// keeps them in res, so that each can be given back exactly (see
// reserved); the TAT (w, r) then counts them as the AllowN they were, and
// decides as always.
//
// Its shard's lock guards it.
type bucket struct {
	w, r int64
	// The plan's numbers, set by localShard.meter.
	wq, rq, burst int64
	res           *reserved // nil: no reservation outstanding (most buckets)
}

// instant is a time kept as a bucket keeps its TAT: whole µs w plus r
// ticks of 1/rq µs (0 <= r < rq). lua/gcra.lua computes the same pairs.
type instant struct{ w, r int64 }

func (b *bucket) tat() instant { return instant{b.w, b.r} }

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
	q := floorDiv(s, rq)
	return instant{a.w + b.w - c.w + q, s - q*rq}
}

// debt returns the ticks owed at now, and whether the TAT lies further
// ahead than any allowed call leaves it (the clock went backwards): then
// debt is not computed, which could overflow, and the bucket counts as full.
func (b *bucket) debt(now int64) (debt int64, over bool) {
	d := b.w - now
	if d < 0 {
		return 0, false
	}
	if d > b.burst*b.wq/b.rq+1 {
		return 0, true
	}
	return d*b.rq + b.r, false
}

func (b *bucket) Prune(int64, int64) {}

func (b *bucket) Count(now, _ int64) int64 {
	debt, over := b.debt(now)
	if over {
		return b.burst
	}
	return ceilDiv(debt, b.wq)
}

// RetryIn returns how long until asked events fit under a bucket of rate
// tokens: ceil((debt + asked·wq - rate·wq) / rq) µs, computed from w so
// that a clock gone backwards cannot overflow it.
func (b *bucket) RetryIn(now, _, rate, asked int64) int64 {
	d, r := b.w-now, b.r
	if d < 0 {
		d, r = 0, 0
	}
	return max(1, d+ceilDiv(r+(asked-rate)*b.wq, b.rq))
}

// Reset returns how long until the bucket is full: until the TAT.
func (b *bucket) Reset(now, _ int64, _ bool) int64 {
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
func (b *bucket) Add(now, _, n int64) {
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

// addAs takes n tokens at now as the reservation id (see reserved), and
// decides as Add.
func (b *bucket) addAs(now, n int64, id uint64) {
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

// copyFrom merges what Redis answered into the bucket: full again after
// reset µs, which Redis rounded up to a whole µs, less the cost of the
// givenBack tokens that settles may have given back in this process since
// Redis decided (see localShard.mirror), when that is later than the
// bucket's own TAT. A give-back of d tokens moves a TAT back by d·T at
// most (each term of the max over events, see reserved, by d·T or not at
// all), so Redis' TAT once the give-backs reach it is no earlier than its
// answer less their cost: the bucket, which took them back already, must
// not count them again from the answer. It compares Redis' TAT with its
// own plus that cost, both rounded up to a whole µs as Redis rounds (an
// equal TAT keeps the bucket's exact ticks).
func (b *bucket) copyFrom(now, _, reset, givenBack int64) {
	own := b.tat()
	var q, rem uint64 // the give-backs' cost: q µs and rem ticks
	if givenBack > 0 {
		hi, lo := bits.Mul64(uint64(givenBack), uint64(b.wq))
		if hi >= uint64(b.rq) {
			return // more than 2^64 µs
		}
		if q, rem = bits.Div64(hi, lo, uint64(b.rq)); q >= uint64(reset) {
			return // Redis' TAT less the give-backs is no later than now: nothing to learn
		}
		own = instant{own.w + int64(q), own.r}.plus(int64(rem), b.rq)
	}
	if w := now + reset; w > own.w+int64(b2i(own.r > 0)) {
		b.w, b.r = back(instant{w - int64(q), 0}, int64(rem), b.rq)
	}
}

// unrecord gives n tokens back without a record of them (a hold Redis did
// not confirm, see mirror.go): the TAT moves back by n·wq ticks, and so do
// the main sequence's. It is exact only when no call came between, which
// is why what a reservation or an AllowAll pair took is given back by
// settle instead, here and in Redis.
func (b *bucket) unrecord(n int64) {
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

// reserved holds a bucket's outstanding reservations, so that a settle
// gives back exactly what the reservation would not have taken.
//
// # Why it is exact
//
// The TAT after events (t_k, m_k) in arrival order, TAT_k = max(TAT_{k-1},
// t_k) + m_k·T, unrolls to
//
//	TAT = max over events e of (t_e + T·Σ_{f >= e} m_f)
//
// (each event's time plus the tokens from it on; any t, in any order). A
// reservation given back in part is the event it would have been had its
// Reserve asked for less; moving the TAT back by the difference is wrong
// when a call came after it at a bucket that had drained meanwhile (the
// max clamped): reserve 10 at 0, a call at 5T, a cancel at 5T must leave
// Burst - 1 tokens, the TAT 6T, not T.
//
// So the events are kept in two parts: the main sequence (plain calls,
// written-back events, settles' extras, settled reservations at their
// actual cost), whose TAT is main and whose tokens since the first
// reservation cost c (C·T, a time, so that it stays exact in Lua however
// long the bucket never fills); and the outstanding reservations, each
// with its arrival position in it: x = max(main's TAT before it, its time)
// and c, main's C·T before it. Inserting an event (t0, a) at a position of
// a sequence gives TAT = max(TAT without it, X + a·T + (tokens after it)·T)
// with X = max(TAT before the position, t0): the terms of the events
// before it grow by a·T, the others do not change. Hence:
//
//   - a plain call of m at t moves main to max(main, t) + m·T and c by
//     m·T (add), and the bucket's TAT as always;
//   - a reservation of n at t (addAs) keeps (x, c, n) and moves the TAT
//     as AllowN's would: the TAT counts every event, outstanding ones at
//     their n, so Reserve decides as AllowN, and a reservation never
//     settled stands and drains as one;
//   - settling i at a <= n_i (settle) inserts it into main: main =
//     max(main, x_i + a·T + (c - c_i)); each later outstanding j has
//     x_j = max(x_j, x_i + a·T + (c_j - c_i)) and c_j += a·T; c += a·T;
//     then the TAT is recomputed over the outstanding ones left, in
//     order, each inserted after the one before: x'_1 = x_1, x'_j =
//     max(x_j, x'_{j-1} + n_{j-1}·T + (c_j - c_{j-1})), TAT = max(main,
//     x'_last + n_last·T + (c - c_last)), which is main's with none left;
//   - when a call finds TAT <= now (the bucket is full), every term is
//     at most now, and so at most the term of any event from now on:
//     nothing a give-back lowers can matter again, and the reservations
//     are forgotten (a settle that finds no record gives nothing back).
//
// Each step is the model's TAT over the events it names, integers exact
// in µs and ticks; a settle costs O(outstanding), a plain call O(1).
// lua/gcra.lua keeps the same numbers in the bucket's own string.
type reserved struct {
	main instant // the TAT of the events but the outstanding reservations
	c    instant // C·T: what main's events since the first reservation cost
	out  []outstanding
}

// outstanding is one reservation not settled yet.
type outstanding struct {
	id uint64  // the reservation's (or AllowAll pair's) call number (see undo.rec)
	x  instant // max(main's TAT when it came, its time)
	c  instant // C·T when it came
	n  int64
}

// add puts a plain event of k ticks at at into the main sequence.
func (rs *reserved) add(at instant, k, rq int64) {
	rs.main = later(rs.main, at).plus(k, rq)
	rs.c = rs.c.plus(k, rq)
}

// settle gives back d of the tokens the outstanding reservation id took
// (d = 0 settles it at its cost: it joins the main sequence), and moves
// the TAT where the events would have left it had the reservation asked for
// that much less (see reserved). It reports whether the bucket held the
// reservation: one it does not hold (given back before, forgotten by a full
// bucket) gives nothing back.
func (b *bucket) settle(id uint64, d int64) bool {
	rs := b.res
	if rs == nil {
		return false
	}
	i := -1
	for j := range rs.out {
		if rs.out[j].id == id {
			i = j
			break
		}
	}
	if i < 0 {
		return false
	}
	o := rs.out[i]
	cost := (o.n - min(max(d, 0), o.n)) * b.wq
	rs.main = later(rs.main, o.x.shift(rs.c, o.c, cost, b.rq))
	for j := i + 1; j < len(rs.out); j++ {
		q := &rs.out[j]
		q.x = later(q.x, o.x.shift(q.c, o.c, cost, b.rq))
		q.c = q.c.plus(cost, b.rq)
	}
	rs.c = rs.c.plus(cost, b.rq)
	rs.out = append(rs.out[:i], rs.out[i+1:]...)
	t := rs.main
	if len(rs.out) == 0 {
		b.res = nil
	} else {
		t = later(t, rs.chain(b.wq, b.rq))
	}
	// A give-back never raises the TAT: it is lower than what a mirror
	// learnt from Redis' replies (copyFrom), which counted others' calls.
	if t.before(b.tat()) {
		b.w, b.r = t.w, t.r
	}
	return true
}

// chain returns the term of the outstanding reservations: each inserted
// after the one before it, the last one's end moved on by main's tokens
// after it.
func (rs *reserved) chain(wq, rq int64) instant {
	p := &rs.out[0]
	x := p.x
	for j := 1; j < len(rs.out); j++ {
		q := &rs.out[j]
		x = later(q.x, x.shift(q.c, p.c, p.n*wq, rq))
		p = q
	}
	return x.shift(rs.c, p.c, p.n*wq, rq)
}

// cut fits the remainders kept for another rq (a changed rule, the
// degraded share) to rq, as lua/gcra.lua does.
func (rs *reserved) cut(rq int64) {
	rs.main.r, rs.c.r = min(rs.main.r, rq-1), min(rs.c.r, rq-1)
	for j := range rs.out {
		o := &rs.out[j]
		o.x.r, o.c.r = min(o.x.r, rq-1), min(o.c.r, rq-1)
	}
}

// ceilDiv returns ceil(a / b) for b > 0.
func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// gcd returns the greatest common divisor of a, b > 0.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// maxBucket bounds GCRA's Burst × Window/gcd: the ticks a full bucket
// holds, with room for a clock gone backwards, stay exact as float64.
const maxBucket = 1 << 52

// setGCRA sets the bucket's numbers for rate tokens per window and a
// bucket of burst.
func (p *plan) setGCRA(rate, burst int64) {
	g := gcd(p.window, rate)
	p.emit, p.rate, p.wq, p.rq = rate, burst, p.window/g, rate/g
}

// exact reports whether a GCRA plan's full bucket stays exact as float64
// ticks in Lua (see maxBucket) and within maxMicros.
func (p *plan) exact() bool { return p.wq <= maxBucket/p.rate && p.rate*p.wq/p.rq <= maxMicros }

// settleBound is the most a Reservation of p may settle at (see
// MaxSettleFactor): MaxSettleFactor times its capacity, and for a bucket
// no more than the tokens it refills in maxMicros, floor(maxMicros·rq/wq),
// so that a settle's debt moves the TAT at most maxMicros past its own
// (times are exact in Lua below 2^53µs, the year 2255, and a TAT of today
// plus a few such debts stays below). Only a bucket taking more than
// maxMicros/MaxSettleFactor to refill has the lower bound.
func (p *plan) settleBound() int64 {
	bound := MaxSettleFactor * p.rate
	if p.wq == 0 { // not a bucket
		return bound
	}
	hi, lo := bits.Mul64(maxMicros, uint64(p.rq))
	if hi >= uint64(p.wq) {
		return bound // more than 2^64 tokens
	}
	q, _ := bits.Div64(hi, lo, uint64(p.wq))
	return int64(min(uint64(bound), q))
}

// refill is how long an empty GCRA bucket takes to fill, in whole µs
// (Burst × Window/Rate, rounded up): an event's cost has flowed out of
// the bucket that long after it.
func (p *plan) refill() int64 { return ceilDiv(p.rate*p.wq, p.rq) }

// gcraKind is GCRA's algorithm (Kind GCRA): the TAT in a Redis string
// (lua/gcra.lua), a bucket here.
type gcraKind struct{}

func (gcraKind) name() string                    { return "gcra" }
func (gcraKind) capacity() string                { return "Burst" }
func (gcraKind) timed() bool                     { return false }
func (gcraKind) setTime(p plan, _ int64) plan    { return p }
func (gcraKind) letter() byte                    { return 'g' }
func (gcraKind) windowed() bool                  { return false }
func (gcraKind) grouped() string                 { return "" }
func (gcraKind) leased() bool                    { return false }
func (gcraKind) shieldMark(p plan) int64         { return p.emit }
func (gcraKind) horizon(plan) int64              { return maxTime }
func (gcraKind) stamp(_ plan, now int64) int64   { return now }
func (gcraKind) dueFrom(p plan, now int64) int64 { return now - p.refill() + 1 }
func (gcraKind) kept(p plan, _ int64) int64      { return 2 * p.refill() }
func (gcraKind) named() bool                     { return false }

// lost: a bucket drains one token every T = wq/rq µs, so of events Redis
// lost at at (tokens taken at or before it) at most events - ⌊(now -
// at)/T⌋ are still owed at now, and none once a full bucket has had time
// to refill (p.refill()); the process' own bucket counts until then.
func (gcraKind) lost(p plan, at, now, events int64) (int64, bool) {
	d := now - at
	if d >= p.refill() {
		return 0, false
	}
	if d <= 0 {
		return events, true
	}
	hi, lo := bits.Mul64(uint64(d), uint64(p.rq))
	if hi >= uint64(p.wq) {
		return 0, true
	}
	drained, _ := bits.Div64(hi, lo, uint64(p.wq))
	if drained >= uint64(events) {
		return 0, true
	}
	return events - int64(drained), true
}

func (gcraKind) compile(r Rule, p plan) (plan, string) {
	l := &r.Limit
	if bad := checkWindow(&r, true); bad != "" {
		return p, bad
	}
	switch {
	case l.Burst < 0:
		return p, fmt.Sprintf("Burst %d is negative", l.Burst)
	case l.Burst > maxRate:
		return p, fmt.Sprintf("Burst %d is above %d", l.Burst, maxRate)
	}
	p.setGCRA(p.rate, int64(cmp.Or(l.Burst, l.Rate)))
	if !p.exact() {
		return p, fmt.Sprintf("a bucket of Burst %d at %d per %v is too large to keep exactly; lower Burst, or pick a Window and a Rate with a larger common divisor",
			p.rate, l.Rate, l.Window)
	}
	return p, ""
}

func (gcraKind) scripts() *kindScripts { return gcraScripts }

// gcraScripts are the entries composed with lua/gcra.lua's pieces
// (see composeKind).
var gcraScripts = composeKind("gcra")

// args: wq and rq, the cost of an event in ticks and ticks per µs.
func (gcraKind) args(p plan) (int64, int64, bool)        { return p.wq, p.rq, false }
func (gcraKind) undoArgs(p plan, _ int64) (int64, int64) { return p.wq, p.rq }

// degrade: the share scales the refill and the bucket alike.
func (gcraKind) degrade(p plan, s *settings) plan {
	p.setGCRA(s.degradedRate(p.emit), s.degradedRate(p.rate))
	return p
}

func (gcraKind) meter(sh *localShard, k lkey, h uint64, p plan, now int64, create bool) (meter, bool) {
	b := metersOf[bucket](sh, bucketMeters).GetOrAdd(&k, h, now, create)
	if b == nil {
		return nil, false
	}
	// A TAT kept for another Rate (the degraded share, a changed rule)
	// keeps its whole µs; the remainder, under 1µs, is cut to fit, as
	// lua/gcra.lua does.
	if b.res != nil && b.rq != p.rq {
		b.res.cut(p.rq)
	}
	b.wq, b.rq, b.burst, b.r = p.wq, p.rq, p.rate, min(b.r, p.rq-1)
	return b, true
}

func (gcraKind) unrecord(sh *localShard, k lkey, h uint64, _ plan, _, n int64) {
	if b := metersOf[bucket](sh, bucketMeters).Peek(&k, h); b != nil {
		b.unrecord(n)
	}
}

// settleAs gives back d of what the reservation id took of k's bucket (see
// bucket.settle).
func (gcraKind) settleAs(sh *localShard, k lkey, h uint64, p plan, id uint64, d int64) bool {
	b := metersOf[bucket](sh, bucketMeters).Peek(&k, h)
	if b == nil {
		return false
	}
	if b.res != nil && b.rq != p.rq {
		b.res.cut(p.rq)
	}
	b.wq, b.rq, b.burst, b.r = p.wq, p.rq, p.rate, min(b.r, p.rq-1)
	return b.settle(id, d)
}

func (gcraKind) dropEmpty(sh *localShard, k lkey, h uint64, now int64) {
	if b := metersOf[bucket](sh, bucketMeters).Peek(&k, h); b != nil && b.Reset(now, 0, false) == 0 {
		metersOf[bucket](sh, bucketMeters).Remove(&k, h)
	}
}

// bucketMeters is the slot of the shard's table of buckets.
var bucketMeters = meterSlot('g')

func (gcraKind) newMeters(size int) meterTable { return newMeters[bucket](size) }
func (gcraKind) meterName() string             { return "bucket" }

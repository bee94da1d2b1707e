package ratelimit

import (
	"cmp"
	"fmt"
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
// Its shard's lock guards it.
type bucket struct {
	w, r int64
	// The plan's numbers, set by localShard.meter.
	wq, rq, burst int64
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

// Add takes n tokens at now: the debt grows by n·wq ticks.
func (b *bucket) Add(now, _, n int64) {
	debt, _ := b.debt(now)
	debt += n * b.wq
	b.w, b.r = now+debt/b.rq, debt%b.rq
}

// copyFrom merges what Redis answered into the bucket: full again after
// Reset µs, which Redis rounded up to a whole µs, when that is later than
// the bucket's own TAT rounded up alike (an equal TAT keeps the bucket's
// exact ticks).
func (b *bucket) copyFrom(now, _, reset int64) {
	if w := now + reset; w > b.w+int64(b2i(b.r > 0)) {
		b.w, b.r = w, 0
	}
}

// unrecord gives n tokens back, as lua/undo.lua does.
func (b *bucket) unrecord(n int64) {
	back := n * b.wq
	b.w -= back / b.rq
	if b.r -= back % b.rq; b.r < 0 {
		b.r += b.rq
		b.w--
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
	b.wq, b.rq, b.burst, b.r = p.wq, p.rq, p.rate, min(b.r, p.rq-1)
	return b, true
}

func (gcraKind) unrecord(sh *localShard, k lkey, h uint64, _ plan, _, n int64) {
	if b := metersOf[bucket](sh, bucketMeters).Peek(&k, h); b != nil {
		b.unrecord(n)
	}
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

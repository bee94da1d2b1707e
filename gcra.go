package ratelimit

import (
	"cmp"
	"fmt"
	"math/bits"

	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// setGCRA sets the bucket's numbers for rate tokens per window and a
// bucket of burst.
func (p *plan) setGCRA(rate, burst int64) {
	p.wq, p.rq = meter.Ticks(p.window, rate)
	p.emit, p.rate = rate, burst
}

// exact reports whether a GCRA plan's full bucket stays exact as float64
// ticks in Lua (see meter.MaxBucket) and within maxMicros.
func (p *plan) exact() bool { return p.wq <= meter.MaxBucket/p.rate && p.rate*p.wq/p.rq <= maxMicros }

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
func (p *plan) refill() int64 { return meter.CeilDiv(p.rate*p.wq, p.rq) }

// gcraKind is GCRA's algorithm (Kind GCRA): the TAT in a Redis string
// (lua/gcra.lua), a meter.Bucket here.
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

func (gcraKind) meter(ms *meterTables, f meterFit, h uint64, now int64, create bool, k lkey) (meter.Meter, bool) {
	b := metersOf[meter.Bucket](ms, bucketMeters).GetOrAdd(&k, h, now, create)
	if b == nil {
		return nil, false
	}
	b.Fit(f.wq, f.rq, f.rate)
	return b, true
}

func (gcraKind) unrecord(ms *meterTables, k lkey, h uint64, _ meterFit, _, n int64) {
	if b := metersOf[meter.Bucket](ms, bucketMeters).Peek(&k, h); b != nil {
		b.Unrecord(n)
	}
}

// settleAs gives back d of what the reservation id took of k's bucket (see
// meter.Bucket.Settle).
func (gcraKind) settleAs(ms *meterTables, k lkey, h uint64, f meterFit, id uint64, d int64) bool {
	b := metersOf[meter.Bucket](ms, bucketMeters).Peek(&k, h)
	if b == nil {
		return false
	}
	b.Fit(f.wq, f.rq, f.rate)
	return b.Settle(id, d)
}

func (gcraKind) dropEmpty(ms *meterTables, k lkey, h uint64, now int64) {
	if b := metersOf[meter.Bucket](ms, bucketMeters).Peek(&k, h); b != nil && b.Reset(now, 0, false) == 0 {
		metersOf[meter.Bucket](ms, bucketMeters).Remove(&k, h)
	}
}

// bucketMeters is the slot of the shard's table of buckets.
var bucketMeters = meterSlot('g')

func (gcraKind) newMeters(size int) meterTable { return newMeters[meter.Bucket](size) }
func (gcraKind) meterName() string             { return "bucket" }

package meter

import "math"

// Carry is what a process owes Redis' bucket for tokens it took without
// Redis: its own bucket as it stood when it began to owe, with only its own
// tokens since added to it (own), and base, the TAT of what Redis holds of
// that bucket (what the process' bucket held then, and what write-backs
// brought since). What own holds beyond max(base, now) is owed: the
// process' tokens queue behind what Redis holds, as they did in the bucket
// that allowed them, so a bucket kept busy through an outage longer than
// its refill still owes what its TAT carries from the outage's start, which
// the tokens of its last refill alone would not.
//
// With the fleet's shares, each process' bucket at its share, seeded with
// Redis' bucket, owes Bᵢ when it ends the outage full, and Redis' bucket
// takes Σ Bᵢ = Burst on top of max(its TAT, now): full, as the fleet's
// would be. Every time is kept as the bucket keeps its TAT, exactly.
//
// The zero Carry owes nothing; a Carrier's CarryOn begins it.
type Carry struct {
	own  Bucket
	base instant
	on   bool
}

// Carrier is a meter whose tokens owed to Redis carry on in its state (a
// bucket's TAT).
type Carrier interface {
	// CarryOn adds the meter's last n tokens, taken at now, to what c
	// owes; a c not begun begins with the meter as it stood before them.
	CarryOn(c *Carry, now, n int64)
}

// CarryOn adds the bucket's last n tokens, taken at now, to what c owes
// (see Carrier).
func (b *Bucket) CarryOn(c *Carry, now, n int64) {
	if !c.on {
		*c = Carry{own: Bucket{w: b.w, r: b.r, wq: b.wq, rq: b.rq, burst: b.burst}, on: true}
		c.own.Unrecord(n)
		c.base = c.own.tat()
	} else {
		c.own.Fit(b.wq, b.rq, b.burst)
		c.base.r = min(c.base.r, b.rq-1) // as Fit cuts the TAT's
	}
	c.own.Add(now, 0, n)
}

// On reports whether c was begun (and not cleared since).
func (c *Carry) On() bool { return c.on }

// Owed returns the tokens owed at now: ceil of what own holds beyond
// max(base, now), in tokens of its bucket.
func (c *Carry) Owed(now int64) int64 {
	if !c.on {
		return 0
	}
	from := later(c.base, instant{now, 0})
	if !from.before(c.own.tat()) {
		return 0
	}
	t := c.own.tat()
	if d := t.w - from.w; d > MaxBucket/c.own.rq {
		// Far more than a bucket (settles charged past it): in doubles.
		return int64(math.Ceil(float64(d) * float64(c.own.rq) / float64(c.own.wq)))
	}
	return CeilDiv((t.w-from.w)*c.own.rq+t.r-from.r, c.own.wq)
}

// Mark returns what own holds at the cut of a write-back that brings all
// that is owed to Redis: Paid with it once Redis has it.
func (c *Carry) Mark() (w, r int64) { return c.own.w, c.own.r }

// Paid records that Redis holds what own held at the mark (w, r): only
// what own holds beyond it is owed since.
func (c *Carry) Paid(w, r int64) {
	c.base = later(c.base, instant{w, min(r, c.own.rq-1)})
}

// Restart empties own down to what Redis holds (base), for its tokens to be
// owed again one by one (Replay): after some of them were taken back or
// dropped, own holds exactly the others.
func (c *Carry) Restart() { c.own.w, c.own.r, c.own.res = c.base.w, c.base.r, nil }

// Replay owes n tokens taken at at again, after Restart, in time order.
func (c *Carry) Replay(at, n int64) { c.own.Add(at, 0, n) }

// Clear forgets everything owed.
func (c *Carry) Clear() { *c = Carry{} }

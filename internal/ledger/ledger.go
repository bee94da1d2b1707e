// Package ledger keeps what a process decided without Redis owes it (see
// docs/fallback.md, "Write-back"), pair by pair: the events it allowed,
// the violations and bans its penalty ladder counted, a ban made by hand
// and a Reset Redis did not see. It cuts them into batches, one per pair,
// for the caller to write back, and takes from them what Redis applied.
//
// It knows nothing of Redis, of the Limiter or of the kinds of limit: its
// caller says when each event is stamped and which stamps still count (a
// kind's write-back terms), sends the batches, and says how each call
// ended ([Ledger.Settle]). The caller's pair key and plan are its type
// parameters K and P, carried and never read.
//
// Times are µs; counts are events.
//
// # Rules
//
//   - A pair's events are kept as (stamp, n), stamps ascending; a rule that
//     changes how it stamps (its kind, window or period: [Stamps]) under the
//     same name drops what it owed.
//   - The events of every debt of one Owing are at most its Max: over it,
//     the oldest events of the least recently used debts go first, the
//     owing pair's own included, counted as dropped.
//   - A meter whose tokens carry on in its state (a GCRA bucket,
//     meter.Carrier) is owed what its own tokens hold beyond what Redis
//     holds (meter.Carry); a batch cut while none of its debt's is on its
//     way folds its events into that many tokens taken at the cut.
//   - A batch whose reply was lost is sent again as it is, under the same
//     id, until Redis answers; while a batch is on its way, its events are
//     still owed.
//
// A Ledger is not safe for concurrent use: its caller's lock guards it
// (one per shard of the caller's store); an Owing's counters are atomic.
package ledger

import (
	"sync/atomic"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/meter"
	"github.com/ratelimit-go/ratelimit/internal/store"
)

// Stamps names how a rule stamps its events: its kind (any value its
// caller compares, as the kind's identity), its window and its period.
type Stamps struct {
	Kind           any
	Window, Period int64
}

// Terms are what a Debt reads of the plan its events are owed under. The
// caller passes them with the plan, rather than the Ledger deriving them
// from P through a function: a plan passed to a function value escapes,
// and a caller's plan on its stack would cost an allocation per call.
type Terms struct {
	Stamps Stamps
	// Penalize reports whether the plan has a penalty ladder, and Memory
	// how long it remembers a violation (µs).
	Penalize bool
	Memory   int64
}

// Owing counts, over the Ledgers that share it (a whole store), the events
// their debts hold and what became of the others.
type Owing struct {
	events  atomic.Int64  // events in debts
	debts   atomic.Int64  // pairs with a debt
	max     atomic.Int64  // the most events debts may hold
	written atomic.Uint64 // events written back
	dropped atomic.Uint64 // events dropped: over max, evicted, refused by Redis, pending at Close
}

// SetMax sets the most events the debts may hold; the next event owed
// beyond it drops the oldest.
func (o *Owing) SetMax(n int64) { o.max.Store(n) }

// Events returns the events the debts hold.
func (o *Owing) Events() int64 { return o.events.Load() }

// Debts returns the pairs with a debt.
func (o *Owing) Debts() int64 { return o.debts.Load() }

// Written returns the events written back.
func (o *Owing) Written() uint64 { return o.written.Load() }

// Dropped returns the events dropped: over the Max, evicted, refused by
// Redis, pending when the caller dropped everything ([Ledger.DropAll]).
func (o *Owing) Dropped() uint64 { return o.dropped.Load() }

// Ledger is the debts of one shard of its caller's store: at most size
// pairs, the least recently owing one evicted first (its events counted
// as dropped), each under the pair's key K and its 64-bit hash (see
// store.Table).
type Ledger[K comparable, P any] struct {
	t store.Table[K, *Debt[K, P]]
	o *Owing
}

// New returns a Ledger of at most size debts, counted in o.
func New[K comparable, P any](size int, o *Owing) Ledger[K, P] {
	return Ledger[K, P]{t: store.New[K, *Debt[K, P]](size), o: o}
}

// Len returns the number of debts.
func (l *Ledger[K, P]) Len() int { return l.t.Len() }

// Of returns k's debt, or nil.
func (l *Ledger[K, P]) Of(k *K, h uint64) *Debt[K, P] {
	if d := l.t.Peek(k, h); d != nil {
		return *d
	}
	return nil
}

// OfKind returns k's debt when its events are of kind (see Stamps), or
// nil.
func (l *Ledger[K, P]) OfKind(k *K, h uint64, kind any) *Debt[K, P] {
	if l.t.Len() == 0 {
		return nil
	}
	if d := l.Of(k, h); d != nil && d.terms.Stamps.Kind == kind {
		return d
	}
	return nil
}

// owe returns k's debt under p, creating it. A new debt in a full ledger
// evicts the least recently used one, whose events are counted as
// dropped, as is another pair's debt under the same hash.
func (l *Ledger[K, P]) owe(k *K, h uint64, p *P, t Terms) *Debt[K, P] {
	if e := l.t.Get(k, h); e != nil { // and to the front
		d := *e
		if d.terms.Stamps != t.Stamps {
			// The rule changed under the same name: its stamps mean
			// something else now.
			l.dropEvents(d, d.events.Total())
		}
		d.plan, d.terms = *p, t
		return d
	}
	if e, ok := l.t.PeekHash(h); ok {
		l.forget(h, e.Value, true)
	} else if l.t.Full() {
		if oh, e, ok := l.t.Oldest(); ok {
			l.forget(oh, e.Value, true)
		}
	}
	d := &Debt[K, P]{plan: *p, terms: t, events: eventlog.New()}
	l.t.Add(k, h, d)
	l.o.debts.Add(1)
	return d
}

// forget removes d, the debt kept under hash h; with dropped its events
// are counted as dropped.
func (l *Ledger[K, P]) forget(h uint64, d *Debt[K, P], dropped bool) {
	n := d.events.Total()
	l.o.events.Add(-n)
	if dropped {
		l.o.dropped.Add(uint64(n))
	}
	l.t.RemoveHash(h)
	l.o.debts.Add(-1)
}

// dropEvents drops up to n of d's oldest events, counting them as
// dropped, and returns how many it dropped.
func (l *Ledger[K, P]) dropEvents(d *Debt[K, P], n int64) int64 {
	before := d.events.Total()
	d.events.Bound(max(0, before-n))
	gone := before - d.events.Total()
	if gone > 0 {
		d.recarry()
	}
	l.o.events.Add(-gone)
	l.o.dropped.Add(uint64(gone))
	return gone
}

// OweEvents remembers n events allowed without Redis at now, stamped at
// stamp, by the meter m (nil: none), owed under p (under member when not
// "": the call may have run on Redis under it), and keeps the Owing within
// its Max: over it, the oldest events of the least recently used debts of
// this ledger are dropped (this pair's own included, so the bound always
// holds).
func (l *Ledger[K, P]) OweEvents(k *K, h uint64, p *P, t Terms, m meter.Meter, now, stamp, n int64, member string) {
	d := l.owe(k, h, p, t)
	if c, ok := m.(meter.Carrier); ok {
		if d.events.Total() == 0 {
			d.carry.Clear() // what it owed is paid: it begins again
		}
		c.CarryOn(&d.carry, now, n)
	}
	d.events.Record(stamp, n)
	if member != "" {
		d.named = append(d.named, Named{At: stamp, N: n, Member: member})
	}
	l.bound(l.o.events.Add(n) - l.o.max.Load())
}

// bound drops over events, the oldest of the least recently used debts
// first.
func (l *Ledger[K, P]) bound(over int64) {
	for over > 0 {
		h, e, ok := l.t.Oldest()
		if !ok {
			return
		}
		over -= l.dropEvents(e.Value, over)
		if !e.Value.Empty() || e.Value.inflight {
			break
		}
		l.forget(h, e.Value, false) // so that the next drop finds events at the oldest
	}
	if over <= 0 {
		return
	}
	// The oldest debt stays with no events left (a batch of it is on its
	// way, or it owes violations, a ban or a Reset): the others are walked
	// in order, from a copy of the table's order (this allocates, but only
	// while such a debt is the oldest and the store is over its Max).
	for _, h := range l.t.Hashes()[1:] {
		e, _ := l.t.PeekHash(h)
		over -= l.dropEvents(e.Value, over)
		if e.Value.Empty() && !e.Value.inflight {
			l.forget(h, e.Value, false)
		}
		if over <= 0 {
			return
		}
	}
}

// OweViolation remembers a violation counted at now without Redis, and the
// ban it started (ban > 0: its length).
func (l *Ledger[K, P]) OweViolation(k *K, h uint64, p *P, t Terms, now, ban int64) {
	d := l.owe(k, h, p, t)
	if d.violations > 0 && now-d.lastViolation >= t.Memory {
		// Forgotten by now, as Redis forgets them (penalty.forget):
		// delivered with this one, they would count again.
		d.violations, d.bans = 0, 0
	}
	d.violations++
	d.lastViolation = max(d.lastViolation, now)
	if ban > 0 {
		d.bans++
		d.banEnd = max(d.banEnd, now+ban)
	}
}

// OweBan remembers a ban made by hand until end that Redis did not get.
func (l *Ledger[K, P]) OweBan(k *K, h uint64, p *P, t Terms, end int64) {
	d := l.owe(k, h, p, t)
	d.banEnd = max(d.banEnd, end)
}

// OweStrikes gives k's debt back violations, the last at struck, that a
// call was handed (see Debt.Hand) and did not deliver.
func (l *Ledger[K, P]) OweStrikes(k *K, h uint64, p *P, t Terms, violations, struck int64) {
	d := l.owe(k, h, p, t)
	d.violations += violations
	d.lastViolation = max(d.lastViolation, struck)
}

// OweReset remembers a Reset made at now that Redis did not get.
func (l *Ledger[K, P]) OweReset(k *K, h uint64, p *P, t Terms, now int64) {
	d := l.owe(k, h, p, t)
	d.reset, d.resetAt = true, max(d.resetAt, now)
}

// Forget takes n events stamped at stamp back from k's debt when it is of
// kind (an undo, a lease's release, a reservation's give-back), and returns
// how many it held.
func (l *Ledger[K, P]) Forget(k *K, h uint64, kind any, stamp, n int64) int64 {
	d := l.OfKind(k, h, kind)
	if d == nil {
		return 0
	}
	gone := d.events.Subtract([]eventlog.Event{{At: stamp, N: n}})
	l.o.events.Add(-gone)
	if gone > 0 {
		d.recarry()
	}
	return gone
}

// LessNamed takes n of the events owed under member among what k owes
// (all of them when n < 0).
func (l *Ledger[K, P]) LessNamed(k *K, h uint64, member string, n int64) {
	if member == "" || n == 0 {
		return
	}
	if d := l.Of(k, h); d != nil {
		d.lessNamed(member, n)
	}
}

// Reset forgets k's debt for a Reset at now: what it owed was made before
// the Reset. When a batch of it is on its way, Redis may apply it after
// the Reset; the Reset is then owed itself, under p, so that it is applied
// again after the batch.
func (l *Ledger[K, P]) Reset(k *K, h uint64, p *P, t Terms, now int64) {
	e := l.t.Find(k, h)
	if e == nil {
		return
	}
	inflight := e.Value.inflight || e.Value.unsure != nil
	l.forget(h, e.Value, false)
	if inflight {
		l.OweReset(k, h, p, t, now)
	}
}

// DropAll counts every event still owed as dropped and forgets the debts
// (the caller closes).
func (l *Ledger[K, P]) DropAll() {
	for {
		h, e, ok := l.t.Oldest()
		if !ok {
			return
		}
		l.forget(h, e.Value, true)
	}
}

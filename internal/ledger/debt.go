package ledger

import (
	"slices"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// Debt is what one pair owes Redis, under the plan P it was last decided
// under without Redis.
type Debt[K comparable, P any] struct {
	plan   P
	terms  Terms
	events eventlog.Log // events allowed without Redis, by stamp
	// reset: a Reset made at resetAt that Redis has not seen.
	reset   bool
	resetAt int64
	banEnd  int64 // the latest ban decided or made without Redis (0: none)
	// violations and bans the ladder counted without Redis; the last of
	// the violations was at lastViolation.
	violations, bans, lastViolation int64

	inflight bool         // a batch of this debt is on its way
	unsure   *Batch[K, P] // a batch Redis may have applied: sent again as it is
	// named are events (among events) of calls whose script may have run
	// on Redis before the call was decided without it (a timeout): they
	// are written back under the member the script got, so that Redis
	// counts each once either way.
	named []Named
	// carry is what the pair owes, for a meter whose tokens carry on in
	// its state (meter.Carrier, a GCRA bucket): what its events hold of
	// the process' bucket beyond what Redis holds, however long ago the
	// busy spell that fills it began. A batch carries it as tokens taken
	// at the cut, in place of the events (fold).
	carry meter.Carry
}

// Named is N events stamped At, owed under a member id of their own.
type Named struct {
	At, N  int64
	Member string
}

// Plan returns the plan d's events are owed under. The caller must not
// change it.
func (d *Debt[K, P]) Plan() *P { return &d.plan }

// Since returns the events d owes stamped at from or later.
func (d *Debt[K, P]) Since(from int64) int64 { return d.events.Since(from) }

// OwedAt returns the events d still owes Redis at now, the oldest stamp
// that still counts then being due: for a meter whose tokens carry on,
// what its carry owes; otherwise its events stamped at due or later.
func (d *Debt[K, P]) OwedAt(now, due int64) int64 {
	if d.carry.On() {
		return min(d.carry.Owed(now), d.events.Total())
	}
	return d.events.Since(due)
}

// Strikes returns the violations and bans d owes Redis that a ladder
// remembering them for memory still counts at now (0, 0: none).
func (d *Debt[K, P]) Strikes(now, memory int64) (violations, bans int64) {
	if d.violations > 0 && now-d.lastViolation < memory {
		return d.violations, d.bans
	}
	return 0, 0
}

// Hand hands the violations d owes Redis, and the time of the last, to a
// call made at now that delivers them (the caller gives back what it did
// not deliver: Ledger.OweStrikes), unless a batch of d is on its way (it
// may carry them) or they are forgotten by now: then it returns 0.
func (d *Debt[K, P]) Hand(now int64) (violations, struck int64) {
	if d.violations == 0 || d.inflight || d.unsure != nil || now-d.lastViolation >= d.terms.Memory {
		return 0, 0
	}
	violations, struck = d.violations, d.lastViolation
	d.violations = 0
	return violations, struck
}

// Empty reports whether d owes nothing.
func (d *Debt[K, P]) Empty() bool {
	return d.events.Total() == 0 && !d.reset && d.banEnd == 0 && d.violations == 0 && d.unsure == nil
}

// lessNamed takes n of the events owed under member (all of them when
// n < 0).
func (d *Debt[K, P]) lessNamed(member string, n int64) {
	i := slices.IndexFunc(d.named, func(nm Named) bool { return nm.Member == member })
	switch {
	case i < 0:
	case n < 0 || d.named[i].N <= n:
		d.named = slices.Delete(d.named, i, i+1)
	default:
		d.named[i].N -= n
	}
}

// recarry makes d's carry again from its events, after some of them left
// (taken back, dropped): from what Redis holds, each left in turn. It
// allocates, once for each such change.
func (d *Debt[K, P]) recarry() {
	if !d.carry.On() {
		return
	}
	d.carry.Restart()
	evs, _ := d.events.AppendEntries(nil, int(d.events.Total()))
	for _, ev := range evs {
		d.carry.Replay(ev.At, ev.N)
	}
}

// fold makes d's events one lump at now, the tokens its carry owes then,
// which Redis' bucket takes as tokens taken at now (max(TAT, now) + n·T) on
// top of what it holds, and returns the carry's mark for the batch that
// brings them (see meter.Carry.Paid). Its caller sees to it that no batch
// of d is on its way, which would be settled against the events it
// carried.
func (d *Debt[K, P]) fold(now int64) (w, r int64) {
	c := d.OwedAt(now, 0)
	d.events.Drop(eventlog.MaxTime)
	if c > 0 {
		d.events.Record(now, c)
	}
	return d.carry.Mark()
}

// paid takes from d what b brought, once Redis applied it (or refused it:
// it never will apply it), and returns how many of d's events left.
func (d *Debt[K, P]) paid(b *Batch[K, P]) (removed int64) {
	if len(b.Named) > 0 {
		sent := make(map[string]bool, len(b.Named))
		for _, nm := range b.Named {
			sent[nm.Member] = true
		}
		d.named = slices.DeleteFunc(d.named, func(nm Named) bool { return sent[nm.Member] })
	}
	removed = d.events.Subtract(b.Events)
	switch {
	case !d.carry.On() || removed == 0: // nothing of it was left to pay (dropped over the Max)
	case b.folded:
		d.carry.Paid(b.mark[0], b.mark[1])
	default: // events cut unfolded: what is left is owed afresh
		d.recarry()
	}
	if b.Reset && d.resetAt == b.ResetAt {
		d.reset = false
	}
	if d.banEnd <= b.BanEnd {
		d.banEnd = 0
	}
	d.violations = max(0, d.violations-b.Violations)
	d.bans = max(0, d.bans-b.Bans)
	return removed
}

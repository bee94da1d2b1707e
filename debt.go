package ratelimit

import (
	"slices"
	"sync/atomic"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// What a (rule, key) pair decided without Redis owes it: the debts of the
// local store, and how calls add to them, take from them and read them.
// writeback.go cuts batches from them and sends them.

// debt is what one (rule, key) pair owes Redis. Its shard's lock guards it.
type debt struct {
	p      plan         // the rule as last decided without Redis
	events eventlog.Log // events allowed without Redis, by stamp
	// reset: a Reset made at resetAt that Redis has not seen.
	reset   bool
	resetAt int64
	banEnd  int64 // the latest ban decided or made without Redis (0: none)
	// violations and bans the ladder counted without Redis; the last of
	// the violations was at lastViolation.
	violations, bans, lastViolation int64

	inflight bool   // a batch of this debt is on its way
	unsure   *batch // a batch Redis may have applied: sent again as it is
	// named are events (among events) of calls whose script may have run
	// on Redis before the call was decided without it (a timeout): they
	// are written back under the member the script got, so that Redis
	// counts each once either way. Exact logs only.
	named []named
	// carry is what the pair owes, for a meter whose tokens carry on in
	// its state (meter.Carrier, a GCRA bucket): what its events hold of
	// the process' bucket beyond what Redis holds, however long ago the
	// busy spell that fills it began. The write-back sends it as tokens
	// taken at the cut, in place of the events (fold).
	carry meter.Carry
}

// named is n events stamped at, owed under a member id of their own.
type named struct {
	at, n  int64
	member string
}

// owing counts, over a whole local store, the events its debts hold and
// what became of the others.
type owing struct {
	events  atomic.Int64  // events in debts
	debts   atomic.Int64  // pairs with a debt
	max     int64         // the most events debts may hold (WriteBackMax)
	written atomic.Uint64 // events written back
	dropped atomic.Uint64 // events dropped: over max, evicted, refused by Redis, pending at Close
}

// debtOf returns k's debt, or nil. The caller holds sh.mu.
func (sh *localShard) debtOf(k *lkey, h uint64) *debt {
	if d := sh.debts.Peek(k, h); d != nil {
		return *d
	}
	return nil
}

// owe returns k's debt under p, creating it. A new debt in a full table
// evicts the least recently used one, whose events are counted as
// dropped. The caller holds sh.mu.
func (sh *localShard) owe(k *lkey, h uint64, p *plan) *debt {
	if e := sh.debts.Get(k, h); e != nil { // and to the front
		d := *e
		if d.p.alg != p.alg || d.p.window != p.window || d.p.period != p.period {
			// The rule changed under the same name: its stamps mean
			// something else now.
			sh.dropEvents(d, d.events.Total())
		}
		d.p = *p
		return d
	}
	if e, ok := sh.debts.PeekHash(h); ok {
		// Another pair's debt under the same hash (see store.Table): it is
		// dropped, as an eviction would drop it.
		sh.forgetDebt(h, e.Value, true)
	} else if sh.debts.Full() {
		if oh, e, ok := sh.debts.Oldest(); ok {
			sh.forgetDebt(oh, e.Value, true)
		}
	}
	d := &debt{p: *p, events: eventlog.New()}
	sh.debts.Add(k, h, d)
	sh.owing.debts.Add(1)
	return d
}

// forgetDebt removes d, the debt kept under hash h; with dropped its
// events are counted as dropped. The caller holds sh.mu.
func (sh *localShard) forgetDebt(h uint64, d *debt, dropped bool) {
	n := d.events.Total()
	sh.owing.events.Add(-n)
	if dropped {
		sh.owing.dropped.Add(uint64(n))
	}
	sh.debts.RemoveHash(h)
	sh.owing.debts.Add(-1)
}

// dropEvents drops up to n of d's oldest events, counting them as dropped,
// and returns how many it dropped. The caller holds sh.mu.
func (sh *localShard) dropEvents(d *debt, n int64) int64 {
	before := d.events.Total()
	d.events.Bound(max(0, before-n))
	gone := before - d.events.Total()
	if gone > 0 {
		d.recarry()
	}
	sh.owing.events.Add(-gone)
	sh.owing.dropped.Add(uint64(gone))
	return gone
}

// oweEvents remembers n events allowed at now without Redis by the meter
// m (nil: none), owed under p (under member, when the call may have run on
// Redis under it), and keeps the store within
// WriteBackMax: over it, the oldest events of the least recently used
// debts of this shard are dropped (this pair's own included, so the bound
// always holds). The caller holds sh.mu.
func (sh *localShard) oweEvents(k *lkey, h uint64, p *plan, m meter.Meter, now, n int64, member string) {
	d := sh.owe(k, h, p)
	if c, ok := m.(meter.Carrier); ok {
		if d.events.Total() == 0 {
			d.carry.Clear() // what it owed is paid: it begins again
		}
		c.CarryOn(&d.carry, now, n)
	}
	d.events.Record(p.alg.back.stamp(*p, now), n)
	if member != "" && p.alg.back.named() {
		d.named = append(d.named, named{at: p.alg.back.stamp(*p, now), n: n, member: member})
	}
	over := sh.owing.events.Add(n) - sh.owing.max
	for over > 0 {
		h, e, ok := sh.debts.Oldest()
		if !ok {
			return
		}
		over -= sh.dropEvents(e.Value, over)
		if !e.Value.empty() || e.Value.inflight {
			break
		}
		sh.forgetDebt(h, e.Value, false) // so that the next drop finds events at the oldest
	}
	if over > 0 {
		// The oldest debt stays with no events left (a batch of it is on
		// its way, or it owes violations, a ban or a Reset): the others
		// are walked in order, from a copy of the table's order (this
		// allocates, but only while such a debt is the oldest and the
		// store is over WriteBackMax).
		for _, h := range sh.debts.Hashes()[1:] {
			e, _ := sh.debts.PeekHash(h)
			over -= sh.dropEvents(e.Value, over)
			if e.Value.empty() && !e.Value.inflight {
				sh.forgetDebt(h, e.Value, false)
			}
			if over <= 0 {
				return
			}
		}
	}
}

// oweViolation remembers a violation counted at now without Redis, and the
// ban it started (ban > 0: its length). The caller holds sh.mu.
func (sh *localShard) oweViolation(k *lkey, h uint64, p *plan, now, ban int64) {
	d := sh.owe(k, h, p)
	if d.violations > 0 && now-d.lastViolation >= p.penalty.memory {
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

// oweBan remembers a ban made by hand until end that Redis did not get.
func (s *localStore) oweBan(k lkey, p *plan, end int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d := sh.owe(&k, h, p)
	d.banEnd = max(d.banEnd, end)
}

// hand moves the violations d owes Redis into hd, for the call hold
// makes at now to deliver (see held.strikes), unless a batch of d is on its
// way (it may carry them) or they are forgotten by now. The caller holds
// the debt's shard's lock.
func (d *debt) hand(hd *held, now int64) {
	if d.violations == 0 || d.inflight || d.unsure != nil || now-d.lastViolation >= d.p.penalty.memory {
		return
	}
	hd.strikes, hd.struck = d.violations, d.lastViolation
	d.violations = 0
}

// oweStrikes gives k's debt back the violations a call was handed (see
// debt.hand) and did not deliver. The caller holds sh.mu.
func (sh *localShard) oweStrikes(k *lkey, h uint64, p *plan, hd *held) {
	d := sh.owe(k, h, p)
	d.violations += hd.strikes
	d.lastViolation = max(d.lastViolation, hd.struck)
	hd.strikes = 0
}

// oweReset remembers a Reset made at now that Redis did not get. The
// caller holds sh.mu.
func (sh *localShard) oweReset(k *lkey, h uint64, p *plan, now int64) {
	d := sh.owe(k, h, p)
	d.reset, d.resetAt = true, max(d.resetAt, now)
}

// forgetOwed takes n events allowed at now back from k's debt (AllowAll's
// undo, a lease's release, a reservation's give-back), and returns how many
// it held. The caller holds sh.mu.
func (sh *localShard) forgetOwed(k *lkey, h uint64, p *plan, now, n int64) int64 {
	d := sh.debtOf(k, h)
	if d == nil || d.p.alg != p.alg {
		return 0
	}
	gone := d.events.Subtract([]eventlog.Event{{At: p.alg.back.stamp(*p, now), N: n}})
	sh.owing.events.Add(-gone)
	if gone > 0 {
		d.recarry()
	}
	return gone
}

// forgetNamed forgets the named event of member among what k owes. The
// caller holds sh.mu.
func (sh *localShard) forgetNamed(k *lkey, h uint64, member string) {
	sh.lessNamed(k, h, member, -1)
}

// lessNamed takes n of the events owed under member among what k owes
// (all of them when n < 0). The caller holds sh.mu.
func (sh *localShard) lessNamed(k *lkey, h uint64, member string, n int64) {
	if member == "" || n == 0 {
		return
	}
	if d := sh.debtOf(k, h); d != nil {
		if i := slices.IndexFunc(d.named, func(nm named) bool { return nm.member == member }); i >= 0 {
			if n < 0 || d.named[i].n <= n {
				d.named = slices.Delete(d.named, i, i+1)
			} else {
				d.named[i].n -= n
			}
		}
	}
}

// resetDebt forgets k's debt for a Reset at now: what it owed was made
// before the Reset. When a batch of it is on its way, Redis may apply it
// after the Reset; the Reset is then owed itself, so that it is applied
// again after the batch.
func (sh *localShard) resetDebt(k *lkey, h uint64, p *plan, now int64) {
	e := sh.debts.Find(k, h)
	if e == nil {
		return
	}
	inflight := e.Value.inflight || e.Value.unsure != nil
	sh.forgetDebt(h, e.Value, false)
	if inflight {
		sh.oweReset(k, h, p, now)
	}
}

// owedAt returns the events d still owes Redis at now, d being of p's kind:
// for a meter whose tokens carry on, what its carry owes; otherwise its
// events since the oldest stamp that still counts.
func (d *debt) owedAt(p *plan, now int64) int64 {
	if d.carry.On() {
		return min(d.carry.Owed(now), d.events.Total())
	}
	return d.events.Since(p.alg.back.dueFrom(*p, now))
}

// recarry makes d's carry again from its events, after some of them left
// (taken back, dropped): from what Redis holds, each left in turn. It
// allocates, once for each such change.
func (d *debt) recarry() {
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
func (d *debt) fold(now int64) (w, r int64) {
	c := d.owedAt(&d.p, now)
	d.events.Drop(eventlog.MaxTime)
	if c > 0 {
		d.events.Record(now, c)
	}
	return d.carry.Mark()
}

// paid takes from d what b brought, once Redis applied it (or refused it:
// it never will apply it), and returns how many of d's events left.
func (d *debt) paid(b *batch) (removed int64) {
	if len(b.named) > 0 {
		sent := make(map[string]bool, len(b.named))
		for _, nm := range b.named {
			sent[nm.member] = true
		}
		d.named = slices.DeleteFunc(d.named, func(nm named) bool { return sent[nm.member] })
	}
	removed = d.events.Subtract(b.events)
	switch {
	case !d.carry.On() || removed == 0: // nothing of it was left to pay (dropped over WriteBackMax)
	case b.folded:
		d.carry.Paid(b.mark[0], b.mark[1])
	default: // events cut unfolded: what is left is owed afresh
		d.recarry()
	}
	if b.reset && d.resetAt == b.resetAt {
		d.reset = false
	}
	if d.banEnd <= b.banEnd {
		d.banEnd = 0
	}
	d.violations = max(0, d.violations-b.violations)
	d.bans = max(0, d.bans-b.bans)
	return removed
}

// empty reports whether d owes nothing.
func (d *debt) empty() bool {
	return d.events.Total() == 0 && !d.reset && d.banEnd == 0 && d.violations == 0 && d.unsure == nil
}

// dropAll counts every event still owed as dropped and forgets the debts
// (Close).
func (s *localStore) dropAll() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for {
			h, e, ok := sh.debts.Oldest()
			if !ok {
				break
			}
			sh.forgetDebt(h, e.Value, true)
		}
		sh.mu.Unlock()
	}
}

package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/meter"
	"github.com/redis/rueidis"
)

// The write-back: what a process decided without Redis (during an outage,
// or for calls admission control shed) is written to Redis once Redis can
// be used again, so that Redis' log counts every event allowed in every
// process.
//
// Each (rule, key) pair the process decided without Redis has a debt in
// the local store: the events it allowed (as stamps, see stamp), the
// violations and bans the ladder counted, a ban made by hand and a Reset
// Redis did not see. A goroutine of the Limiter's (writeBackLoop) cuts
// batches from the debts, one batch per pair (all its keys share one hash
// tag, so a batch runs on a Redis Cluster too), and sends each with
// lua/writeback.lua through the one pipeline, admitted only while admission
// control has a slot to spare (redisio.Gate.AcquireSpare): live calls never wait
// for the write-back.
//
// A batch is idempotent: its id is remembered by Redis for two windows (or
// as long as its violations are), and a batch whose reply was lost is sent
// again as it was, under the same id, until Redis answers; the members of
// its log events are made from the id, so they would be the same again
// anyway. Once Redis answered, the batch's events leave the debt, and with
// them the decisions on Redis stop counting them on top of Redis' count
// (held.owed, mirror.go): Redis counts them now. While a batch is on its
// way they are still counted, and may count twice for that round trip: the
// decision errs towards rejecting.
//
// Meter kinds: the events of every kind are kept as (stamp, n) pairs in an
// eventlog.Log. What the write-back asks a kind is its writeBackKind (how
// its events are stamped, which stamps still count, how long they are
// kept), its Redis meter's key (redisKind.letter) and its <kind>.writeback
// piece, which lua/writeback.lua is composed with to add stamped events to
// the kind's Redis state (it gets the rule's numbers as allow.lua does,
// from redisKind.args). The exact log adds each event at its time, and the
// counters, quotas and fixed windows count events in the window or period
// they were stamped in, while it lasts. A GCRA bucket's events carry on in
// its TAT: its debt keeps what they hold of the process' bucket
// (debt.carry), and each batch folds them into that many tokens taken at
// the cut, which Redis' bucket adds to its TAT.

// DefaultWriteBackMax is the number of events waiting to be written back
// when Options.WriteBackMax is 0.
const DefaultWriteBackMax = 100_000

// writeBackEvery is how often the write-back looks for debts besides being
// woken when a breaker closes: shed calls leave debts while every breaker
// stays closed.
const writeBackEvery = time.Second

// maxBatchStamps bounds the stamps of one batch (two arguments each); a
// pair that owes more is written back in several batches.
const maxBatchStamps = 1000

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

// kept is how long what p's state holds at now can still count, in µs
// (see algorithm.kept). Redis remembers a write-back batch that long (so
// that a replay cannot change what its events count in), and a Reset's
// time (so that every process' own count of the pair before it is void).
func (p *plan) kept(now int64) int64 { return p.alg.back.kept(*p, now) }

// kept is how long Redis remembers a batch cut at now (see
// lua/writeback.lua), in µs: what its plan keeps, and longer while the
// violations it carries are remembered.
func (b *batch) kept(now int64) int64 {
	kept := b.p.kept(now)
	if b.violations > 0 {
		kept = max(kept, b.p.penalty.memory)
	}
	return kept
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

// batch is what one call of lua/writeback.lua writes for one pair: a copy
// of (part of) its debt when the batch was cut.
type batch struct {
	k      lkey
	d      *debt
	id     string // unique per Limiter and batch
	p      plan
	events []eventlog.Event // stamps ascending, named events included
	named  []named          // the named events among them
	reset  bool
	resetAt,
	banEnd,
	violations, bans, lastViolation int64
	full bool // the debt owed more events than one batch carries
	// mark is the debt's carry as the batch was cut (meter.Carry.Mark),
	// when it has one: what Redis holds once the batch is applied.
	mark [2]int64
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
	c := min(d.carry.Owed(now), d.events.Total())
	d.events.Drop(eventlog.MaxTime)
	if c > 0 {
		d.events.Record(now, c)
	}
	return d.carry.Mark()
}

// empty reports whether d owes nothing.
func (d *debt) empty() bool {
	return d.events.Total() == 0 && !d.reset && d.banEnd == 0 && d.violations == 0 && d.unsure == nil
}

// cut cuts a batch from each debt of shard i that owes something at now,
// oldest first, forgetting what no longer counts; a debt whose last batch
// Redis may have applied gives that batch again. newID names a batch.
func (s *localStore) cut(i int, now int64, newID func() string) []*batch {
	sh := &s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var bs []*batch
	if sh.debts.Len() == 0 {
		return nil
	}
	for _, h := range sh.debts.Hashes() {
		e, _ := sh.debts.PeekHash(h)
		d := e.Value
		before := d.events.Total()
		var mark [2]int64
		switch {
		case !d.carry.On():
			d.events.Drop(d.p.alg.back.dueFrom(d.p, now) - 1)
		case !d.inflight && d.unsure == nil:
			mark[0], mark[1] = d.fold(now)
		}
		sh.owing.events.Add(d.events.Total() - before)
		if len(d.named) > 0 {
			due := d.p.alg.back.dueFrom(d.p, now)
			d.named = slices.DeleteFunc(d.named, func(nm named) bool { return nm.at < due })
		}
		if d.violations > 0 && (!d.p.penalize || now-d.lastViolation >= d.p.penalty.memory) {
			d.violations, d.bans = 0, 0
		}
		if d.banEnd <= now {
			d.banEnd = 0
		}
		switch {
		case d.unsure != nil:
			d.inflight = true
			bs = append(bs, d.unsure)
		case d.empty():
			sh.forgetDebt(h, d, false)
		default:
			b := &batch{k: e.Key, d: d, id: newID(), p: d.p, reset: d.reset, resetAt: d.resetAt, banEnd: d.banEnd,
				violations: d.violations, bans: d.bans, lastViolation: d.lastViolation, mark: mark}
			b.events, b.full = d.events.AppendEntries(nil, maxBatchStamps)
			b.named = nameEvents(b.events, d.named)
			d.inflight = true
			bs = append(bs, b)
		}
	}
	return bs
}

// outcome is how a batch's call ended.
type outcome int

const (
	applied outcome = iota // Redis applied it, or had already
	refused                // Redis refused it as misuse: it never will apply it
	unsure                 // the reply was lost: Redis may have applied it
	unsent                 // it never reached Redis
)

// settle records how b's call ended: the events of a batch Redis applied
// (or refused) leave its debt, a batch Redis may have applied is kept to be
// sent again as it is, and one that never reached Redis is forgotten (the
// next batch is cut afresh). It does nothing when the debt is no longer
// there (a Reset, an eviction).
func (s *localStore) settle(b *batch, o outcome) {
	sh, h := s.at(&b.k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.debts.Find(&b.k, h)
	if e == nil || e.Value != b.d {
		return
	}
	d := b.d
	d.inflight = false
	switch o {
	case unsure:
		d.unsure = b
		return
	case unsent:
		return
	}
	d.unsure = nil
	if len(b.named) > 0 {
		sent := make(map[string]bool, len(b.named))
		for _, nm := range b.named {
			sent[nm.member] = true
		}
		d.named = slices.DeleteFunc(d.named, func(nm named) bool { return sent[nm.member] })
	}
	removed := d.events.Subtract(b.events)
	sh.owing.events.Add(-removed)
	if d.carry.On() {
		d.carry.Paid(b.mark[0], b.mark[1])
	}
	var sent int64
	for _, ev := range b.events {
		sent += ev.N
	}
	if o == applied {
		s.owing.written.Add(uint64(sent))
	} else {
		s.owing.dropped.Add(uint64(sent))
	}
	if b.reset && d.resetAt == b.resetAt {
		d.reset = false
	}
	if d.banEnd <= b.banEnd {
		d.banEnd = 0
	}
	d.violations = max(0, d.violations-b.violations)
	d.bans = max(0, d.bans-b.bans)
	if d.empty() {
		sh.forgetDebt(h, d, false)
	}
}

// nameEvents returns the named events among events (stamps ascending), each
// at most as many as events hold at its stamp: events dropped since (over
// WriteBackMax, taken back by AllowAll) leave fewer.
func nameEvents(events []eventlog.Event, all []named) []named {
	if len(all) == 0 || len(events) == 0 {
		return nil
	}
	left := make(map[int64]int64, len(all))
	var out []named
	for _, nm := range all {
		n, seen := left[nm.at]
		if !seen {
			i, found := slices.BinarySearchFunc(events, nm.at, func(e eventlog.Event, at int64) int { return cmp.Compare(e.At, at) })
			if found {
				n = events[i].N
			}
		}
		take := min(nm.n, n)
		left[nm.at] = n - take
		if take > 0 {
			nm.n = take
			out = append(out, nm)
		}
	}
	return out
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

// args returns the arguments of lua/writeback.lua for b, cut at now.
func (b *batch) args(now int64) []string {
	args := make([]string, 15, 15+2*len(b.events)+3*len(b.named))
	args[0] = b.id
	args[1] = itoa(b.p.window)
	args[2] = itoa(ttl(b.kept(now)))
	args[3] = flag(b.reset)
	args[4] = itoa(b.resetAt)
	args[5] = itoa(b.banEnd)
	args[6] = itoa(b.violations)
	args[7] = itoa(b.bans)
	args[8] = itoa(b.lastViolation)
	args[9] = itoa(b.p.penalty.memory)
	args[10] = itoa(now)
	args[11] = itoa(b.p.alg.back.dueFrom(b.p, now))
	p := b.p
	if p.alg.rules.timed() {
		p = p.alg.rules.setTime(p, now) // a quota's period at the writer's time
	}
	second, fifth, _ := p.alg.redis.args(p)
	args[12], args[13] = itoa(second), itoa(fifth)
	// The anonymous events first: each stamp's events less its named ones.
	anon := make(map[int64]int64, len(b.named))
	for _, nm := range b.named {
		anon[nm.at] += nm.n
	}
	pairs := 0
	for _, ev := range b.events {
		if n := ev.N - anon[ev.At]; n > 0 {
			args = append(args, itoa(ev.At), itoa(n))
			pairs++
		}
	}
	args[14] = strconv.Itoa(pairs)
	for _, nm := range b.named {
		args = append(args, itoa(nm.at), itoa(nm.n), nm.member)
	}
	return args
}

// kickWriteBack wakes the write-back, without waiting.
func (l *Limiter) kickWriteBack() {
	select {
	case l.wbKick <- struct{}{}:
	default:
	}
}

// writeBackLoop writes debts back when woken (a breaker closed) and every
// writeBackEvery, until Close; what is still owed then is dropped and
// counted (a Limiter that closes has nobody left to retry it).
func (l *Limiter) writeBackLoop() {
	t := time.NewTicker(writeBackEvery)
	defer t.Stop()
	ctx := doneContext{Context: context.Background(), done: l.done}
	var logged [2]uint64 // written and dropped when last logged
	for {
		select {
		case <-l.done:
			l.logWriteBack(&logged)
			return
		case <-l.wbKick:
		case <-t.C:
		}
		if l.local.owing.debts.Load() > 0 {
			for l.writeBack(ctx) {
			}
			if l.writeBackStarved.Load() {
				l.kickWriteBack() // again at once, waiting for a slot this time
			}
		}
		if l.leases.owed.pending() {
			for _, u := range l.leases.owed.take() {
				l.dropLease(ctx, &u)
			}
		}
		if l.settles.backs.pending() || l.settles.charges.pending() {
			l.resendSettles(ctx)
		}
		if l.prefetch.backs.pending() {
			l.giveGrantsBack(ctx)
		}
		l.logWriteBack(&logged)
	}
}

// logWriteBack logs what was written back and dropped since it last did.
func (l *Limiter) logWriteBack(logged *[2]uint64) {
	w, d := l.local.owing.written.Load(), l.local.owing.dropped.Load()
	if w == logged[0] && d == logged[1] {
		return
	}
	level := slog.LevelInfo
	if d != logged[1] {
		level = slog.LevelWarn
	}
	if l.log.log(logWriteBack, level, "ratelimit: wrote back to redis what was decided without it",
		"written", w-logged[0], "dropped", d-logged[1], "pending", l.local.owing.events.Load()) {
		*logged = [2]uint64{w, d}
	}
}

// logDroppedAtClose drops what is still owed (Close) and, when that was
// anything, says so at level info: dropping it is what docs/fallback.md promises
// ("Events still waiting when the Limiter is closed are dropped"), not a
// failure. Stats.WriteBackDropped counts these events too.
func (l *Limiter) logDroppedAtClose() {
	before := l.local.owing.dropped.Load()
	l.local.dropAll()
	if n := l.local.owing.dropped.Load() - before; n > 0 {
		l.log.logger.Info("ratelimit: closed with events decided without redis not yet written back; they are dropped",
			"dropped", n)
	}
}

// writeBack makes one pass over the debts and reports whether another pass
// has more to write at once (a debt owed more than one batch carries, and
// every batch went through).
func (l *Limiter) writeBack(ctx context.Context) (more bool) {
	conn := l.conn.Load()
	if conn == nil {
		return false
	}
	if l.local.owing.events.Load() > 0 {
		defer func() {
			if !more && l.local.owing.events.Load() == 0 && l.set.HeartbeatInterval > 0 {
				// Everything is on Redis: say so at once, so that the other
				// instances stop reserving for this one (see reserve).
				l.beat(conn, fleetKey(l.set.KeyPrefix), true)
			}
		}()
	}
	now := l.localNow()
	newID := func() string { return l.member(l.seq.Add(1)) + "w" }
	for i := range l.local.shards {
		bs := l.local.cut(i, now, newID)
		for j, b := range bs {
			o := l.sendBatch(ctx, conn, b, now)
			if o == applied && len(b.named) > 0 && b.p.alg.rules.leased() {
				l.leases.written(b.k, b.named) // before settle: the debt is paid once they are on Redis
			}
			l.local.settle(b, o)
			if o == unsure || o == unsent {
				for _, rest := range bs[j+1:] {
					l.local.settle(rest, unsent)
				}
				return false
			}
			more = more || b.full
		}
	}
	return more
}

// sendBatch writes b back through the pipeline, admitted only with a slot
// to spare, and says how it ended.
func (l *Limiter) sendBatch(ctx context.Context, conn *redisConn, b *batch, now int64) outcome {
	keys := redisKeys(l.set.KeyPrefix, b.k)
	all := append([]string{keys.meter(b.p.alg), keys.penalty, batchKey(l.set.KeyPrefix, b.k, b.id), keys.reset}, keys.meters...)
	args := b.args(now)
	// A batch takes an admission slot only when one is to spare, unless
	// the last one found none: then it waits for one as a call does, so
	// that load never starves the write-back, and with it the other
	// instances, which reserve this one's share until it is done (see
	// reserve).
	s, err := l.send(ctx, conn, all[0], subject{"rule", b.k.rule}, !l.writeBackStarved.Load(), func(ctx context.Context, c rueidis.Client) error {
		return b.p.alg.redis.scripts().writeBack.Exec(ctx, c, all, args).Error()
	})
	l.writeBackStarved.Store(s.path == PathShed)
	switch {
	case errors.Is(err, ErrRedis):
		return refused
	case err != nil: // Close: the call may have gone out
		return unsure
	case s.path == PathRedis:
		return applied
	case s.mayHaveRun():
		return unsure
	}
	return unsent
}

// doneContext is a context that ends when done is closed: the write-back's
// calls end with the Limiter.
type doneContext struct {
	context.Context
	done <-chan struct{}
}

func (c doneContext) Done() <-chan struct{} { return c.done }

func (c doneContext) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

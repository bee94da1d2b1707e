package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
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
	// folded: the batch carries the debt's carry folded at the cut (see
	// debt.fold), and mark is the carry's mark then (meter.Carry.Mark):
	// what Redis holds once the batch is applied.
	folded bool
	mark   [2]int64
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
		folded := false
		switch {
		case !d.carry.On():
			d.events.Drop(d.p.alg.back.dueFrom(d.p, now) - 1)
		case !d.inflight && d.unsure == nil:
			mark[0], mark[1] = d.fold(now)
			folded = true
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
				violations: d.violations, bans: d.bans, lastViolation: d.lastViolation, folded: folded, mark: mark}
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
	sh.owing.events.Add(-d.paid(b))
	var sent int64
	for _, ev := range b.events {
		sent += ev.N
	}
	if o == applied {
		s.owing.written.Add(uint64(sent))
	} else {
		s.owing.dropped.Add(uint64(sent))
	}
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

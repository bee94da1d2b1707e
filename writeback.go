package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/ledger"
	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/redis/rueidis"
)

// The write-back: what a process decided without Redis (during an outage,
// or for calls admission control shed) is written to Redis once Redis can
// be used again, so that Redis' log counts every event allowed in every
// process.
//
// Each (rule, key) pair the process decided without Redis has a debt in
// the local store (debt.go; internal/ledger keeps them): the events it
// allowed (as stamps, see writeBackKind.stamp), the violations and bans the
// ladder counted, a ban made by hand and a Reset Redis did not see. A goroutine of the Limiter's (writeBackLoop) cuts
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
// Meter kinds: the events of every kind are kept as (stamp, n) pairs. What the write-back asks a kind is its writeBackKind (how
// its events are stamped, which stamps still count, how long they are
// kept), its Redis meter's key (redisKind.letter) and its <kind>.writeback
// piece, which lua/writeback.lua is composed with to add stamped events to
// the kind's Redis state (it gets the rule's numbers as allow.lua does,
// from redisKind.args). The exact log adds each event at its time, and the
// counters, quotas and fixed windows count events in the window or period
// they were stamped in, while it lasts. A GCRA bucket's events carry on in
// its TAT: its debt keeps what they hold of the process' bucket (a
// meter.Carry), and each batch folds them into that many tokens taken at
// the cut, which Redis' bucket adds to its TAT.

// DefaultWriteBackMax is the number of events waiting to be written back
// when Options.WriteBackMax is 0.
const DefaultWriteBackMax = 100_000

// writeBackEvery is how often the write-back looks for debts besides being
// woken when a breaker closes: shed calls leave debts while every breaker
// stays closed.
const writeBackEvery = time.Second

// kept is how long what p's state holds at now can still count, in µs
// (see writeBackKind.kept). Redis remembers a write-back batch that long (so
// that a replay cannot change what its events count in), and a Reset's
// time (so that every process' own count of the pair before it is void).
func (p *plan) kept(now int64) int64 { return p.alg.back.kept(*p, now) }

// batchKept is how long Redis remembers b, cut at now (see
// lua/writeback.lua), in µs: what its plan keeps, and longer while the
// violations it carries are remembered.
func batchKept(b *batch, now int64) int64 {
	kept := b.Plan.kept(now)
	if b.Violations > 0 {
		kept = max(kept, b.Plan.penalty.Memory)
	}
	return kept
}

// cut cuts a batch from each debt of shard i that owes something at now
// (see ledger.Ledger.Cut); newID names a batch.
func (s *localStore) cut(i int, now int64, newID func() string) []*batch {
	sh := s.shards.At(i)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.debts.Cut(now, dueFrom, newID)
}

// settle records how b's call ended (see ledger.Ledger.Settle).
func (s *localStore) settle(b *batch, o ledger.Outcome) {
	sh, h := s.at(&b.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.debts.Settle(b, h, o)
}

// batchArgs returns the arguments of lua/writeback.lua for b, cut at now.
func batchArgs(b *batch, now int64) []string {
	args := make([]string, 15, 15+2*len(b.Events)+3*len(b.Named))
	args[0] = b.ID
	args[1] = itoa(b.Plan.window)
	args[2] = itoa(ttl(batchKept(b, now)))
	args[3] = flag(b.Reset)
	args[4] = itoa(b.ResetAt)
	args[5] = itoa(b.BanEnd)
	args[6] = itoa(b.Violations)
	args[7] = itoa(b.Bans)
	args[8] = itoa(b.LastViolation)
	args[9] = itoa(b.Plan.penalty.Memory)
	args[10] = itoa(now)
	args[11] = itoa(dueFrom(&b.Plan, now))
	p := b.Plan
	if p.alg.rules.timed() {
		p = p.alg.rules.setTime(p, now) // a quota's period at the writer's time
	}
	second, fifth, _ := p.alg.redis.args(p)
	args[12], args[13] = itoa(second), itoa(fifth)
	// The anonymous events first: each stamp's events less its named ones.
	anon := make(map[int64]int64, len(b.Named))
	for _, nm := range b.Named {
		anon[nm.At] += nm.N
	}
	pairs := 0
	for _, ev := range b.Events {
		if n := ev.N - anon[ev.At]; n > 0 {
			args = append(args, itoa(ev.At), itoa(n))
			pairs++
		}
	}
	args[14] = strconv.Itoa(pairs)
	for _, nm := range b.Named {
		args = append(args, itoa(nm.At), itoa(nm.N), nm.Member)
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
		if l.local.owing.Debts() > 0 {
			for l.writeBack(ctx) {
			}
			if l.writeBackStarved.Load() {
				l.kickWriteBack() // again at once, waiting for a slot this time
			}
		}
		if l.leases.owed.Pending() {
			for _, u := range l.leases.owed.Take() {
				l.dropLease(ctx, &u)
			}
		}
		if l.settles.backs.Pending() || l.settles.charges.Pending() {
			l.resendSettles(ctx)
		}
		if l.prefetch.backs.Pending() {
			l.giveGrantsBack(ctx)
		}
		l.logWriteBack(&logged)
	}
}

// logWriteBack logs what was written back and dropped since it last did.
func (l *Limiter) logWriteBack(logged *[2]uint64) {
	w, d := l.local.owing.Written(), l.local.owing.Dropped()
	if w == logged[0] && d == logged[1] {
		return
	}
	level := slog.LevelInfo
	if d != logged[1] {
		level = slog.LevelWarn
	}
	if l.log.Log(logWriteBack, level, "ratelimit: wrote back to redis what was decided without it",
		"written", w-logged[0], "dropped", d-logged[1], "pending", l.local.owing.Events()) {
		*logged = [2]uint64{w, d}
	}
}

// logDroppedAtClose drops what is still owed (Close) and, when that was
// anything, says so at level info: dropping it is what docs/fallback.md promises
// ("Events still waiting when the Limiter is closed are dropped"), not a
// failure. Stats.WriteBackDropped counts these events too.
func (l *Limiter) logDroppedAtClose() {
	before := l.local.owing.Dropped()
	l.local.dropAll()
	if n := l.local.owing.Dropped() - before; n > 0 {
		l.set.Logger.Info("ratelimit: closed with events decided without redis not yet written back; they are dropped",
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
	if l.local.owing.Events() > 0 {
		defer func() {
			if !more && l.local.owing.Events() == 0 && l.set.HeartbeatInterval > 0 {
				// Everything is on Redis: say so at once, so that the other
				// instances stop reserving for this one (see reserve).
				l.beat(conn, pair.FleetKey(l.set.KeyPrefix), true)
			}
		}()
	}
	now := l.localNow()
	newID := func() string { return l.member(l.seq.Add(1)) + "w" }
	for i := range l.local.shards.Len() {
		bs := l.local.cut(i, now, newID)
		for j, b := range bs {
			o := l.sendBatch(ctx, conn, b, now)
			if o == ledger.Applied && len(b.Named) > 0 && b.Plan.alg.rules.leased() {
				l.leases.written(b.Key, b.Named) // before settle: the debt is paid once they are on Redis
			}
			l.local.settle(b, o)
			if o == ledger.Unsure || o == ledger.Unsent {
				for _, rest := range bs[j+1:] {
					l.local.settle(rest, ledger.Unsent)
				}
				return false
			}
			more = more || b.Full
		}
	}
	return more
}

// sendBatch writes b back through the pipeline, admitted only with a slot
// to spare, and says how it ended.
func (l *Limiter) sendBatch(ctx context.Context, conn *redisConn, b *batch, now int64) ledger.Outcome {
	// A batch takes an admission slot only when one is to spare, unless
	// the last one found none: then it waits for one as a call does, so
	// that load never starves the write-back, and with it the other
	// instances, which reserve this one's share until it is done (see
	// reserve).
	s, err := l.writeBatch(ctx, conn, b, now, !l.writeBackStarved.Load())
	l.writeBackStarved.Store(s.path == PathShed)
	switch {
	case errors.Is(err, ErrRedis):
		return ledger.Refused
	case err != nil: // Close: the call may have gone out
		return ledger.Unsure
	case s.path == PathRedis:
		return ledger.Applied
	case s.mayHaveRun():
		return ledger.Unsure
	}
	return ledger.Unsent
}

// writeBatch runs lua/writeback.lua for b at now through the pipeline,
// admitted only with a slot to spare with spare (see send).
func (l *Limiter) writeBatch(ctx context.Context, conn *redisConn, b *batch, now int64, spare bool) (sent, error) {
	keys := redisKeys(l.set.KeyPrefix, b.Key)
	all := append([]string{keys.Meter(b.Plan.alg.redis.letter()), keys.Penalty, batchKey(l.set.KeyPrefix, b.Key, b.ID), keys.Reset}, keys.Meters...)
	args := batchArgs(b, now)
	s, err := l.send(ctx, conn, all[0], subject{"rule", b.Key.Rule}, spare, func(ctx context.Context, c rueidis.Client) error {
		return b.Plan.alg.redis.scripts().writeBack.Exec(ctx, c, all, args).Error()
	})
	s.release() // what was not written back stays owed
	return s, err
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

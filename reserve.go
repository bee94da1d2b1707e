package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/ledger"
	"github.com/redis/rueidis"
)

// ErrSettled means a Reservation was settled (or cancelled) before: a
// Reservation settles once. A Settle retried after one that returned nil
// gets it too; the first one stands.
var ErrSettled = errors.New("ratelimit: reservation already settled")

// ErrNoReservation is what Settle and Cancel return on a nil *Reservation,
// the one a rejected Reserve returns.
var ErrNoReservation = errors.New("ratelimit: no reservation")

// MaxSettleFactor bounds what a Reservation may settle at: actual may be
// up to MaxSettleFactor times the rule's Rate (a GCRA rule's Burst), so
// that an exact log, which keeps one entry per event, stays bounded, and a
// bucket's numbers stay exact in Lua. More is ErrInvalidN. A GCRA rule
// whose bucket takes more than 2^46µs (about two years) to refill may
// settle at no more than the tokens it refills in 2^50µs (about 35 years),
// so that a settle's debt keeps its TAT a time Lua holds exactly (see
// Reservation.Settle).
const MaxSettleFactor = 16

// Reservation holds n events of a (rule, key) pair taken by Reserve until
// their real cost is known: Settle makes the cost actual, giving back what
// was not used or charging the extra; Cancel gives everything back. A
// Reservation never settled stands as reserved: its events count as an
// AllowN's would, and nothing gives them back. Its methods are safe for
// concurrent use.
type Reservation struct {
	l    *Limiter
	rule Rule
	key  string

	mu      sync.Mutex
	u       undo   // what Reserve recorded: the pair, its plan, n, the call's id and time
	records bool   // the reserve recorded its events (not a dry run's over the limit, not DegradedAllow's)
	resets  uint64 // the Limiter's Resets before the Reserve (see resetMarks)
	settled bool
}

// Reserve takes n events of key under rule for work whose real cost is
// known only once it is done, such as the tokens of a language model's
// answer. It decides exactly as AllowN(ctx, rule, key, n) would (n is
// bounded as for AllowN), and when it allows, it returns a Reservation
// that holds the n events until it is settled (see Reservation.Settle).
// When it rejects, the Reservation is nil and nothing is recorded; the
// Result and errors are AllowN's.
//
// Every kind of rate rule takes reservations: the sliding log, exact and
// approximate, the calendar quota, the fixed window and GCRA. A
// Concurrency rule is ErrInvalidRule (take a slot with Acquire). A GCRA
// bucket keeps what each outstanding reservation took beside the time it
// is full again, in Redis and in this process, until the reservation is
// settled or the bucket is full again (see docs/semantics.md,
// "Reservations"): a bucket cannot give tokens back by moving that time
// back once other calls came.
//
// A reservation made by a rule in dry run over its limit, or under
// DegradedAllow while Redis could not be used, recorded nothing: its
// Settle gives nothing back and charges nothing extra.
func (l *Limiter) Reserve(ctx context.Context, rule Rule, key string, n int) (*Reservation, Result, error) {
	u := undo{reserve: true}
	resets := l.settles.resets.seq.Load()
	res, err := l.ask(ctx, &rule, key, int64(n), false, &u)
	if err != nil || !res.Allowed {
		return nil, res, err
	}
	l.settles.reserved.Add(1)
	return &Reservation{l: l, rule: rule, key: key, u: u, records: (u.local || u.onRedis) && !res.DryRun, resets: resets}, res, nil
}

// Settle makes the reservation's cost actual events (actual >= 0, and at
// most MaxSettleFactor times the rule's Rate or Burst; ErrInvalidN
// otherwise), as if the Reserve had asked for actual when actual is less,
// and as if the extra were asked for now when it is more:
//
//   - Less than reserved: the difference is given back at once, in this
//     process and on Redis, and is free for the next call on any instance
//     (within Options.ShieldMax where the shield held a rejection of the
//     key). A give-back never frees more than the Reserve took: events
//     Redis lost (a restart without persistence) are not given back.
//   - More than reserved: the extra is recorded now, even past the limit.
//     The key is then in debt, and later calls are rejected until the
//     rule has room again: up to one Window for a sliding log, the rest
//     of the period for a calendar quota, of the window for a fixed one,
//     and for GCRA until the bucket refills (each token past an empty
//     bucket delays the next call by Window/Rate).
//
// For GCRA "as if the Reserve had asked for actual" is exact whatever
// calls came between: the bucket then stands as those calls would have
// left it with actual tokens taken at the Reserve's time, however much it
// drained meanwhile. A reservation settled once the bucket was full again
// gives nothing back (it could change nothing), and one never settled
// stands as the AllowN it was.
//
// Settling over the limit is no violation under the rule's Penalty: the
// work had been allowed.
//
// A Reservation settles once: a second Settle, or a Cancel after Settle,
// returns an error wrapping ErrSettled. While Redis cannot be used, Settle
// changes this process' count at once and owes Redis the rest, which the
// write-back brings it (as every decision made without Redis), and returns
// nil. It returns ErrNoReservation on a nil Reservation, ErrClosed after
// Close, and ErrNilContext for a nil ctx.
func (r *Reservation) Settle(ctx context.Context, actual int) error {
	if r == nil {
		return ErrNoReservation
	}
	l := r.l
	if err := l.usable(ctx); err != nil {
		return err
	}
	u := &r.u
	if bound := u.p.settleBound(); actual < 0 || int64(actual) > bound {
		if bound < MaxSettleFactor*u.p.rate {
			return fmt.Errorf("%w: settling at %d, outside 0..%d (the tokens the bucket of rule %q refills in 2^50µs)", ErrInvalidN, actual, bound, u.k.Rule)
		}
		return fmt.Errorf("%w: settling at %d, outside 0..%d (%d times the %s of rule %q)", ErrInvalidN, actual, bound, MaxSettleFactor, u.p.alg.rules.capacity(), u.k.Rule)
	}
	rep := l.reporter()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return fmt.Errorf("%w: rule %q, key %q", ErrSettled, r.rule.Name, r.key)
	}
	r.settled = true
	l.settles.settled.Add(1)
	path := PathNone
	if r.records {
		path = l.settle(ctx, u, int64(actual), r.resets)
	}
	if rep.on() {
		rep.report(Decision{Rule: r.rule, Key: r.key, N: actual, Settle: true, Reserved: int(u.n), Path: path})
	}
	return nil
}

// Cancel gives the whole reservation back: the work did not happen. It is
// Settle(ctx, 0).
func (r *Reservation) Cancel(ctx context.Context) error {
	return r.Settle(ctx, 0)
}

// MaxSettle returns the most the reservation may settle at:
// MaxSettleFactor times its rule's Rate (a GCRA rule's Burst, and no more
// than the tokens its bucket refills in 2^50µs); 0 on a nil Reservation.
func (r *Reservation) MaxSettle() int {
	if r == nil {
		return 0
	}
	return int(r.u.p.settleBound())
}

// Reserved returns the events the reservation holds, the n of its Reserve
// (0 on a nil Reservation).
func (r *Reservation) Reserved() int {
	if r == nil {
		return 0
	}
	return int(r.u.n)
}

// settle makes the cost of the reservation u actual (see Settle), and
// returns the path Redis' part took: PathRedis when Redis has it now,
// PathLocal when it is owed, PathNone when there was nothing to send.
// resets is the Limiter's count of Resets before the Reserve.
func (l *Limiter) settle(ctx context.Context, u *undo, actual int64, resets uint64) Path {
	if actual < u.n {
		if l.settles.resets.since(u.k, resets) {
			// A Reset cleared this process' count of the events: what
			// it counts now is other calls'. Redis' part knows it too
			// (its member ids are gone, or its record no longer holds
			// the pair's last Reset).
			if l.remote && u.onRedis {
				g := owedBack{u: *u, n: u.n - actual, from: actual + 1, uncounted: true}
				if l.sendBack(ctx, &g) {
					return PathRedis
				}
			}
			return PathLocal
		}
		return l.giveBack(ctx, u, u.n-actual, actual)
	}
	if u.p.keepsRecords() {
		l.keepAsTaken(ctx, u) // what it took stands: its record is not needed
	}
	if actual > u.n {
		return l.charge(ctx, u, actual-u.n)
	}
	return PathNone
}

// keepAsTaken settles the reservation u, of a kind that keeps its record
// in its meter (see recordKeeper), at what it took: nothing any call
// counts changes, the record joins the bucket's main sequence and is
// forgotten, so that a bucket holds only the reservations that may still
// give something back. On Redis it is owed when Redis cannot be used; a
// reservation decided without Redis has no record there (the write-back
// brings its events as any others).
func (l *Limiter) keepAsTaken(ctx context.Context, u *undo) {
	l.local.unreserveFor(u.k, &u.p, u.now, 0, u.member, u.recordID(), false)
	if u.onRedis && l.remote {
		l.sendBack(ctx, &owedBack{u: *u, n: 0, from: u.n + 1})
	}
}

// giveBack takes back d of the n events the reservation u recorded: those
// after the first kept. This process' count of them goes at once (and
// what it still owed Redis of them); Redis' when it decided them, or when
// the write-back brought them there under the reservation's id.
func (l *Limiter) giveBack(ctx context.Context, u *undo, d, kept int64) Path {
	l.settles.givenBack.Add(uint64(d))
	forgot := l.local.unreserveFor(u.k, &u.p, u.now, d, u.member, u.recordID(), !u.onRedis)
	if !l.remote {
		return PathLocal
	}
	if !u.onRedis && (forgot == d || u.member == "" || !u.p.alg.back.named()) {
		// Nothing of it can be on Redis, or nothing there names it.
		l.local.backDone(u.k, d)
		return PathLocal
	}
	g := owedBack{u: *u, n: d, from: kept + 1}
	if !u.onRedis {
		g.n = d - forgot // the rest was written back under the reservation's id
		g.from = kept + 1
		l.local.backDone(u.k, forgot)
	}
	if l.sendBack(ctx, &g) {
		return PathRedis
	}
	return PathLocal
}

// owedBack is a give-back Redis has not applied yet: n of the events the
// reservation u recorded, from its event numbered from. uncounted says
// this process' count did not take them back (a Reset had cleared them):
// the shard's give-backs begun do not count them, nor do those done.
type owedBack struct {
	u         undo
	n, from   int64
	uncounted bool
}

// sendBack applies g on Redis, and owes it to the write-back's loop when
// Redis cannot be used (a give-back applied twice takes nothing more: the
// log's members are gone, the record of the other kinds is deleted). It
// reports whether Redis applied it.
func (l *Limiter) sendBack(ctx context.Context, g *owedBack) bool {
	u := &g.u
	ks := redisKeys(l.set.KeyPrefix, u.k)
	key := ks.Meter(u.p.alg.redis.letter())
	keys := []string{key}
	if !u.p.alg.back.named() && !u.p.keepsRecords() {
		keys = append(keys, recordKey(l.set.KeyPrefix, u.k, u.member), ks.Reset)
	}
	third, fourth := u.p.alg.redis.undoArgs(u.p, u.win)
	args := []string{u.member, itoa(g.n), itoa(third), itoa(fourth)}
	if u.n > 1 {
		args = append(args, itoa(g.from))
	}
	what := fmt.Sprintf("giving back %d reserved events", g.n)
	if g.n == 0 {
		what = "settling a reservation at its cost"
	}
	err := l.sendWithoutFallback(ctx, l.conn.Load(), key, subject{"rule", u.k.Rule}, what, false,
		func(ctx context.Context, c rueidis.Client) error {
			return u.p.alg.redis.scripts().undo.Exec(ctx, c, keys, args).Error()
		})
	switch {
	case err == nil:
		l.backDone(g)
		return true
	case errors.Is(err, ErrRedis):
		l.log.Log(logOutage, slog.LevelWarn, "ratelimit: redis refused a reservation's give-back; its events stay until they expire", "err", err)
		l.backDone(g)
		return false
	}
	if dropped, ok := l.settles.backs.Add(*g, maxOwedSettles); ok {
		l.backDone(&dropped)
	}
	return false
}

// backDone notes that g is done on Redis, or never will be (see
// localStore.backDone).
func (l *Limiter) backDone(g *owedBack) {
	if !g.uncounted {
		l.local.backDone(g.u.k, g.n)
	}
}

// charge records extra events of the reservation u at the settle's time,
// past the limit: on Redis as a write-back batch of its own (applied once,
// whatever the retries), and in this process' count; owed to Redis when
// it cannot be used.
func (l *Limiter) charge(ctx context.Context, u *undo, extra int64) Path {
	l.settles.charged.Add(uint64(extra))
	l.settles.over.Add(1)
	now := l.localNow()
	p := u.p
	if p.alg.rules.timed() {
		p = p.alg.rules.setTime(p, now) // a quota's period at the settle's time
	}
	if !l.remote {
		l.local.addEvents(u.k, &p, now, extra, "", false)
		return PathLocal
	}
	b := &batch{Key: u.k, ID: l.member(l.seq.Add(1)) + "x", Plan: p, Events: []eventlog.Event{{At: p.alg.back.stamp(p, now), N: extra}}}
	switch l.sendCharge(ctx, b, now) {
	case ledger.Applied:
		l.local.addEvents(u.k, &p, now, extra, "", false)
		return PathRedis
	case ledger.Unsure:
		// It may have run: the same batch is sent again, and Redis
		// applies it once.
		l.local.addEvents(u.k, &p, now, extra, "", false)
		l.settles.charges.Add(b, maxOwedSettles)
		return PathLocal
	}
	l.local.addEvents(u.k, &p, now, extra, "", true)
	return PathLocal
}

// sendCharge sends the batch b of a settle's extra events (see charge) at
// now, and says how it ended.
func (l *Limiter) sendCharge(ctx context.Context, b *batch, now int64) ledger.Outcome {
	s, err := l.writeBatch(ctx, l.conn.Load(), b, now, false)
	switch {
	case errors.Is(err, ErrRedis):
		return ledger.Refused
	case err != nil, s.mayHaveRun():
		return ledger.Unsure
	case s.path == PathRedis:
		return ledger.Applied
	}
	return ledger.Unsent
}

// settles counts the Limiter's reservations (see Stats) and holds what
// their settles owe Redis: give-backs and charges it could not be sent.
type settles struct {
	reserved, settled, givenBack, charged, over atomic.Uint64
	resets                                      resetMarks

	backs   ledger.Queue[owedBack]
	charges ledger.Queue[*batch]
}

// maxOwedSettles bounds the give-backs and the charges owed, each: past
// it the oldest is dropped (its events then expire on Redis as they
// would have; a dropped charge is counted as a dropped write-back).
const maxOwedSettles = 4096

// resendSettles sends what settles owe Redis (the write-back's loop calls
// it); what still cannot be sent is owed again.
func (l *Limiter) resendSettles(ctx context.Context) {
	backs, charges := l.settles.backs.Take(), l.settles.charges.Take()
	for i := range backs {
		l.sendBack(ctx, &backs[i])
	}
	for _, b := range charges {
		if o := l.sendCharge(ctx, b, l.localNow()); o == ledger.Unsure || o == ledger.Unsent {
			l.settles.charges.Add(b, maxOwedSettles)
		}
	}
}

// resetMarks remembers which pairs a Reset cleared, so that a give-back
// never takes from this process' count of a pair what a Reset cleared
// before it (the count then holds other calls' events): seq counts the
// Resets, and last holds the seq of the last Reset of each of the most
// recently reset pairs.
type resetMarks struct {
	seq     atomic.Uint64
	once    sync.Once
	last    *lru.Cache[lkey, uint64]
	evicted atomic.Bool // last forgot a pair: a pair not in it may have been reset
}

// maxResetMarks bounds the pairs resetMarks remembers.
const maxResetMarks = 4096

func (m *resetMarks) cache() *lru.Cache[lkey, uint64] {
	m.once.Do(func() {
		m.last, _ = lru.NewWithEvict[lkey, uint64](maxResetMarks, func(lkey, uint64) { m.evicted.Store(true) })
	})
	return m.last
}

// reset notes a Reset of k.
func (m *resetMarks) reset(k lkey) {
	m.cache().Add(k, m.seq.Add(1))
}

// since reports whether k may have been Reset after the Limiter's seq was
// before.
func (m *resetMarks) since(k lkey, before uint64) bool {
	if m.seq.Load() == before {
		return false
	}
	if at, ok := m.cache().Get(k); ok {
		return at > before
	}
	return m.evicted.Load()
}

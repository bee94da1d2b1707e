package ratelimit

import (
	"time"

	"github.com/ratelimit-go/ratelimit/internal/crowd"
	"github.com/ratelimit-go/ratelimit/internal/ladder"
	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// The mirror and the hold: this process' own count of a pair, kept in the
// local store, counts in every decision Redis makes for it.
//
// Before a call goes to Redis, hold looks at the pair's local meter, which
// holds every event this process allowed, on Redis or without it: when it
// has room for the call's events it records them at once (a reservation,
// so that concurrent calls count each other), and when it has none it says
// how long until it has. Redis' script then decides with three numbers
// from the hold: the local retry (a call this process' own count rejects
// is rejected, and counted as a violation, as Redis' own rejection would
// be), the events this process decided without Redis that the write-back
// has not brought there yet (owed: they count on top of Redis' count), and
// a ban the process knows of. So whatever Redis kept or lost across an
// outage (a refusal keeps its data, a restart without persistence loses
// it), a process never admits more than the rule allows by its own count:
// the moment Redis decides a key again, what the process knows of the key
// counts in that very decision, with no second round trip.
//
// After the reply, record takes the reservation back when Redis rejected
// the call, copies Redis' state into the meters that keep one (a GCRA
// bucket, a quota: the later of the two wins), its penalty state into the
// local tables, and its rejections into the shield (at a crowded pair, also
// the rejection an allowed call that filled it leaves for the next, see
// shieldFull). So an outage starts from what Redis knew, not from an empty
// log.

// held is what hold found of one pair before its call went to Redis.
type held struct {
	retry int64 // µs until the process' own count has room for the call (0: it has)
	owed  int64 // events decided without Redis that still count and are not in Redis yet
	// fleet is the part of owed that is no debt of this process: the
	// fleet's reserve, and after a loss of Redis' data the own count
	// beyond the debts; lost says the call counted such a loss (see
	// mirror).
	fleet   int64
	lost    bool
	banLeft int64 // µs left of a ban this process knows of (0: none)
	since   int64 // the oldest event the process' own count holds (0: unknown)
	count   int64 // the process' own count before the call
	// others is how many events other calls of the pair had reserved,
	// and not landed, when this one was held: count holds at most that
	// many events Redis may not have decided yet (see record). It may
	// count more (see store.InFlight), never fewer.
	others int64
	// strikes are violations the process counted itself (the shield's
	// answers, see shield.go) that the call delivers to Redis, the last
	// of them at struck (see lua/decide.lua). They left the pair's debt,
	// and go back to it unless Redis answered (see release).
	strikes, struck int64
	// backsDone is the shard's give-backs done when the call was held
	// (see localShard.backs).
	backsDone int64
	reserved  bool // the call's events were recorded at now, pending Redis' answer
	spilled   bool // the shard counts them on their way as any pair's (see store.InFlight)
	// id is the call's reservation id when its events are recorded under
	// it (leg.id).
	id     uint64
	seated bool // the call took a seat in its pair's crowd (see crowd.go)
	queued bool // the call queues in its pair's crowd (leg.queue)
}

// holds reports whether the process' own count holds the call back (its
// retry or a ban): only then does the script need the pair's last Reset.
func (hd *held) holds() bool { return hd.retry > 0 || hd.banLeft > 0 }

// hold looks at the own count of lg's pair at now for a call of lg.n
// events (peek: one event, recording nothing) under lg.p, and reserves the
// events when they fit and nothing bans the key (see held). With lg.queue,
// the call takes a seat in the pair's crowd when it has one, or when the
// own count is full (see crowd.go, and seatOf), and is not held at all
// when every seat is taken: hold then returns the seat it waits for, and
// nothing else; with lg.carry, it is handed the violations the process
// owes Redis for the pair, to deliver them (see held.strikes). A call that
// queues, finds the own count full and the shield holding a rejection of
// the pair, cached after the call looked there (a call of the pair landed
// in between), is sent back to look again, once: hold then returns a seat
// already woken.
func (s *localStore) hold(lg *leg, now int64) (held, *crowd.Seat) {
	k, p, n, peek, queue := *lg.k, lg.p, lg.n, lg.peek, lg.queue
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	hd := held{queued: queue, backsDone: sh.backsDone, id: lg.id}
	c, granted, w := sh.seatOf(lg, &k, h)
	if w != nil {
		return held{}, w
	}
	if p.penalize && sh.ladders.Banning() {
		hd.banLeft = sh.ladders.BanLeft(&k, h, now)
	}
	dt, owed := sh.owedOf(&k, h, p, now)
	hd.owed = owed + lg.reserve

	m, count, asked := sh.measure(&k, h, p, now, n, peek, !peek)
	if m == nil {
		hd.seated = sh.sit(c, granted)
		return hd, nil
	}
	hd.count = count
	hd.others = sh.flying.Of(h)
	if lg.lost {
		hd.owed = max(hd.owed, lostOwn(m, dt, p, hd.count, hd.others, lg.lostAt, now)+lg.reserve)
	}
	hd.fleet, hd.lost = hd.owed-owed, lg.lost
	if o, ok := m.(meter.Ager); ok {
		hd.since = o.Oldest(now, p.window)
	}
	if hd.count+asked > p.rate {
		if queue && !granted && !lg.lookedAgain && sh.denials.Holds(&k, h) {
			// A call of the pair landed after this one looked at the
			// shield, and cached a rejection there: look again.
			lg.lookedAgain = true
			return held{}, crowd.Woken()
		}
		hd.retry = max(1, m.RetryIn(now, p.window, p.rate, asked))
		if queue || granted {
			if c, granted, w = sh.fullByOwnCount(&k, h, c, granted); w != nil {
				return held{}, w
			}
		}
	} else if !peek && hd.banLeft == 0 {
		addTo(m, p, now, n, lg.id)
		hd.reserved = true
		hd.spilled = sh.flying.Add(h, n)
	}
	hd.seated = sh.sit(c, granted)
	if dt != nil && lg.carry && p.penalize {
		hd.strikes, hd.struck = dt.Hand(now)
	}
	return hd, nil
}

// shieldMax is what record caches lg's rejection for (see
// Options.ShieldMax), in µs: nothing (-1) when the decision counted the
// fleet's reserve, which may end at any heartbeat, while the rejection's
// RetryAfter counts it as if it stood (a whole Window, at worst).
func (lg *leg) shieldMax(s *settings) int64 {
	if lg.reserve > 0 || lg.lost {
		return -1
	}
	return int64(s.ShieldMax / time.Microsecond)
}

// seatOf takes the seat lg was given while it waited (granted: the crowd
// counts it) and returns the crowd of lg's pair, k, when lg queues or was
// given a seat (nil when the pair has none). When every seat is taken and
// lg was given none, it returns instead the seat to wait for. The caller
// holds sh.mu.
func (sh *localShard) seatOf(lg *leg, k *lkey, h uint64) (c *crowd.Crowd, granted bool, w *crowd.Seat) {
	granted = lg.seat != nil
	lg.seat = nil
	if lg.queue || granted {
		if c = sh.crowdOf(k, h); c != nil && !granted && c.Full() {
			return nil, false, c.Wait()
		}
	}
	return c, granted, nil
}

// sit gives a held call a seat in c, when it has a crowd: the one it was
// granted, or a new one. The caller holds sh.mu.
func (sh *localShard) sit(c *crowd.Crowd, granted bool) bool {
	switch {
	case c == nil:
		return false
	case !granted:
		c.Sit()
	}
	return true
}

// A leg is one pair of a decision on its way to Redis: the pair, its plan,
// the events the call asks for (peek: one, recording nothing), and what
// hold found of it. Allow's call has one leg, AllowGroup's one per pair.
type leg struct {
	k     *lkey
	p     *plan
	n     int64
	peek  bool
	queue bool // the leg takes a seat in its pair's crowd (see hold)
	carry bool // the leg delivers the violations its pair owes (see hold)
	// waited says the call waited for its pair's calls to land: what
	// they cached in the shield after the call's time answers it.
	waited bool
	// lookedAgain says hold sent the call back to the shield once, for a
	// rejection a call of its pair cached after the call looked there.
	lookedAgain bool
	seat        *crowd.Seat // a seat the call was given while it waited (see hold)
	// id is the reservation id the call's events are recorded under in a
	// meter that keeps records by id (see recordKeeper), or 0.
	id uint64
	// reserve is what the decision counts for the other instances'
	// decisions Redis lacks (see Limiter.reserve): hold adds it to owed.
	// With lost, Redis lost its data at lostAt, less than a window ago:
	// the process' own count of then is owed, not only its debts (see
	// lostOwn).
	reserve int64
	lost    bool
	lostAt  int64
	hd      held
}

// holdLegs holds each leg at now (see hold). When a leg must wait for a
// seat it returns the leg's index and the seat, and holds no leg.
func (s *localStore) holdLegs(legs []leg, now int64) (int, *crowd.Seat) {
	for i := range legs {
		lg := &legs[i]
		var w *crowd.Seat
		if lg.hd, w = s.hold(lg, now); w != nil {
			s.releaseLegs(legs[:i], now)
			for j := range legs[i+1:] {
				if later := &legs[i+1+j]; later.seat != nil {
					s.giveBack(*later.k, later.p, later.seat)
					later.seat = nil
				}
			}
			return i, w
		}
	}
	return 0, nil
}

// releaseLegs takes back what holdLegs reserved at now (see release).
func (s *localStore) releaseLegs(legs []leg, now int64) {
	for i := range legs {
		lg := &legs[i]
		s.release(*lg.k, lg.p, now, lg.n, &lg.hd)
	}
}

// release takes back the events hold reserved for k at now, and the
// violations it handed the call, when the call was not decided on Redis.
func (s *localStore) release(k lkey, p *plan, now, n int64, hd *held) {
	if !hd.reserved && !hd.seated && hd.strikes == 0 {
		return
	}
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.land(&k, h, hd, nil, p.rate)
	if hd.strikes > 0 {
		sh.oweStrikes(&k, h, p, hd)
	}
	if hd.reserved {
		hd.reserved = false
		sh.flying.Take(h, n, hd.spilled)
		sh.unreserve(&k, h, p, now, n, hd.id)
	}
}

// unreserve takes back a reservation of n events at now (under id, see
// plan.unreserve), and forgets the meter when that leaves it empty, so
// that calls Redis never allowed (or never answered) leave no entries
// behind. The caller holds sh.mu.
func (sh *localShard) unreserve(k *lkey, h uint64, p *plan, now, n int64, id uint64) {
	p.unreserve(sh, k, h, now, n, id, true)
}

// record copies a decision Redis made for n events of k into the local
// state: a rejected call's reservation (made by hold at now) is taken back;
// violations and bans go to the mirror (not for a peek, which recorded
// nothing), and rejections to the shield at at, the decision's receipt
// (see shielded). shieldMax > 0 bounds how long a rejection is cached; < 0
// turns the shield off. The decision's count becomes the larger of Redis'
// (with what it is still owed) and the process' own.
func (s *localStore) record(k lkey, p *plan, now, at, n int64, peek bool, d *decision, hd *held, shieldMax int64) {
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// What the process' own count knows that Redis may lack: the events
	// it held before the call, less those of calls still on their way,
	// which Redis may not have decided yet (it decides them after this
	// one, or has: either way its count is the order it made).
	own := hd.count
	if hd.reserved {
		own = max(0, hd.count-hd.others)
		sh.flying.Take(h, n, hd.spilled)
	}
	switch {
	case hd.reserved && !d.allowed:
		sh.unreserve(&k, h, p, now, n, hd.id)
	case hd.reserved:
		own += n
	case d.allowed && !peek && hd.retry > 0:
		// Redis allowed what the process' own count held back: a Reset
		// since made that count void (see decide.lua). It starts again
		// from this call. Or a give-back's mark (d.given) had Redis
		// decide alone: the own count is no void, and mirror replaces
		// it with Redis' (a bucket keeps the records of the process'
		// own reservations).
		if !d.given {
			sh.forgetOwn(&k, h)
		}
		if m, ok := sh.meter(&k, h, p, now, true); ok {
			addTo(m, p, now, n, hd.id)
		}
		own = n
	}
	hd.reserved = false
	// Redis' count may hold events settles gave back while the call was
	// on its way: the process' count no longer does, and must not take
	// them back from the copy.
	sh.mirror(&k, h, p, now, at, d, peek, sh.backs-hd.backsDone, hd)
	// The crowd lands on Redis' answer (see land): an allowed call that
	// left the pair full lands as a rejection when the shield caches what
	// the next call would get (see shieldFull).
	landed := decision{allowed: d.allowed, count: d.count}
	if !d.given {
		d.count = max(d.count, own) // Redis' count holds what it is owed
	}
	if shieldMax >= 0 && sh.shieldReply(&k, h, p, at, n, peek, d, hd, landed.count, shieldMax) {
		landed.allowed = false
	}
	sh.land(&k, h, hd, &landed, p.rate)
}

// shieldReply gives the shield, at at, what Redis' decision d for n events
// of k (peek: one, recording nothing) says (see record): an allowed call
// drops a cached rejection, which may be stale, and a rejection is cached
// unless the call's hold (hd) or its peek makes it unfit to answer others.
// count is Redis' count after the call. It reports whether an allowed
// call left the pair full and the shield now holds the rejection the next
// call would get (see shieldFull): the crowd lands the call as that
// rejection. The caller holds sh.mu.
func (sh *localShard) shieldReply(k *lkey, h uint64, p *plan, at, n int64, peek bool, d *decision, hd *held, count, shieldMax int64) bool {
	switch {
	case d.allowed && !peek:
		sh.denials.Remove(k, h) // events arrived: a cached rejection may be stale
		return sh.shieldFull(k, h, p, at, n, count, d, shieldMax)
	case hd.retry > 0 && hd.others > 0:
		// The process' own count held the call back with events of
		// calls on their way in it, which Redis may yet reject: no
		// rejection to cache.
	case sh.backs > hd.backsDone:
		// Settles of the shard gave events back that were not done
		// when the call was held: Redis may have counted them in this
		// rejection, and the give-back, which dropped the cached
		// rejections it found, came before it. Cached, it would stand
		// until its window ended, on a key with room.
	case hd.owed > hd.fleet:
		// The call carried events this process decided without Redis,
		// which the write-back is about to bring: Redis counted them
		// without their times, as if they lasted (an exact log's retry:
		// a whole Window), and once written back they leave at their own
		// times. Cached, such a rejection turned away for 5s calls Redis
		// would have allowed after a 4s outage (TestShieldAfterOutage).
	case peek && p.penalize:
		// A peek counted no violation: the shield's answers would
		// count them from a state Redis did not decide for a call.
	case peek:
		sh.shield(k, h, p, at, 1, d, shieldMax)
	default:
		sh.shield(k, h, p, at, n, d, shieldMax)
	}
	return false
}

// shieldFull caches in the shield, at at, the rejection the next call for
// n events of k would get after Redis allowed one that left the pair full
// (count, Redis' count after it, leaves no room for n more), when the pair
// has a crowd (see crowd.go) and the process' own count, which holds
// Redis' answer (see mirror), is full too: until that count has room, as
// the crowd's probe would have been rejected on held and cached (see
// hold). A GCRA bucket or an approximate counter at a hot key frees one
// slot at a time: without this each allowed call was followed by such a
// probe, a Redis call per freed slot that only found the key full again.
// Nothing is cached while other calls of the pair hold reservations that
// Redis may yet reject (the own count's retry may then be too long), and
// d carries the violations the shield's answers start from. It reports
// whether the rejection was cached. The caller holds sh.mu.
func (sh *localShard) shieldFull(k *lkey, h uint64, p *plan, at, n, count int64, d *decision, shieldMax int64) bool {
	if count+n <= p.rate || sh.flying.Of(h) != 0 || sh.crowdOf(k, h) == nil || p.alg.rules.leased() {
		return false
	}
	m, ok := sh.meter(k, h, p, at, false)
	if !ok || m.Count(at, p.window)+n <= p.rate {
		return false
	}
	next := decision{
		count: p.rate, retry: m.RetryIn(at, p.window, p.rate, n), reset: m.Reset(at, p.window, false),
		violations: d.violations, memoryLeft: d.memoryLeft,
	}
	sh.shield(k, h, p, at, n, &next, shieldMax)
	return sh.denials.Holds(k, h)
}

// mirror copies a decision Redis made for a call at now, received at at,
// into the local state: the whole state of a meter that keeps one (a
// bucket, a quota; the later wins), and the penalty state (a peek only
// learns the violations). The meter's state is
// placed from the call's time, when its own reservation was made and no
// later than Redis decided: from the receipt it would run ahead of Redis'
// by the round trip, and this process' own count would hold back calls
// Redis allows. A quota's or a fixed window's count is copied less
// givenBack, the events settles may have given back since Redis counted
// (see localShard.backs), and a bucket's TAT less their cost (see
// meter.Bucket.CopyFrom). A count is copied less hd.fleet, what the call
// had Redis count on top of its meter that is no event (the fleet's
// reserve): copied whole, the process' own count would hold the reserve,
// and hand it to Redis again with the next call, more each time. Nothing is
// copied while a loss of Redis' data counts (hd.lost): the process' own
// count is then what Redis lost of the pair, as far as the process knows
// it, and goes to Redis whole with every call; Redis' count since the loss
// copied into it would count twice. A count a give-back took from
// (d.given: a quota's, a fixed window's or a bucket's, see
// lua/decide.lua) replaces the meter's instead, after any decision, a
// peek's or a rejection's too: the copy, which keeps the larger count (a
// bucket: the later TAT), may hold events another process gave back. The caller holds sh.mu.
func (sh *localShard) mirror(k *lkey, h uint64, p *plan, now, at int64, d *decision, peek bool, givenBack int64, hd *held) {
	if (d.allowed && !peek || d.given) && !hd.lost {
		if m, ok := sh.meter(k, h, p, now, false); ok {
			if c, ok := m.(meter.CountReplacer); ok && d.given {
				c.ReplaceFrom(now, d.count-hd.fleet, d.reset, givenBack) // Redis' count holds the give-backs the copy may not
			} else if c, ok := m.(meter.StateCopier); ok && d.allowed && !peek {
				c.CopyFrom(now, d.count-hd.fleet, d.reset, givenBack) // a bucket, a quota, a fixed window: Redis' state is in the reply
			}
		}
	}
	if !p.penalize {
		return
	}
	// Violations this process counted itself (the shield's answers,
	// decisions without Redis) that Redis has not been given yet count on
	// top of Redis' own.
	v, bans := d.violations, d.bans
	if sh.debts.Len() > 0 { // inlined: OfKind is a call
		if dt := sh.debts.OfKind(k, h, p.alg); dt != nil {
			owedV, owedBans := dt.Strikes(at, p.penalty.Memory)
			v, bans = v+owedV, bans+owedBans
		}
	}
	d.violations = v
	if peek {
		return
	}
	s := ladder.Strikes{Violations: v, Bans: bans}
	if d.banned {
		s.BanEnd = at + d.banLeft
	}
	sh.ladders.Mirror(k, h, at, s, !d.allowed)
}

// owedOf returns k's debt of p's kind, if any, and the events it still owes
// Redis at now: they count on top of Redis' own (see held.owed). The
// caller holds sh.mu.
func (sh *localShard) owedOf(k *lkey, h uint64, p *plan, now int64) (*debt, int64) {
	if sh.debts.Len() == 0 { // inlined: OfKind is a call
		return nil, 0
	}
	if dt := sh.debts.OfKind(k, h, p.alg); dt != nil {
		return dt, dt.OwedAt(now, dueFrom(p, now))
	}
	return nil, 0
}

// lostOwn is what of a pair's own count, count with others of it
// reserved by calls on their way, a decision at now counts on top of
// Redis' when Redis lost its data at lostAt: the events the process
// recorded by then, which Redis lost, and its debts since, which Redis
// does not hold yet; not its events since that Redis decided, which Redis
// holds. A meter that keeps no times (the counters, a bucket, a quota), or
// a loss of unknown time (maxTime), counts the whole own count.
func lostOwn(m meter.Meter, dt *debt, p *plan, count, others, lostAt, now int64) int64 {
	s, ok := m.(meter.Stamped)
	if !ok || lostAt >= now {
		return count - others
	}
	// Nor the calls on their way (others), as without a time: held after
	// the loss, most likely, they are among the events since it.
	own := count - max(others, s.Since(lostAt+1))
	if dt != nil {
		own += dt.Since(max(dueFrom(p, now), lostAt+1))
	}
	return max(own, 0)
}

// fullByOwnCount is the way of a call that queues at a pair its own count
// finds full: one call at a time asks Redis (which may know a Reset), and
// only when no other call of the pair is on its way with a seat, since its
// landing may free the count, or cache a rejection in the shield. It
// returns the pair's crowd (gathered when the pair had none, which counts
// no seat: granted turns false), whether the call's granted seat still
// counts, and the seat to wait for when the call must wait. The caller
// holds sh.mu.
func (sh *localShard) fullByOwnCount(k *lkey, h uint64, c *crowd.Crowd, granted bool) (*crowd.Crowd, bool, *crowd.Seat) {
	if c == nil {
		c = sh.gather(k, h)
		granted = false // its crowd is gone: a new one counts no seat
	}
	if mine := b2i(granted); c.Flying()-int64(mine) > 0 {
		if granted {
			c.Stand()
		}
		return c, granted, c.Wait()
	}
	return c, granted, nil
}

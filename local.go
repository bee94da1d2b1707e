package ratelimit

import (
	"hash/maphash"
	"sync"

	"github.com/ratelimit-go/ratelimit/internal/crowd"
	"github.com/ratelimit-go/ratelimit/internal/ladder"
	"github.com/ratelimit-go/ratelimit/internal/ledger"
	"github.com/ratelimit-go/ratelimit/internal/meter"
	"github.com/ratelimit-go/ratelimit/internal/shield"
	"github.com/ratelimit-go/ratelimit/internal/store"
)

// DefaultLocalCapacity is the number of keys the local limiter keeps when
// Options.LocalCapacity is 0.
const DefaultLocalCapacity = 100_000

// localStore is the per-process limiter: the fallback while Redis cannot be
// used, the whole limiter when there is no Redis, and the mirror of Redis'
// recent decisions otherwise. Its state is spread over shards chosen by key
// hash, each a set of LRU tables (golang-lru's simplelru, see store.Table) under
// its own lock, so that unrelated keys do not wait for each other.
//
// Each shard keeps a table per kind of state (see localShard): the meters
// (sliding logs, approximate counters, GCRA buckets, calendar quotas), the
// violations of keys that are not banned, the active bans, the shield's
// rejections and the debts of the write-back. A flood of new keys evicts
// only meters, and a flood of violators only violation records, so an
// active ban is evicted only by newer bans. Fewer tables would not make a
// call faster (a call looks its meter up once whatever the layout: the
// other tables are looked at only when they hold something, or under a
// penalty), and each kind of meter keeps its own capacity (Stats counts
// them apart); tables of different eviction classes cannot be merged
// without losing the guarantees above.
type localStore struct {
	shards store.Shards[localShard]
	owing  ledger.Owing // the debts' events, over every shard (see debt.go)
}

// localShard is one shard of the store: its tables, under its lock.
type localShard struct {
	mu      sync.Mutex                // guards every field below, the tables and what they hold
	meters  meterTables               // each kind's meters, by meter slot (see meterSlot)
	ladders ladder.Book[lkey]         // the penalty ladders: violations, and bans apart
	denials denials                   // the hot-key shield: Redis' rejections
	debts   ledger.Ledger[lkey, plan] // what was decided without Redis, owed to it (see debt.go)
	crowds  table[crowd.Crowd]        // the calls of full pairs on their way to Redis (see crowd.go)
	flying  store.InFlight            // events hold reserved for calls not landed yet, by pair (see held.others)
	// backs and backsDone count the events settles of reservations gave
	// back in the shard: begun (this process' count took them back) and
	// done (Redis' too, or never to be). A decision Redis made before a
	// give-back reached it still counts those events (see record).
	backs, backsDone int64
	// last is the latest process-clock time a call of a local-only
	// Limiter was decided at in the shard (see admitAt).
	last int64
}

// newLocalStore returns a store that keeps at most capacity meters of each
// kind, capacity violation records and capacity bans (and caches at most
// capacity rejections for the hot-key shield).
func newLocalStore(capacity int) *localStore {
	n := store.ShardsFor(capacity)
	per := (capacity + n - 1) / n
	s := &localStore{shards: store.NewShards[localShard](n)}
	s.owing.SetMax(DefaultWriteBackMax)
	for i := range n {
		sh := s.shards.At(i)
		for slot := range meterLetters {
			sh.meters[slot] = slotOwners[slot].newMeters(per)
		}
		sh.ladders = ladder.New[lkey](per)
		sh.denials = shield.New[lkey, *algorithm](per)
		sh.debts = ledger.New[lkey, plan](per, &s.owing)
		sh.crowds = newTableEvict(per, (*crowd.Crowd).WakeAll)
	}
	return s
}

// eachShard runs f on every shard in turn, under the shard's lock: the
// work that spans the store (Stats, Close, a loss of Redis' data), never
// a call's.
func (s *localStore) eachShard(f func(sh *localShard)) {
	for i := range s.shards.Len() {
		sh := s.shards.At(i)
		sh.mu.Lock()
		f(sh)
		sh.mu.Unlock()
	}
}

// pairSeed seeds the hashes of every store's pairs, so that a plan can
// keep its rule's (see plan.ruleHash).
var pairSeed = maphash.MakeSeed()

// ruleHash is the hash of a rule's name in a pair's hash.
func ruleHash(rule string) uint64 { return maphash.String(pairSeed, rule) }

// at returns the hash of k, computed once per call, and the shard that
// holds k's state.
func (s *localStore) at(k *lkey) (*localShard, uint64) {
	return s.atRule(k, ruleHash(k.Rule))
}

// atPlan is at for a call whose plan p was compiled from k's rule: it
// takes the rule's hash from the plan.
func (s *localStore) atPlan(k *lkey, p *plan) (*localShard, uint64) {
	if p.ruleHash == 0 { // a plan not compiled from a Rule
		return s.at(k)
	}
	return s.atRule(k, p.ruleHash)
}

// atRule is at, given the hash of k's rule, rh.
func (s *localStore) atRule(k *lkey, rh uint64) (*localShard, uint64) {
	h := maphash.String(pairSeed, k.Key)
	h ^= rh * 0x9e3779b97f4a7c15
	if k.Group != "" {
		h ^= maphash.String(pairSeed, k.Group) * 0xc2b2ae3d27d4eb4f
	}
	if k.Hashed {
		h = ^h
	}
	return s.shards.Of(h), h
}

// admit makes one decision without Redis at now for n events (peek: for one, recording
// nothing) under rate, the rule's rate or its degraded share. A request that
// can never fit under rate (n > rate) is rejected without a violation: it is
// the degraded share's doing, not the caller's. owed, when not nil, says
// the decision is made in place of Redis: the events it allows, and the
// violations and bans it counts, are also owed to Redis under owed, the
// rule's own plan (p may be its degraded share; see writeback.go), under
// member when the call may have run on Redis under it ("" otherwise). id,
// when not 0, is the call's reservation id: a meter that keeps records by
// id (see recordKeeper) records the events under it.
func (s *localStore) admit(k *lkey, p *plan, rate, now, n int64, peek bool, owed *plan, member string, id uint64) decision {
	var d decision
	s.admitAt(&d, k, p, rate, now, false, n, peek, owed, member, id)
	return d
}

// admitAt is admit; with mono, now is a reading of the process clock, taken
// before the shard's lock, and the call is decided at the latest such
// reading the shard has decided at, when that is later: a time between the
// call's reading and its taking the lock, as if it had read the clock
// there. Calls that meet at a key then add their events in time order,
// where a reading that lost the race to the lock would otherwise insert
// its event behind newer ones (see eventlog.Log.Record), and the decision
// is the one a call arriving in that order gets. The decision goes into d,
// which the caller passes zeroed.
func (s *localStore) admitAt(d *decision, k *lkey, p *plan, rate, now int64, mono bool, n int64, peek bool, owed *plan, member string, id uint64) {
	sh, h := s.atPlan(k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if mono {
		now = max(now, sh.last)
		sh.last = now
	}
	sh.admit(d, k, h, p, rate, now, n, peek, owed, member, id)
}

// shieldOrAdmit answers a call without Redis with its shard's lock taken
// once: from the shield, as localStore.shielded does, when it holds an
// answer (it reports true), otherwise as admit decides it, under share at
// rate, owed under p, under the reservation id id when not 0. The
// decision goes into d, which the caller passes zeroed.
func (s *localStore) shieldOrAdmit(d *decision, k *lkey, p, share *plan, rate, now, n int64, peek, late bool, member string, id uint64) bool {
	sh, h := s.atPlan(k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sd, ok := sh.shielded(k, h, p, now, n, peek, late); ok {
		*d = sd
		return true
	}
	sh.admit(d, k, h, share, rate, now, n, peek, p, member, id)
	return false
}

// admit is localStore.admit for k, whose hash is h, into d. The caller
// holds sh.mu.
func (sh *localShard) admit(d *decision, k *lkey, h uint64, p *plan, rate, now, n int64, peek bool, owed *plan, member string, id uint64) {
	if p.penalize {
		v, left := sh.ladders.Standing(k, h, &p.penalty, now)
		d.violations = v
		if left > 0 {
			d.banned, d.banLeft = true, left
			// A banned call records nothing: its meter is read as a
			// peek reads it, for RetryAfter and ResetAfter.
			if m, count, asked := sh.measure(k, h, p, now, n, peek, false); m != nil {
				d.count = count
				d.reset = m.Reset(now, p.window, false)
				if count+asked > rate {
					d.retry = m.RetryIn(now, p.window, rate, asked)
				}
			}
			d.retry = max(d.retry, d.banLeft)
			return
		}
	}

	m, count, asked := sh.measure(k, h, p, now, n, peek, !peek)
	if m == nil { // a peek at a key never seen: rate >= 1 fits one event
		d.allowed = true
		return
	}
	d.count = count
	if d.count+asked <= rate {
		d.allowed = true
		if peek {
			d.reset = m.Reset(now, p.window, false)
			return
		}
		addTo(m, p, now, n, id)
		d.count += n
		d.reset = m.Reset(now, p.window, true)
		if owed != nil {
			sh.oweEvents(k, h, owed, m, now, n, member)
		}
		return
	}
	d.reset = m.Reset(now, p.window, false)
	d.retry = m.RetryIn(now, p.window, rate, asked)
	if p.penalize && n <= rate {
		sh.violate(k, h, p, now, peek, owed, d)
	}
}

// measure is the fit test's reading of k's meter under p at now, the one
// both a local decision (admit) and a hold make: it returns the meter (nil
// when k has none and record is false), the events it counts, and the
// events the call asks for, n or a peek's one. With record (a call that
// may add events) it creates the meter and prunes it first, as an allowing
// or rejecting script does; a peek or a banned call only reads. The call
// fits when count + asked is at most the rate. The caller holds sh.mu.
func (sh *localShard) measure(k *lkey, h uint64, p *plan, now, n int64, peek, record bool) (m meter.Meter, count, asked int64) {
	asked = n
	if peek {
		asked = 1
	}
	m, ok := p.alg.local.meter(&sh.meters, p.meterFit, h, now, record, *k) // sh.meter, which does not inline
	if !ok {
		return nil, 0, asked
	}
	if record {
		m.Prune(now, p.window)
	}
	return m, m.Count(now, p.window), asked
}

// meter returns the record of k's events under p, creating it if asked
// to. The caller holds sh.mu.
func (sh *localShard) meter(k *lkey, h uint64, p *plan, now int64, create bool) (meter.Meter, bool) {
	return p.alg.local.meter(&sh.meters, p.meterFit, h, now, create, *k)
}

// ban bans k by hand until now + d, keeping its violations.
func (s *localStore) ban(k lkey, now, d int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.ladders.Ban(&k, h, now, now+d)
	sh.denials.Remove(&k, h)
}

// unrecord takes back n events recorded for k at now (AllowAll's undo),
// under the reservation id id when not 0 (see recordKeeper), and owed to
// Redis if they were.
func (s *localStore) unrecord(k lkey, p *plan, now, n int64, id uint64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.forgetOwed(&k, h, p, now, n)
	p.unreserve(sh, &k, h, now, n, id, false)
}

// forgetOwn forgets k's own count, of every kind of meter. The caller
// holds sh.mu.
func (sh *localShard) forgetOwn(k *lkey, h uint64) {
	for _, t := range sh.meters[:len(meterLetters)] {
		t.Forget(*k, h)
	}
}

// reset forgets everything about k at now, what it owed Redis included
// (see resetDebt).
func (s *localStore) reset(k lkey, p *plan, now int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.forgetOwn(&k, h)
	sh.ladders.Forget(&k, h)
	sh.denials.Remove(&k, h)
	sh.dropCrowd(&k, h)
	sh.resetDebt(&k, h, p, now)
}

// oweReset remembers a Reset of k made at now that Redis did not get.
func (s *localStore) oweReset(k lkey, p *plan, now int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.oweReset(&k, h, p, now)
}

// release1 takes back the one event of a lease recorded for k at at (see
// lease.go), forgets it among what k owes Redis, under its id member, and
// drops the shield's rejection of k.
func (s *localStore) release1(k lkey, p *plan, at int64, member string) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.forgetOwed(&k, h, p, at, 1)
	sh.debts.LessNamed(&k, h, member, -1)
	// The meter stays for the pair's next lease, as an exact log stays
	// after its events leave the window: the LRU evicts it.
	p.unreserve(sh, &k, h, at, 1, 0, false)
	sh.denials.Remove(&k, h) // a ban's cached rejection holds a count the release lowered
}

// renew moves the event of a lease recorded for k at from to to (Renew),
// and, with owe, owes it to Redis at to under its id member, in place of
// what k owed of it.
func (s *localStore) renew(k lkey, p *plan, from, to int64, member string, owe bool) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p.unreserve(sh, &k, h, from, 1, 0, false)
	sh.forgetOwed(&k, h, p, from, 1)
	sh.debts.LessNamed(&k, h, member, -1)
	sh.addEvents(&k, h, p, to, 1, member, owe)
}

// addLease records the event of a lease for k at now under its id member
// (see recordOver), owed to Redis with owe.
func (s *localStore) addLease(k lkey, p *plan, now int64, member string, owe bool) {
	s.addEvents(k, p, now, 1, member, owe)
}

// addEvents records n events for k at now, past any limit (a lease's, or
// a settle's extra), under member when not "", owed to Redis with owe.
func (s *localStore) addEvents(k lkey, p *plan, now, n int64, member string, owe bool) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.addEvents(&k, h, p, now, n, member, owe)
}

// copyBucket merges into k's bucket (GCRA), if this process keeps one,
// what Redis answered of its own at now: full again reset µs from now, as
// localShard.mirror does with a decision's reply (meter.Bucket.CopyFrom, keeping
// the later), less what settles in k's shard gave back since backsDone
// was read (before the request: Redis' reply may still count them, as a
// held call's may). Other meters keep their own count: a grant's reply
// counts what the fleet's reserve added, which is not an event.
func (s *localStore) copyBucket(k lkey, p *plan, now, reset, backsDone int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if m, ok := p.alg.local.meter(&sh.meters, p.meterFit, h, now, false, k); ok {
		if b, ok := m.(*meter.Bucket); ok {
			b.CopyFrom(now, 0, reset, sh.backs-backsDone)
		}
	}
}

// backsDone returns the give-backs done in k's shard (see localShard.backs):
// read before a request to Redis, the give-backs begun since then, less
// it, are those Redis' reply may still count.
func (s *localStore) backsDone(k lkey) int64 {
	sh, _ := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.backsDone
}

// addEvents is localStore.addEvents. The caller holds sh.mu.
func (sh *localShard) addEvents(k *lkey, h uint64, p *plan, now, n int64, member string, owe bool) {
	m, ok := p.alg.local.meter(&sh.meters, p.meterFit, h, now, true, *k)
	if ok {
		m.Add(now, p.window, n)
	}
	sh.denials.Remove(k, h) // events arrived: a cached rejection's RetryAfter may be short
	if owe {
		sh.oweEvents(k, h, p, m, now, n, member)
	}
}

// unreserveFor takes back d events a reservation recorded for k at at (see
// Reservation.Settle), and, with owed (the reservation was decided without
// Redis), as many of them as k still owes Redis, under member among the
// named ones. A meter that keeps records by id (see recordKeeper) gives
// them back by the reservation's id rec, and d = 0 settles the reservation
// there at its cost. It returns how many of them were still owed: the
// rest, if any, the write-back brought to Redis.
func (s *localStore) unreserveFor(k lkey, p *plan, at, d int64, member string, rec uint64, owed bool) (forgot int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if owed {
		forgot = sh.forgetOwed(&k, h, p, at, d)
		sh.debts.LessNamed(&k, h, member, forgot)
	}
	p.unreserve(sh, &k, h, at, d, rec, false)
	sh.denials.Remove(&k, h) // a cached rejection counts what was given back
	sh.backs += d
	return forgot
}

// unmirror takes back n events recorded for k at at (slots of a grant the
// process gives back unused, see prefetch.go).
func (s *localStore) unmirror(k lkey, p *plan, at, n int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p.unreserve(sh, &k, h, at, n, 0, false)
}

// backDone notes that n events a settle gave back for k (see
// unreserveFor) are given back on Redis too, or never will be.
func (s *localStore) backDone(k lkey, n int64) {
	sh, _ := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.backsDone += n
}

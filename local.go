package ratelimit

import (
	"hash/maphash"
	"math/bits"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// DefaultLocalCapacity is the number of keys the local limiter keeps when
// Options.LocalCapacity is 0.
const DefaultLocalCapacity = 100_000

// lkey names the state of one (rule, key) pair. Keys longer than
// MaxKeyLength are replaced by their digest, marked by hashed, so that a
// digest can never equal a short key.
type lkey struct {
	rule   string
	key    string
	group  string // the AllowGroup tag, "" outside a group
	hashed bool
}

// localStore is the per-process limiter: the fallback while Redis cannot be
// used, the whole limiter when there is no Redis, and the mirror of Redis'
// recent decisions otherwise. Its state is spread over shards chosen by key
// hash, each an LRU under its own lock, so that unrelated keys do not wait
// for each other.
//
// Each shard keeps three tables: the sliding logs, the violations of keys
// that are not banned, and the active bans. A flood of new keys evicts only
// logs, and a flood of violators only violation records, so an active ban is
// evicted only by newer bans.
type localStore struct {
	seed   maphash.Seed
	mask   uint64
	shards []localShard
}

type localShard struct {
	mu       sync.Mutex                        // guards the tables and everything in them
	logs     *simplelru.LRU[lkey, *slidingLog] // sliding logs
	strikes  *simplelru.LRU[lkey, *strikes]    // violations of keys not banned
	bans     *simplelru.LRU[lkey, *strikes]    // keys with an active ban
	denials  *simplelru.LRU[lkey, *denial]     // the hot-key shield: Redis' rejections
	counters *simplelru.LRU[lkey, *counter]    // approximate counters
	unsynced *simplelru.LRU[lkey, *slidingLog] // events allowed without Redis (see mirror.go)
	_        [128 - 56]byte                    // keeps shards on separate cache lines
}

// newLocalStore returns a store that keeps at most capacity logs, capacity
// approximate counters, capacity violation records and capacity bans (and
// caches at most capacity rejections for the hot-key shield).
func newLocalStore(capacity int) *localStore {
	n := 1
	for n < 128 && capacity/(n*2) >= 64 {
		n *= 2
	}
	per := (capacity + n - 1) / n
	s := &localStore{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]localShard, n)}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.logs, _ = simplelru.NewLRU[lkey, *slidingLog](per, nil)
		sh.strikes, _ = simplelru.NewLRU[lkey, *strikes](per, nil)
		sh.bans, _ = simplelru.NewLRU[lkey, *strikes](per, nil)
		sh.denials, _ = simplelru.NewLRU[lkey, *denial](per, nil)
		sh.counters, _ = simplelru.NewLRU[lkey, *counter](per, nil)
		sh.unsynced, _ = simplelru.NewLRU[lkey, *slidingLog](per, nil)
	}
	return s
}

func (s *localStore) shard(k lkey) *localShard {
	h := maphash.String(s.seed, k.key) ^ bits.RotateLeft64(maphash.String(s.seed, k.rule), 31)
	return &s.shards[h&s.mask]
}

// decide makes one decision at now for n events (peek: for one, recording
// nothing) under rate, the rule's rate or its degraded share. A request that
// can never fit under rate (n > rate) is rejected without a violation: it is
// the degraded share's doing, not the caller's. unsynced says the decision
// is made in place of Redis: the events it allows are also remembered as
// unknown to Redis (see record).
func (s *localStore) decide(k lkey, p *plan, rate, now, n int64, peek, unsynced bool) decision {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()

	asked := n
	if peek {
		asked = 1
	}
	var d decision
	var st *strikes
	if p.penalize {
		st = sh.findStrikes(k, now)
		d.violations = p.penalty.remembered(st, now)
		if st != nil && st.banEnd > now {
			d.banned = true
			d.banLeft = st.banEnd - now
			if m, ok := sh.meter(k, p, now, false); ok {
				d.count = m.count(now, p.window)
				d.reset = m.reset(now, p.window, false)
				if d.count+asked > rate {
					d.retry = m.retryIn(now, p.window, rate, asked)
				}
			}
			d.retry = max(d.retry, d.banLeft)
			return d
		}
	}

	m, ok := sh.meter(k, p, now, !peek)
	if !ok { // a peek at a key never seen: rate >= 1 fits one event
		d.allowed = true
		return d
	}
	if !peek {
		m.prune(now, p.window)
	}
	d.count = m.count(now, p.window)
	d.reset = m.reset(now, p.window, false)
	if d.count+asked <= rate {
		d.allowed = true
		if !peek {
			m.add(now, p.window, n)
			d.count += n
			d.reset = m.reset(now, p.window, true)
			if unsynced && !p.approx {
				sh.addUnsynced(k, p, now, n)
			}
		}
		return d
	}
	d.retry = m.retryIn(now, p.window, rate, asked)
	if !p.penalize || n > rate {
		return d
	}
	if peek {
		d.warned = p.penalty.warnAfter > 0 && d.violations >= p.penalty.warnAfter
		return d
	}
	if st == nil {
		st = &strikes{}
		sh.strikes.Add(k, st)
	}
	ban, warned := p.penalty.violate(st, now)
	d.banned, d.warned = ban > 0, warned
	d.violations = st.violations
	if d.banned {
		d.banLeft = ban
		d.retry = max(d.retry, d.banLeft)
		sh.strikes.Remove(k)
		sh.bans.Add(k, st)
	}
	return d
}

// meter returns the record of k's events under p, creating it if asked
// to. The caller holds sh.mu.
func (sh *localShard) meter(k lkey, p *plan, now int64, create bool) (meter, bool) {
	if p.approx {
		c, ok := sh.counters.Get(k)
		if !ok && create {
			c, ok = &counter{}, true
			sh.counters.Add(k, c)
		}
		return c, ok
	}
	lg, ok := sh.getLog(k, now)
	if !ok && create {
		lg, ok = &slidingLog{touched: now}, true
		sh.logs.Add(k, lg)
	}
	return lg, ok
}

// touchEvery is how often, at most, a hit moves a log to the front of its
// LRU: eviction order is kept to a tenth of a second, and a hot key does not
// rewrite the list on every call.
const touchEvery = 100_000 // µs

// getLog returns the log of k, moving it to the front of the LRU when it
// has not been moved there for touchEvery. The caller holds sh.mu.
func (sh *localShard) getLog(k lkey, now int64) (*slidingLog, bool) {
	lg, ok := sh.logs.Peek(k)
	if ok && (now-lg.touched >= touchEvery || now < lg.touched) {
		sh.logs.Get(k)
		lg.touched = now
	}
	return lg, ok
}

// findStrikes returns the penalty state of k, moving a ban that has ended
// back among the violation records. The caller holds sh.mu.
func (sh *localShard) findStrikes(k lkey, now int64) *strikes {
	if st, ok := sh.bans.Get(k); ok {
		if st.banEnd > now {
			return st
		}
		sh.bans.Remove(k)
		sh.strikes.Add(k, st)
		return st
	}
	st, _ := sh.strikes.Get(k)
	return st
}

// ban bans k by hand until now + d, keeping its violations.
func (s *localStore) ban(k lkey, now, d int64) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.findStrikes(k, now)
	if st == nil {
		st = &strikes{}
	}
	st.banEnd = now + d
	sh.strikes.Remove(k)
	sh.bans.Add(k, st)
	sh.denials.Remove(k)
}

// unrecord takes back n events recorded for k at now (AllowAll's undo).
func (s *localStore) unrecord(k lkey, p *plan, now, n int64) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p.approx {
		if c, ok := sh.counters.Peek(k); ok && c.win == floorDiv(now, p.window) {
			c.cur = max(0, c.cur-n)
		}
		return
	}
	if lg, ok := sh.logs.Peek(k); ok {
		lg.removeEvents(now, n)
	}
}

// reset forgets everything about k.
func (s *localStore) reset(k lkey) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.logs.Remove(k)
	sh.strikes.Remove(k)
	sh.bans.Remove(k)
	sh.denials.Remove(k)
	sh.counters.Remove(k)
	sh.unsynced.Remove(k)
}

package ratelimit

import "github.com/ratelimit-go/ratelimit/internal/shield"

// The hot-key shield: a rejection Redis made that nothing but a Reset can
// lift early is cached per process, and the same call is answered from the
// cache without a round trip until it could pass (see Options.ShieldMax).

// denials is a shard's shield: its cached rejections, under pairs, for
// rules of each kind (see internal/shield).
type denials = shield.Cache[lkey, *algorithm]

// shieldTerms are what a rejection cached under p must match of the plan
// of a call it answers.
func shieldTerms(p *plan) shield.Terms[*algorithm] {
	return shield.Terms[*algorithm]{Rate: p.rate, Window: p.window, Penalize: p.penalize, Kind: p.alg, Mark: p.alg.shield.shieldMark(*p)}
}

// shield caches a rejection of one event that nothing can lift early: under
// a rule without penalty a full window (rejections record nothing, so no
// event can arrive, and none leaves before RetryAfter), and a ban. Only a
// Reset lifts either; this limiter's Reset clears the cache, another
// process' is seen when the entry ends, or after shieldMax when > 0. An
// allowed decision drops a stale entry. The caller holds sh.mu.
func (sh *localShard) shield(k *lkey, h uint64, p *plan, now, n int64, d *decision, shieldMax int64) {
	if d.allowed {
		sh.denials.Remove(k, h)
		return
	}
	var until int64
	switch {
	case d.banned:
		until = now + d.banLeft
	case p.alg.rules.leased():
		return // a release may free a slot at any moment
	default:
		// Under a penalty too: each call it answers is a violation,
		// counted here and owed to Redis (see shielded).
		until = now + d.retry
	}
	if shieldMax > 0 {
		until = min(until, now+shieldMax)
	}
	retryAt, resetAt := now+d.retry, now+d.reset
	if !d.banned {
		// Redis measured from the call's time, not from receipt: what
		// ends at a fixed time (a quota's period) ends then all the same.
		h := p.alg.shield.horizon(*p)
		until, retryAt, resetAt = min(until, h), min(retryAt, h), min(resetAt, h)
	}
	sh.denials.Keep(k, h, shield.Rejection[*algorithm]{
		Terms: shieldTerms(p), N: n, Banned: d.banned,
		Since: now, Until: until, RetryAt: retryAt, ResetAt: resetAt,
		Violations: d.violations, ForgetAt: now + d.memoryLeft,
	})
}

// unshieldBans drops every ban the shield caches, so that the next call of
// each banned key goes to Redis, with the ban the process knows of (see
// hold).
func (s *localStore) unshieldBans() {
	s.eachShard(func(sh *localShard) { sh.denials.RemoveBans() })
}

// shielded answers a call for n events (peek: for one, recording
// nothing) from the shield, when it holds a rejection of k under the same rule that has
// not ended by now (or, for a call that came late, that was cached after
// its time: it waited for its pair's calls to land, or its time is the
// process' own, which never goes back). Under a penalty the call is a violation, as on Redis:
// the process counts it on the ladder it mirrors from Redis and owes it to
// Redis, where the write-back adds it (see oweViolation), so that a crowd
// at a full key costs Redis one call per freed slot, not one per caller.
func (s *localStore) shielded(k lkey, p *plan, now, n int64, peek, late bool) (decision, bool) {
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.shielded(&k, h, p, now, n, peek, late)
}

// shielded is localStore.shielded for k, whose hash is h. The caller holds
// sh.mu.
func (sh *localShard) shielded(k *lkey, h uint64, p *plan, now, n int64, peek, late bool) (decision, bool) {
	if sh.denials.Len() == 0 {
		return decision{}, false
	}
	e := sh.denials.Get(k, h)
	if e == nil {
		return decision{}, false
	}
	now = e.At(now, late)
	if e.N != n {
		return decision{}, false // a rejection of as many events answers a call
	}
	// shieldTerms(p), compared field by field, the kind's mark last: so
	// the comparison inlines and builds nothing.
	if e.Ended(now) || e.Rate != p.rate || e.Window != p.window || e.Penalize != p.penalize ||
		e.Kind != p.alg || e.Mark != p.alg.shield.shieldMark(*p) {
		sh.denials.Remove(k, h)
		return decision{}, false
	}
	d := decision{count: e.Rate, retry: e.RetryAt - now, reset: max(0, e.ResetAt-now), banned: e.Banned}
	if e.N > 1 && !e.Banned {
		d.count = sh.shieldedCount(k, h, p, e, now)
	}
	switch {
	case e.Banned:
		d.banLeft = e.Until - now
		if now < e.ForgetAt {
			d.violations = e.Violations
		}
	case p.penalize:
		if peek || sh.ladders.WouldBan(k, h, &p.penalty, now) {
			// Redis answers a peek, with the violations the process
			// delivers (see hold): this process' count may lag behind
			// Redis' by the replies on their way. And a violation that
			// bans the key is Redis' to count, so that every process
			// sees the ban at once.
			return decision{}, false
		}
		sh.violate(k, h, p, now, peek, p, &d)
	}
	return d, true
}

// shieldedCount is the count the shield answers with at now from e, a
// rejection of more than one event that no ban made. A rejection of one
// event leaves none (Remaining 0) until it ends; one of n events may leave
// some, and more as events leave the window: Remaining is the process' own
// count's. The caller holds sh.mu.
func (sh *localShard) shieldedCount(k *lkey, h uint64, p *plan, e *shield.Rejection[*algorithm], now int64) int64 {
	if m, ok := sh.meter(k, h, p, now, false); ok {
		return max(m.Count(now, p.window), e.Rate-e.N+1)
	}
	return e.Rate - e.N + 1
}

// violate counts a violation of k at now under p on the process' own
// ladder into d (a peek only reads it: its warning), and owes it to Redis
// under owed when owed is not nil. The caller holds sh.mu.
func (sh *localShard) violate(k *lkey, h uint64, p *plan, now int64, peek bool, owed *plan, d *decision) {
	if peek {
		d.violations = sh.ladders.Remembered(k, h, &p.penalty, now)
		d.warned = p.penalty.Warns(d.violations)
		return
	}
	v, ban, warned := sh.ladders.Violate(k, h, &p.penalty, now)
	if owed != nil {
		sh.oweViolation(k, h, owed, now, ban)
	}
	d.violations, d.warned = v, warned
	if ban > 0 {
		d.banned, d.banLeft = true, ban
		d.retry = max(d.retry, ban)
	}
}

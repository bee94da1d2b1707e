package ratelimit

// The hot-key shield: a rejection Redis made that nothing but a Reset can
// lift early is cached per process, and the same call is answered from the
// cache without a round trip until it could pass (see Options.ShieldMax).

// denial is a rejection Redis made for one event, cached so that the same
// call is answered without a round trip until it could pass. All times are
// the local path's µs, taken on receipt (never Redis' own TIME).
type denial struct {
	rate, window int64 // the rule it holds for
	penalize     bool
	alg          algorithm
	mark         int64 // what else it must match of the plan (see algorithm.shieldMark)
	banned       bool
	since        int64 // when it was cached: a clock gone back behind it is not answered here
	until        int64 // answered here while since <= now < until
	retryAt      int64
	resetAt      int64
	violations   int64
	forgetAt     int64 // violations remembered while now < forgetAt
}

// shield caches a rejection of one event that nothing can lift early: under
// a rule without penalty a full window (rejections record nothing, so no
// event can arrive, and none leaves before RetryAfter), and a ban. Only a
// Reset lifts either; this limiter's Reset clears the cache, another
// process' is seen when the entry ends, or after shieldMax when > 0. An
// allowed decision drops a stale entry. The caller holds sh.mu.
func (sh *localShard) shield(k *lkey, h uint64, p *plan, now int64, d *decision, shieldMax int64) {
	if d.allowed {
		sh.denials.remove(k, h)
		return
	}
	var until int64
	switch {
	case d.banned:
		until = now + d.banLeft
	case p.alg.leased():
		return // a release may free a slot at any moment
	case !p.penalize:
		until = now + d.retry
	default:
		return // a rejection under a penalty is a violation: Redis must count it
	}
	if shieldMax > 0 {
		until = min(until, now+shieldMax)
	}
	retryAt, resetAt := now+d.retry, now+d.reset
	if !d.banned {
		// Redis measured from the call's time, not from receipt: what
		// ends at a fixed time (a quota's period) ends then all the same.
		h := p.alg.horizon(*p)
		until, retryAt, resetAt = min(until, h), min(retryAt, h), min(resetAt, h)
	}
	sh.denials.add(k, h, denial{
		rate: p.rate, window: p.window, penalize: p.penalize, alg: p.alg, mark: p.alg.shieldMark(*p), banned: d.banned,
		since: now, until: until, retryAt: retryAt, resetAt: resetAt,
		violations: d.violations, forgetAt: now + d.memoryLeft,
	})
}

// shielded answers a call for one event from the shield, when it holds a
// rejection of k under the same rule that has not ended by now.
func (s *localStore) shielded(k lkey, p *plan, now int64) (decision, bool) {
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.denials.Len() == 0 {
		return decision{}, false
	}
	e := sh.denials.get(&k, h)
	if e == nil {
		return decision{}, false
	}
	if now >= e.until || now < e.since || e.rate != p.rate || e.window != p.window || e.penalize != p.penalize ||
		e.alg != p.alg || e.mark != p.alg.shieldMark(*p) {
		sh.denials.remove(&k, h)
		return decision{}, false
	}
	d := decision{count: e.rate, retry: e.retryAt - now, reset: max(0, e.resetAt-now), banned: e.banned}
	if e.banned {
		d.banLeft = e.until - now
		if now < e.forgetAt {
			d.violations = e.violations
		}
	}
	return d, true
}

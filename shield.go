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
	approx       bool
	kind         Kind
	emit         int64 // GCRA: the Rate its bucket refills at; a quota: its period's start
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
	case !p.penalize:
		until = now + d.retry
	default:
		return // a rejection under a penalty is a violation: Redis must count it
	}
	if shieldMax > 0 {
		until = min(until, now+shieldMax)
	}
	retryAt, resetAt := now+d.retry, now+d.reset
	if p.kind == CalendarQuota && !d.banned {
		// Redis measured from the call's time, not from receipt: the
		// next period starts at the end of this one all the same.
		until, retryAt, resetAt = min(until, p.end), min(retryAt, p.end), min(resetAt, p.end)
	}
	sh.denials.add(k, h, denial{
		rate: p.rate, window: p.window, penalize: p.penalize, approx: p.approx, kind: p.kind, emit: p.shieldEmit(), banned: d.banned,
		since: now, until: until, retryAt: retryAt, resetAt: resetAt,
		violations: d.violations, forgetAt: now + d.memoryLeft,
	})
}

// shielded answers a call for one event from the shield, when it holds a
// rejection of k under the same rule that has not ended by now.
func (s *localStore) shielded(k lkey, p *plan, now int64) (decision, bool) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.denials.Len() == 0 {
		return decision{}, false
	}
	e := sh.denials.get(&k, h)
	if e == nil {
		return decision{}, false
	}
	if now >= e.until || now < e.since || e.rate != p.rate || e.window != p.window || e.penalize != p.penalize || e.approx != p.approx ||
		e.kind != p.kind || e.emit != p.shieldEmit() {
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

// shieldEmit is what else a cached rejection must match of the plan: the
// refill rate of a GCRA bucket, the period of a quota (a rejection of one
// period never answers a call in the next).
func (p *plan) shieldEmit() int64 {
	switch p.kind {
	case GCRA:
		return p.emit
	case CalendarQuota:
		return p.start
	}
	return 0
}

package ratelimit

// The mirror: every decision Redis makes is copied into the local store, so
// that an outage starts from what Redis knew rather than from an empty log,
// and so that the shield can answer rejections Redis made.
//
// The other way round, events allowed without Redis (during an outage, or
// for calls admission control shed) are unknown to Redis until they are
// written back (writeback.go). Until then they are kept apart, as unsynced
// events in the pair's debt: a decision Redis allows is overruled when
// Redis' count and this process' unsynced events together exceed the rate,
// so that a process never admits more than the rate by its own count,
// whatever Redis could not see yet. Once written back they leave the debt,
// and Redis' count holds them.

// mirrorOff turns the mirror off, for BenchmarkMirror only: it measures
// what copying Redis' decisions costs the Redis path.
var mirrorOff bool

// record copies a decision Redis made at now into the local state: events,
// violations and bans into the mirror, so that an outage starts from what
// Redis knew rather than from an empty log (not for a peek, which recorded
// nothing), and rejections into the shield (see shielded). shieldMax > 0
// bounds how long a rejection is cached; < 0 turns the shield off.
//
// record reports whether it overruled an allowing decision (see
// overrule); then *d is the rejection, and nothing was recorded.
func (s *localStore) record(k lkey, p *plan, now, n int64, peek bool, d *decision, shieldMax int64) (overruled bool) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if d.allowed && !peek && sh.overrule(&k, h, p, now, n, d) {
		return true
	}
	if shieldMax >= 0 {
		switch {
		case d.allowed && !peek:
			sh.denials.remove(&k, h) // events arrived: a cached rejection may be stale
		case n == 1 || peek:
			sh.shield(&k, h, p, now, d, shieldMax)
		}
	}
	if !peek && !mirrorOff {
		sh.mirror(&k, h, p, now, n, d)
	}
	return false
}

// mirror copies a decision Redis made into the local state. The caller
// holds sh.mu.
func (sh *localShard) mirror(k *lkey, h uint64, p *plan, now, n int64, d *decision) {
	if d.allowed {
		m, _ := sh.meter(k, h, p, now, true)
		if c, ok := m.(stateCopier); ok {
			c.copyFrom(now, d.count, d.reset) // a bucket or a quota: Redis' state is in the reply
		} else {
			m.prune(now, p.window)
			m.add(now, p.window, n)
			if lg, ok := m.(*slidingLog); ok {
				lg.bound(p.rate)
			}
		}
	}
	if !p.penalize {
		return
	}
	switch {
	case d.banned:
		sh.strikes.remove(k, h)
		sh.bans.add(k, h, &strikes{violations: d.violations, last: now, banEnd: now + d.banLeft, bans: d.bans})
	case d.violations > 0:
		st := sh.findStrikes(k, h, now)
		if st == nil {
			st = &strikes{last: now}
			sh.strikes.add(k, h, st)
		}
		if !d.allowed {
			st.last = now
		}
		st.violations, st.banEnd, st.bans = d.violations, 0, d.bans
	default:
		sh.strikes.remove(k, h)
		sh.bans.remove(k, h)
	}
}

// stateCopier is a meter whose whole state a decision of Redis' carries:
// the mirror copies it rather than adding the call's events to its own.
// It takes the reply's numbers by value: a *decision passed through an
// interface would move every Redis call's decision to the heap.
type stateCopier interface {
	copyFrom(now, count, reset int64)
}

// overruled reports whether record would overrule the allowing decision *d
// Redis made for n events of k at now, and then turns *d into the
// rejection, recording nothing (see overrule).
func (s *localStore) overruled(k lkey, p *plan, now, n int64, d *decision) bool {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := *d
	if !sh.overrule(&k, h, p, now, n, &c) {
		return false
	}
	*d = c
	return true
}

// overrule turns the allowing decision *d Redis made for n events at now
// into a rejection, and reports whether it did, while k has unsynced
// events (see debt): when Redis' count and the unsynced events together exceed the
// rate, or when the process' own log, which holds both what it mirrored and
// what it allowed without Redis, has no room for n (Redis' count can lag
// behind decisions this process has already mirrored). The rejection waits
// until both have room. A decision it lets stand counts the unsynced events
// too. The caller holds sh.mu.
func (sh *localShard) overrule(k *lkey, h uint64, p *plan, now, n int64, d *decision) bool {
	if !p.logged() || sh.debts.n == 0 {
		return false
	}
	debt := sh.debtOf(k, h)
	if debt == nil || debt.p.keyKind() != 'l' {
		return false
	}
	u := &debt.events // the write-back forgets what left the window
	unsynced := u.count(now, p.window)
	if unsynced == 0 {
		return false
	}
	var local, retry int64
	if lg := sh.logs.peek(k, h); lg != nil {
		if local = lg.count(now, p.window); local+n > p.rate {
			retry = lg.retryIn(now, p.window, p.rate, n)
		}
	}
	others := d.count - n // in Redis' window besides this call's events
	if others+n+unsynced > p.rate {
		retry = max(retry, u.retryIn(now, p.window, p.rate-others, n))
	}
	if retry == 0 {
		d.count = max(d.count+unsynced, local+n) // Remaining counts what this process admitted
		return false
	}
	*d = decision{
		count:      min(p.rate, max(others+unsynced, local)),
		retry:      retry,
		reset:      max(d.reset, u.reset(now, p.window, false)),
		violations: d.violations,
		memoryLeft: d.memoryLeft,
		bans:       d.bans,
	}
	return true
}

package ratelimit

// The mirror: every decision Redis makes is copied into the local store, so
// that an outage starts from what Redis knew rather than from an empty log,
// and so that the shield can answer rejections Redis made.

// record copies a decision Redis made at now into the local state: events,
// violations and bans into the mirror, so that an outage starts from what
// Redis knew rather than from an empty log (not for a peek, which recorded
// nothing), and rejections into the shield (see shielded). shieldMax > 0
// bounds how long a rejection is cached; < 0 turns the shield off.
func (s *localStore) record(k lkey, p *plan, now, n int64, peek bool, d *decision, shieldMax int64) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if shieldMax >= 0 {
		switch {
		case d.allowed && !peek:
			sh.denials.Remove(k) // events arrived: a cached rejection may be stale
		case n == 1 || peek:
			sh.shield(k, p, now, d, shieldMax)
		}
	}
	if !peek {
		sh.mirror(k, p, now, n, d)
	}
}

// mirror copies a decision Redis made into the local state. The caller
// holds sh.mu.
func (sh *localShard) mirror(k lkey, p *plan, now, n int64, d *decision) {
	if d.allowed {
		m, _ := sh.meter(k, p, now, true)
		m.prune(now, p.window)
		m.add(now, p.window, n)
		if lg, ok := m.(*slidingLog); ok {
			lg.bound(p.rate)
		}
	}
	if !p.penalize {
		return
	}
	switch {
	case d.banned:
		sh.strikes.Remove(k)
		sh.bans.Add(k, &strikes{violations: d.violations, last: now, banEnd: now + d.banLeft, bans: d.bans})
	case d.violations > 0:
		st := sh.findStrikes(k, now)
		if st == nil {
			st = &strikes{last: now}
			sh.strikes.Add(k, st)
		}
		if !d.allowed {
			st.last = now
		}
		st.violations, st.banEnd, st.bans = d.violations, 0, d.bans
	default:
		sh.strikes.Remove(k)
		sh.bans.Remove(k)
	}
}

package ratelimit

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
// local tables, and its rejections into the shield. So an outage starts
// from what Redis knew, not from an empty log.

// held is what hold found of one pair before its call went to Redis.
type held struct {
	retry    int64 // µs until the process' own count has room for the call (0: it has)
	owed     int64 // events decided without Redis that still count and are not in Redis yet
	banLeft  int64 // µs left of a ban this process knows of (0: none)
	since    int64 // the oldest event the process' own count holds (0: unknown)
	count    int64 // the process' own count before the call
	reserved bool  // the call's events were recorded at now, pending Redis' answer
}

// holds reports whether the process' own count holds the call back (its
// retry or a ban): only then does the script need the pair's last Reset.
func (hd *held) holds() bool { return hd.retry > 0 || hd.banLeft > 0 }

// hold looks at k's own count at now for a call of n events (peek: one
// event, recording nothing) under p, and reserves the events when they fit
// and nothing bans the key (see held).
func (s *localStore) hold(k lkey, p *plan, now, n int64, peek bool) held {
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var hd held
	if p.penalize && sh.bans.Len() > 0 {
		if st := sh.findStrikes(&k, h, now); st != nil && st.banEnd > now {
			hd.banLeft = st.banEnd - now
		}
	}
	if sh.debts.Len() > 0 {
		if d := sh.debtOf(&k, h); d != nil && d.p.alg == p.alg {
			hd.owed = d.events.since(p.alg.dueFrom(*p, now))
		}
	}
	m, ok := sh.meter(&k, h, p, now, !peek)
	if !ok {
		return hd
	}
	asked := n
	if peek {
		asked = 1
	} else {
		m.prune(now, p.window)
	}
	hd.count = m.count(now, p.window)
	if o, ok := m.(ager); ok {
		hd.since = o.oldest(now, p.window)
	}
	if hd.count+asked > p.rate {
		hd.retry = max(1, m.retryIn(now, p.window, p.rate, asked))
		return hd
	}
	if !peek && hd.banLeft == 0 {
		m.add(now, p.window, n)
		hd.reserved = true
	}
	return hd
}

// A leg is one pair of a decision on its way to Redis: the pair, its plan,
// the events the call asks for (peek: one, recording nothing), and what
// hold found of it. Allow's call has one leg, AllowGroup's one per pair.
type leg struct {
	k    *lkey
	p    *plan
	n    int64
	peek bool
	hd   held
}

// holdLegs holds each leg at now (see hold).
func (s *localStore) holdLegs(legs []leg, now int64) {
	for i := range legs {
		lg := &legs[i]
		lg.hd = s.hold(*lg.k, lg.p, now, lg.n, lg.peek)
	}
}

// releaseLegs takes back what holdLegs reserved at now (see release).
func (s *localStore) releaseLegs(legs []leg, now int64) {
	for i := range legs {
		lg := &legs[i]
		s.release(*lg.k, lg.p, now, lg.n, &lg.hd)
	}
}

// release takes back the events hold reserved for k at now, when the call
// was not allowed on Redis.
func (s *localStore) release(k lkey, p *plan, now, n int64, hd *held) {
	if !hd.reserved {
		return
	}
	hd.reserved = false
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.unreserve(&k, h, p, now, n)
}

// unreserve takes back a reservation of n events at now, and forgets the
// meter when that leaves it empty, so that calls Redis never allowed (or
// never answered) leave no entries behind. The caller holds sh.mu.
func (sh *localShard) unreserve(k *lkey, h uint64, p *plan, now, n int64) {
	p.unreserve(sh, k, h, now, n, true)
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
	own := hd.count
	switch {
	case hd.reserved && !d.allowed:
		sh.unreserve(&k, h, p, now, n)
	case hd.reserved:
		own += n
	case d.allowed && !peek && hd.retry > 0:
		// Redis allowed what the process' own count held back: a Reset
		// since made that count void (see decide.lua). It starts again
		// from this call.
		sh.forgetOwn(&k, h)
		if m, ok := sh.meter(&k, h, p, now, true); ok {
			m.add(now, p.window, n)
		}
		own = n
	}
	hd.reserved = false
	if !peek {
		sh.mirror(&k, h, p, now, at, d)
	}
	d.count = max(d.count, own) // Redis' count holds what it is owed
	if shieldMax >= 0 {
		switch {
		case d.allowed && !peek:
			sh.denials.remove(&k, h) // events arrived: a cached rejection may be stale
		case n == 1 || peek:
			sh.shield(&k, h, p, at, d, shieldMax)
		}
	}
}

// mirror copies a decision Redis made for a call at now, received at at,
// into the local state: the whole state of a meter that keeps one (a
// bucket, a quota; the later wins), and the penalty state. The meter's
// state is placed from the call's time, when its own reservation was made
// and no later than Redis decided: from the receipt it would run ahead of
// Redis' by the round trip, and this process' own count would hold back
// calls Redis allows. The caller holds sh.mu.
func (sh *localShard) mirror(k *lkey, h uint64, p *plan, now, at int64, d *decision) {
	if d.allowed {
		if m, ok := sh.meter(k, h, p, now, false); ok {
			if c, ok := m.(stateCopier); ok {
				c.copyFrom(now, d.count, d.reset) // a bucket or a quota: Redis' state is in the reply
			}
		}
	}
	if !p.penalize {
		return
	}
	switch {
	case d.banned:
		sh.strikes.remove(k, h)
		sh.bans.add(k, h, &strikes{violations: d.violations, last: at, banEnd: at + d.banLeft, bans: d.bans})
	case d.violations > 0:
		st := sh.findStrikes(k, h, at)
		if st == nil {
			st = &strikes{last: at}
			sh.strikes.add(k, h, st)
		}
		if !d.allowed {
			st.last = at
		}
		st.violations, st.banEnd, st.bans = d.violations, 0, d.bans
	default:
		sh.strikes.remove(k, h)
		sh.bans.remove(k, h)
	}
}

// stateCopier is a meter whose whole state a decision of Redis' carries:
// the mirror merges it into its own, keeping the later of the two (Redis
// may have lost what this process recorded; this process does not see what
// others recorded). It takes the reply's numbers by value: a *decision
// passed through an interface would move every Redis call's decision to
// the heap.
type stateCopier interface {
	copyFrom(now, count, reset int64)
}

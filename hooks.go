package ratelimit

import (
	"time"

	"github.com/ratelimit-go/ratelimit/internal/breaker"
	"github.com/ratelimit-go/ratelimit/internal/redisio"
)

// Path says where a decision was made.
type Path int

const (
	// PathNone: no decision was made (invalid input, a closed Limiter, the
	// caller's context ended first).
	PathNone Path = iota
	// PathRedis: the rule's script decided on Redis.
	PathRedis
	// PathShield: the hot-key shield answered with a rejection Redis made
	// earlier (see Options.ShieldMax), or rejected a call of a full key
	// that waited half of Options.Timeout for the key's call on its way to
	// Redis to land.
	PathShield
	// PathLocal: the local limiter decided, in a Limiter without Redis or
	// while Redis could not be used (then Result.Degraded is set).
	PathLocal
	// PathShed: Redis is healthy but had as many calls in flight as
	// admission control allows, and no slot freed up within the latency
	// target (a fifth of Options.Timeout), so the call was decided by the
	// rule's degraded policy instead of queueing (Result.Degraded is set).
	PathShed
	// PathPrefetch: the call was allowed in-process from slots the
	// process took from Redis ahead of its calls (see Rule.Prefetch).
	PathPrefetch
)

// String returns "none", "redis", "shield", "local", "shed" or
// "prefetch".
func (p Path) String() string {
	switch p {
	case PathRedis:
		return "redis"
	case PathShield:
		return "shield"
	case PathLocal:
		return "local"
	case PathShed:
		return "shed"
	case PathPrefetch:
		return "prefetch"
	}
	return "none"
}

// Decision is one decision as Options.OnDecision reports it: a call of
// Allow, AllowN or Peek (and so of Wait, once per try), one pair of AllowAll
// (each pair asked is reported as its own Decision), or one pair of
// AllowGroup (one Decision per Result it returns, all with the group's Path
// and Took; when AllowGroup fails as a whole, one Decision with Err for its
// first pair).
type Decision struct {
	Rule Rule
	Key  string
	N    int  // events asked for (1 for Allow and Peek)
	Peek bool // the call was a Peek
	// Reserve says the call was a Reserve. Settle says the Decision
	// reports a Reservation's Settle or Cancel, not a decision: N is the
	// cost settled, Reserved the events the Reserve took, Result is zero,
	// and Path is where the settle went: PathRedis when Redis has it,
	// PathLocal when this process alone does (and owes it to Redis), and
	// PathNone when it changed nothing (settled at the reserved cost, or
	// a reservation that recorded nothing).
	Reserve, Settle bool
	Reserved        int
	Result          Result
	Err             error // the call's error; Result is zero when it is set
	Path            Path
	Took            time.Duration // how long the decision took
}

// reporter reports one call's decisions to Options.OnDecision, each with
// the time since the call began. Its zero value, a Limiter's without a
// hook, reports nothing and has read no clock: callers build a Decision
// only when on says there is a hook for it.
type reporter struct {
	hook  func(Decision)
	start time.Time
}

// reporter starts timing a call for Options.OnDecision, when it is set.
func (l *Limiter) reporter() reporter {
	if l.set.OnDecision == nil {
		return reporter{}
	}
	return reporter{hook: l.set.OnDecision, start: time.Now()}
}

// on reports whether there is a hook to report to.
func (r *reporter) on() bool { return r.hook != nil }

// report passes the decisions ds to the hook, all with one Took: the time
// since the call began.
func (r *reporter) report(ds ...Decision) {
	took := time.Since(r.start)
	for i := range ds {
		ds[i].Took = took
		r.hook(ds[i])
	}
}

// Stats is a snapshot of a Limiter's local state, for gauges.
type Stats struct {
	// LocalLogs, LocalCounters, LocalStrikes and LocalBans count the sliding
	// logs, approximate counters, violation records and active bans the
	// local limiter keeps (each at most Options.LocalCapacity). The
	// meters of every kind are in Limiter.LocalMeters.
	LocalLogs, LocalCounters, LocalStrikes, LocalBans int
	// LocalBuckets and LocalQuotas count the GCRA buckets and calendar
	// quotas the local limiter keeps (each at most Options.LocalCapacity).
	LocalBuckets, LocalQuotas int
	// Shielded counts the rejections the hot-key shield holds.
	Shielded int
	// BreakersOpen counts the circuit breakers that are open or half-open
	// (a single Redis has one breaker, a Redis Cluster one per 64 slots).
	BreakersOpen int
	// Connected reports whether the Limiter has a Redis client (false for
	// a local-only Limiter, and for Dial's until it connects). It says
	// nothing about whether that Redis answers: it stays true while Redis
	// is down or refuses every command. RedisInUse says that.
	Connected bool
	// RedisInUse reports whether decisions are being made on Redis now:
	// the Limiter has a Redis client, every circuit breaker is closed, the
	// last call sent through each breaker that has sent one got a reply
	// from Redis (an error reply that means misuse included), and at least
	// one did. It is false for a local-only Limiter; during an outage at
	// start (before any call is answered, or while Dial's client is not
	// connected); from the first call of an outage that fails (a refused
	// connection, a timeout, NOPERM or another unavailable reply) until a
	// call is answered after the breakers closed again; and on a Redis
	// Cluster while any master's breakers are open. Without traffic it
	// keeps the value of the last call (heartbeats call Redis every
	// Options.HeartbeatInterval).
	RedisInUse bool
	// ShedDecisions counts, since the Limiter was made, the decisions
	// admission control shed to the degraded policy while Redis was healthy
	// but had as many calls in flight as it could serve in time
	// (PathShed).
	ShedDecisions uint64
	// OutageDecisions counts, since the Limiter was made, the decisions
	// made by the degraded policy because Redis could not be used: not
	// connected yet, the breaker open, or the call failed as an outage.
	OutageDecisions uint64
	// InFlight is the number of calls now on their way to Redis, and
	// AdmissionLimit the bound admission control now puts on them, summed
	// over the masters (see docs/fallback.md, "Failure modes").
	InFlight, AdmissionLimit int
	// WrittenBack counts, since the Limiter was made, the events decided
	// without Redis that were written back to it (see
	// Options.WriteBackMax); WriteBackDropped those that never will be:
	// dropped over WriteBackMax or from a full local limiter, refused by
	// Redis, or still waiting when the Limiter was closed. WriteBackPending
	// is the number of events now waiting. A GCRA bucket's events count as
	// the tokens they still hold when a batch is cut (see docs/fallback.md,
	// "Write-back"): those that drained meanwhile leave without a count.
	WrittenBack, WriteBackDropped uint64
	WriteBackPending              int
	// Instances is the number of live Limiters under this one's KeyPrefix,
	// itself included, that its last successful heartbeat counted: the N
	// of the degraded share ceil(Rate / N) (see Options.DegradedShare). It
	// is 0 before any heartbeat succeeded, and always for a local-only
	// Limiter or one whose HeartbeatInterval is negative.
	Instances int
	// LeasesHeld is the number of leases of Concurrency rules this Limiter
	// handed out that are neither released nor known lost (see Acquire;
	// a lease that records nothing is not counted). LeaseReleases,
	// LeaseRenewals and LeasesLost count, since the Limiter was made, the
	// releases, the successful renewals and the leases found lost (a
	// renewal after their TTL, or a Reset). Every Acquire is a Decision
	// (see Options.OnDecision).
	LeasesHeld                               int
	LeaseReleases, LeaseRenewals, LeasesLost uint64
	// Reservations counts, since the Limiter was made, the reservations
	// Reserve handed out, and ReservationsSettled those settled or
	// cancelled; the rest stand as reserved. ReservedGivenBack counts the
	// events settles for less (and cancels) gave back, ReservedCharged the
	// extra events settles for more charged, and ReservationDebts those
	// settles for more: each left its key in debt if the extra went past
	// the limit (see Reservation.Settle).
	Reservations, ReservationsSettled  uint64
	ReservedGivenBack, ReservedCharged uint64
	ReservationDebts                   uint64
	// PrefetchGrants counts, since the Limiter was made, the grants of
	// slots Redis made to this process for rules with Prefetch;
	// PrefetchSlotsGranted the slots they held, PrefetchSlotsUsed those
	// calls were allowed from (PathPrefetch), and PrefetchSlotsReturned
	// those given back unused. The rest lapsed unused and leave Redis'
	// count a Window after their grant, as an allowed call's event does.
	PrefetchGrants                          uint64
	PrefetchSlotsGranted, PrefetchSlotsUsed uint64
	PrefetchSlotsReturned                   uint64
}

// LocalMeters returns how many meters the local limiter keeps, by kind of
// meter: "log" (sliding logs, and the leases of concurrency rules),
// "counter" (approximate counters), "bucket" (GCRA), "quota" (calendar
// quotas), "fixed_window", and the meter of any other kind under its own
// name. Each is at
// most Options.LocalCapacity. Like Stats it locks each shard in turn.
func (l *Limiter) LocalMeters() map[string]int {
	m := make(map[string]int, len(meterLetters))
	l.local.eachShard(func(sh *localShard) {
		for slot, owner := range slotOwners {
			m[owner.meterName()] += sh.meters[slot].Len()
		}
	})
	return m
}

// countInto adds what the local store holds to s: its meters of each kind,
// its violation records and bans, its cached rejections. It locks each
// shard in turn.
func (s *localStore) countInto(st *Stats) {
	s.eachShard(func(sh *localShard) {
		st.LocalLogs += sh.meters[logMeters].Len()
		st.LocalCounters += sh.meters[counterMeters].Len()
		st.LocalBuckets += sh.meters[bucketMeters].Len()
		st.LocalQuotas += sh.meters[quotaMeters].Len()
		strikes, bans := sh.ladders.Len()
		st.LocalStrikes += strikes
		st.LocalBans += bans
		st.Shielded += sh.denials.Len()
	})
}

// Stats returns a snapshot of the Limiter's local state. It locks each
// shard of the local limiter in turn: call it for gauges, not per request.
func (l *Limiter) Stats() Stats {
	var s Stats
	l.local.countInto(&s)
	s.ShedDecisions, s.OutageDecisions = l.shed.Load(), l.outages.Load()
	s.WrittenBack, s.WriteBackDropped = l.local.owing.Written(), l.local.owing.Dropped()
	s.WriteBackPending = int(l.local.owing.Events())
	s.Instances = int(l.set.fleet.Load())
	s.LeasesHeld = l.leases.len()
	s.LeaseReleases, s.LeaseRenewals, s.LeasesLost = l.leases.released.Load(), l.leases.renewed.Load(), l.leases.lost.Load()
	st := &l.settles
	s.Reservations, s.ReservationsSettled = st.reserved.Load(), st.settled.Load()
	s.ReservedGivenBack, s.ReservedCharged, s.ReservationDebts = st.givenBack.Load(), st.charged.Load(), st.over.Load()
	pf := &l.prefetch
	s.PrefetchGrants, s.PrefetchSlotsGranted = pf.grants.Load(), pf.granted.Load()
	s.PrefetchSlotsUsed, s.PrefetchSlotsReturned = pf.used.Load(), pf.returned.Load()
	if conn := l.conn.Load(); conn != nil {
		s.Connected = true
		answered, failed := false, false
		seen := make(map[*redisio.Gate]bool)
		for _, b := range conn.breakers.All() {
			if b.State() != breaker.Closed {
				s.BreakersOpen++
			}
			switch b.LastAnswer() {
			case breaker.AnswerYes:
				answered = true
			case breaker.AnswerNo:
				failed = true
			}
			if g := b.Gate(); !seen[g] {
				seen[g] = true
				s.InFlight += int(g.InFlight())
				s.AdmissionLimit += int(g.Limit())
			}
		}
		s.RedisInUse = answered && !failed && s.BreakersOpen == 0
	}
	return s
}

// Package fleet keeps what one Limiter knows of the fleet, the Limiters
// under its key prefix, from its heartbeats (lua/fleet.lua's replies): how
// many are live, how many may hold decisions Redis lacks, and whether
// Redis lost its data; and when, after this Limiter's own breaker opened
// or its calls failed, that knowledge is trusted again.
//
// The sending of heartbeats, and what a decision counts for the others
// (the fleet's reserve), are the root package's (fleet.go); View is their
// state, safe for concurrent use. Times are µs: the process clock's
// (process), the Limiter's Clock's (clock), or Redis' TIME, as each
// method says.
package fleet

import "sync/atomic"

// RejoinBeats is how many successful heartbeats after a failed one may
// raise the count of live Limiters but not lower it (see View.Learn).
const RejoinBeats = 3

// Reply is lua/fleet.lua's reply: the live Limiters, the age of the set,
// the Limiters not settled, Redis' time, when Redis' data began as far as
// the fleet knows (its epoch), and a time by which everything Redis lost
// before the epoch had been recorded.
type Reply struct{ Live, Age, Unsettled, Now, Epoch, LostBy int64 }

// Loss is when Redis lost its data, as a Limiter learnt it from a
// heartbeat: on Redis' clock, everything it lost had been recorded Age µs
// before the heartbeat's TIME, Redis (by the server's start when it lost
// its data by stopping, otherwise by the making of the fleet's new epoch:
// lua/fleet.lua's KEYS[5]); the Limiter learnt it at Process on the
// process clock, and at Clock on its own (Options.Clock, or the process
// clock), which need not run as Redis' does (a fake Clock may stand
// still), so that only the learning bounds the loss there. The events
// Redis lost were recorded before both, on the clock their scripts decided
// on, and stamped up to a Prefetch later (a grant's slots).
type Loss struct{ Process, Clock, Redis, Age int64 }

// On returns the loss and the time of a decision at now, both on the clock
// the decision's script decides on: the call's time when the Limiter sends
// it (sendsNow: Options.Clock, or a quota's period), otherwise Redis'
// TIME, which the process does not read: now on it is the heartbeat's TIME
// moved on by the process clock since (process is its reading now), so
// that a skew between the two clocks moves neither a fixed window's
// boundary nor a period's. The loss is as late as the latest stamp it may
// have held: a grant's, the rule's prefetch past its recording (every
// process of a fleet gives a rule the same Prefetch).
func (ls *Loss) On(sendsNow bool, prefetch, now, process int64) (at, then int64) {
	if sendsNow {
		return ls.Clock + prefetch, now
	}
	return ls.Redis - ls.Age + prefetch, ls.Redis + process - ls.Process
}

// View is one Limiter's knowledge of the fleet. Its zero value knows
// nothing; New shares the count of live Limiters with its owner.
type View struct {
	live      *atomic.Int64 // the live Limiters the last heartbeat counted (0 before one)
	unsettled atomic.Int64  // other live Limiters that may hold decisions Redis lacks
	epoch     atomic.Int64  // the epoch of Redis' data at the last heartbeat
	lost      atomic.Pointer[Loss]
	rejoining atomic.Int32 // heartbeats left whose count may not lower the last

	// The breaker's openings, and those a heartbeat has settled since
	// (until then every other Limiter is assumed to owe), and when it
	// last opened (process µs); the calls that failed as an outage,
	// those a heartbeat has come after, and when the first not yet
	// checked failed (process µs, 0: none); since when (Redis µs) the
	// others must have announced themselves again to count as settled;
	// and when a settling heartbeat was last tried (process µs).
	opens, settledOpens       atomic.Int64
	openedAt                  atomic.Int64
	failures, checkedFailures atomic.Int64
	failedAt                  atomic.Int64
	settleFrom                atomic.Int64
	settleTried               atomic.Int64
}

// New returns a View that keeps the count of live Limiters in live.
func New(live *atomic.Int64) *View { return &View{live: live} }

// Live returns the live Limiters the last heartbeat counted (0 before
// one).
func (v *View) Live() int64 { return v.live.Load() }

// Unsettled returns the other live Limiters that may hold decisions Redis
// lacks, as the last heartbeat counted them.
func (v *View) Unsettled() int64 { return v.unsettled.Load() }

// Lost returns the last loss of Redis' data this Limiter learnt of, or
// nil.
func (v *View) Lost() *Loss { return v.lost.Load() }

// SettleFrom returns since when (Redis µs) the others must have announced
// themselves to count as settled (0: no such bound).
func (v *View) SettleFrom() int64 { return v.settleFrom.Load() }

// Opened notes that this Limiter's breaker opened at process: the other
// Limiters' did too, likely, and they decided without Redis.
func (v *View) Opened(process int64) {
	v.openedAt.Store(process)
	v.opens.Add(1)
}

// Failed notes a call to Redis that failed as an outage at process: the
// next decision on Redis asks the fleet first (see Settled), and the
// others count from the first such failure (see Begin).
func (v *View) Failed(process int64) {
	v.failedAt.CompareAndSwap(0, process)
	v.failures.Add(1)
}

// Beat is what a heartbeat settles once it succeeds: the openings and
// failures as it began.
type Beat struct{ opens, failures int64 }

// Begin starts a heartbeat: since this Limiter's breaker last opened, or
// its first call failed since the last heartbeat, the others must have
// announced themselves again to count as settled. It returns what the
// heartbeat settles once it succeeds (see Learn).
func (v *View) Begin() Beat {
	b := Beat{opens: v.opens.Load(), failures: v.failures.Load()}
	switch failedAt := v.failedAt.Load(); {
	case b.failures != v.checkedFailures.Load() && failedAt != 0:
		v.settleFrom.Store(failedAt)
	case b.opens != v.settledOpens.Load():
		v.settleFrom.Store(v.openedAt.Load())
	}
	return b
}

// Missed notes a heartbeat that failed: the other Limiters' failed too,
// likely (Redis refused them all, or shed them under load), for long
// enough to be trimmed, and each is back only at its next heartbeat, so
// the next RejoinBeats counts may raise the count but not lower it.
func (v *View) Missed() { v.rejoining.Store(RejoinBeats) }

// Learn takes what heartbeat b's reply r says of the fleet, at process on
// the process clock and clock on the Limiter's (period is the heartbeat
// interval, µs): the count of live Limiters, never lowered by a kicked
// beat (one between two of the period's), a rejoining one (see Missed), or
// a set younger than three periods (Redis lost it: a restart without
// persistence, a failover), and never below 1; a loss of Redis' data (an
// epoch newer than the one this Limiter announced itself in); the
// Limiters not settled; and that the openings and failures b began with
// are settled.
func (v *View) Learn(b Beat, r Reply, kicked bool, period, process, clock int64) {
	live := r.Live
	rejoining := v.rejoining.Load() > 0
	if rejoining && !kicked {
		v.rejoining.Add(-1)
	}
	if r.Age < 3*period || rejoining || kicked {
		live = max(live, v.live.Load())
	}
	if old := v.epoch.Swap(r.Epoch); old != 0 && r.Epoch != old {
		// A set that ran out while every Limiter was away keeps its
		// epoch (see lua/fleet.lua).
		v.lost.Store(&Loss{Process: process, Clock: clock, Redis: r.Now, Age: max(0, r.Now-r.LostBy)})
	}
	v.live.Store(max(1, live))
	v.unsettled.Store(r.Unsettled)
	if from := v.settleFrom.Load(); from != 0 && r.Now-from >= 3*period {
		v.settleFrom.Store(0) // a Limiter that has not announced itself since is trimmed
	}
	v.settledOpens.Store(b.opens)
	if v.checkedFailures.Swap(b.failures) != b.failures {
		v.failedAt.Store(0)
	}
}

// Settled reports whether a heartbeat since the last opening of this
// Limiter's breaker, and since its last failed call, has told which other
// Limiters may owe Redis and whether Redis lost its data.
func (v *View) Settled() bool {
	return v.opens.Load() == v.settledOpens.Load() && v.failures.Load() == v.checkedFailures.Load()
}

// TrySettle reports whether a settling heartbeat may go at process: none
// was tried in the last every µs. It counts the try.
func (v *View) TrySettle(process, every int64) bool {
	if last := v.settleTried.Load(); last != 0 && process-last < every {
		return false
	}
	v.settleTried.Store(process)
	return true
}

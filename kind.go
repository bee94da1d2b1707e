package ratelimit

import (
	"fmt"
	"time"
)

// algorithm is everything one kind of limit does its own way. Each kind is
// one type in its own file, next to its local meter: slidingKind
// (slidinglog.go), counterKind (counter.go, a SlidingLog rule with
// Approximate), gcraKind (gcra.go) and quotaKind (quota.go). A plan holds
// its kind's algorithm; the rest of the package asks it, and never which
// kind a plan has. Adding a kind is a new file pair (Go and Lua), a line in
// kinds below, README and tests.
//
// The methods take the plan they belong to, so that the kinds are values
// without state, compared with == (the shield and the write-back match a
// plan's kind that way).
type algorithm interface {
	// name is the kind's name, as Kind.String gives it.
	name() string
	// compile checks the rule's kind-dependent fields (each once, against
	// the kind it belongs to) and sets the plan's; it returns what is
	// wrong, or "".
	compile(r *Rule, p *plan) string
	// capacity names what n may not exceed: "Rate", or GCRA's "Burst".
	capacity() string

	// timed reports whether the call's time fixes part of the plan (a
	// quota's period); then setTime sets it, on a copy of a shared plan,
	// and the script decides at the call's time whatever the clock.
	timed() bool
	setTime(p *plan, now int64)

	// letter is the last letter of the Redis key of the pair's events
	// (see redisKeys).
	letter() byte
	// scripts are the entries composed with the kind's pieces: its
	// decision, its undo and its write-back.
	scripts() *kindScripts
	// args returns allow.lua's ARGV[2] and ARGV[5] (see lua/allow.lua);
	// member reports that ARGV[5] is the call's member id instead.
	args(p plan) (second, fifth int64, member bool)
	// undoArgs returns undo.lua's ARGV[4] and ARGV[5] for events allowed
	// in the counter's fixed window win (see lua/undo.lua).
	undoArgs(p plan, win int64) (fourth, fifth int64)
	// windowed reports whether the script's reply ends with the fixed
	// window its events went into (decision.win).
	windowed() bool
	// grouped says why AllowGroup does not take the kind ("" when it
	// does).
	grouped() (why string)
	// leased reports whether the kind hands out leases (see Acquire): the
	// rate methods refuse it, its rejections are never cached (a release
	// may free a slot at any moment), and its events are always recorded
	// under their lease's id.
	leased() bool

	// degrade sets what the degraded share scales of p beside its rate.
	degrade(p *plan, s *settings)
	// shieldMark is what else a cached rejection must match of the plan
	// (see shielded); horizon is the latest time it may hold to.
	shieldMark(p plan) int64
	horizon(p plan) int64

	// The local meter of a pair, kept in its shard (the caller holds the
	// shard's lock): newMeters makes a shard's table of the kind's meters
	// (see meterMakers), and meterName names them (see
	// Limiter.LocalMeters); meter returns it, creating it if asked to; unrecord
	// takes n events at now back; dropEmpty forgets it when it holds
	// nothing at now; forget forgets it.
	newMeters(size int) meterTable
	meterName() string
	meter(sh *localShard, k *lkey, h uint64, p *plan, now int64, create bool) (meter, bool)
	unrecord(sh *localShard, k *lkey, h uint64, p *plan, now, n int64)
	dropEmpty(sh *localShard, k *lkey, h uint64, now int64)
	forget(sh *localShard, k *lkey, h uint64)

	// The write-back (see writeback.go): stamp is what an event allowed
	// at now is owed under, dueFrom the oldest stamp still worth writing
	// back at now, kept how long what the state holds at now can still
	// count (µs), and named whether events are written back under the
	// member id of the call that may have run on Redis.
	stamp(p plan, now int64) int64
	dueFrom(p plan, now int64) int64
	kept(p plan, now int64) int64
	named() bool
}

// kinds is the registry: the algorithm of each Kind. A SlidingLog rule with
// Approximate is the approximate counter's.
var kinds = [...]algorithm{
	SlidingLog:    slidingKind{},
	GCRA:          gcraKind{},
	CalendarQuota: quotaKind{},
	Concurrency:   concurrencyKind{},
}

// algorithms is every kind's algorithm, the approximate counter's included.
var algorithms = [...]algorithm{slidingKind{}, counterKind{}, gcraKind{}, quotaKind{}, concurrencyKind{}}

// algorithmOf returns the algorithm of r's Kind, or what is wrong.
func algorithmOf(r *Rule) (algorithm, string) {
	switch {
	case r.Kind < 0 || int(r.Kind) >= len(kinds):
		return nil, fmt.Sprintf("unknown Kind %d", int(r.Kind))
	case r.Approximate && r.Kind != SlidingLog:
		return nil, fmt.Sprintf("Approximate is for the sliding log only, not for %v", r.Kind)
	case r.Approximate:
		return counterKind{}, ""
	}
	return kinds[r.Kind], ""
}

// String returns the kind's name: "sliding log", "gcra", "calendar quota"
// or "concurrency".
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kinds) {
		return kinds[k].name()
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// windowKind holds what the kinds with a Window share: their Window checks,
// and a state that counts for two windows.
type windowKind struct{}

func (windowKind) timed() bool                { return false }
func (windowKind) setTime(*plan, int64)       {}
func (windowKind) degrade(*plan, *settings)   {}
func (windowKind) shieldMark(plan) int64      { return 0 }
func (windowKind) horizon(plan) int64         { return maxTime }
func (windowKind) kept(p plan, _ int64) int64 { return 2 * p.window }
func (windowKind) capacity() string           { return "Rate" }
func (windowKind) leased() bool               { return false }

// checkWindow checks the fields of a rule whose Limit is a Rate per Window:
// Window, and no Burst, Period or Location unless burst says Burst is its.
func checkWindow(r *Rule, burst bool) string {
	l := &r.Limit
	switch {
	case l.Window < time.Microsecond:
		return fmt.Sprintf("Window %v is shorter than 1µs", l.Window)
	case l.Window.Microseconds() > maxMicros:
		return fmt.Sprintf("Window %v is too long", l.Window)
	case l.Burst != 0 && !burst:
		return fmt.Sprintf("Burst %d is for GCRA only", l.Burst)
	case l.Period != 0:
		return fmt.Sprintf("Period %v is for CalendarQuota only", l.Period)
	case l.Location != nil:
		return "Location is for CalendarQuota only"
	}
	return ""
}

// The calls of the hot path reach the kinds below through a type switch,
// not through the interface: the compiler then sees which method runs, and
// the key and plan they take stay on the caller's stack (through an
// interface, every pointer argument would move to the heap, an allocation
// per call). A kind without a case here still works, through the
// interface, on copies of the key and the plan (which the interface moves
// to the heap).

// meter returns k's meter under p (see algorithm.meter).
func (p *plan) meter(sh *localShard, k *lkey, h uint64, now int64, create bool) (meter, bool) {
	switch a := p.alg.(type) {
	case slidingKind:
		return a.meter(sh, k, h, p, now, create)
	case concurrencyKind:
		return a.meter(sh, k, h, p, now, create)
	case counterKind:
		return a.meter(sh, k, h, p, now, create)
	case gcraKind:
		return a.meter(sh, k, h, p, now, create)
	case quotaKind:
		return a.meter(sh, k, h, p, now, create)
	}
	kc, pc := *k, *p
	return p.alg.meter(sh, &kc, h, &pc, now, create)
}

// unreserve takes n events at now back from k's meter, and with drop
// forgets the meter when that leaves it empty (see algorithm.unrecord,
// dropEmpty).
func (p *plan) unreserve(sh *localShard, k *lkey, h uint64, now, n int64, drop bool) {
	p.unrecord(sh, k, h, now, n)
	if drop {
		p.dropEmpty(sh, k, h, now)
	}
}

// unrecord takes n events at now back from k's meter (see
// algorithm.unrecord).
func (p *plan) unrecord(sh *localShard, k *lkey, h uint64, now, n int64) {
	switch a := p.alg.(type) {
	case slidingKind:
		a.unrecord(sh, k, h, p, now, n)
	case concurrencyKind:
		a.unrecord(sh, k, h, p, now, n)
	case counterKind:
		a.unrecord(sh, k, h, p, now, n)
	case gcraKind:
		a.unrecord(sh, k, h, p, now, n)
	case quotaKind:
		a.unrecord(sh, k, h, p, now, n)
	default:
		kc, pc := *k, *p
		p.alg.unrecord(sh, &kc, h, &pc, now, n)
	}
}

// dropEmpty forgets k's meter when it holds nothing at now (see
// algorithm.dropEmpty).
func (p *plan) dropEmpty(sh *localShard, k *lkey, h uint64, now int64) {
	switch a := p.alg.(type) {
	case slidingKind:
		a.dropEmpty(sh, k, h, now)
	case concurrencyKind:
		a.dropEmpty(sh, k, h, now)
	case counterKind:
		a.dropEmpty(sh, k, h, now)
	case gcraKind:
		a.dropEmpty(sh, k, h, now)
	case quotaKind:
		a.dropEmpty(sh, k, h, now)
	default:
		kc := *k
		p.alg.dropEmpty(sh, &kc, h, now)
	}
}

// setTime sets what the call's time fixes of p (see algorithm.timed).
func (p *plan) setTime(now int64) {
	if a, ok := p.alg.(quotaKind); ok {
		a.setTime(p, now)
		return
	}
	pc := *p
	p.alg.setTime(&pc, now)
	*p = pc
}

// degrade sets what the degraded share scales of p (see
// algorithm.degrade).
func (p *plan) degrade(s *settings) {
	if a, ok := p.alg.(gcraKind); ok {
		a.degrade(p, s)
		return
	}
	pc := *p
	p.alg.degrade(&pc, s)
	*p = pc
}

// compile checks r's kind-dependent fields and sets p's (see
// algorithm.compile).
func (p *plan) compile(r *Rule) string {
	switch a := p.alg.(type) {
	case slidingKind:
		return a.compile(r, p)
	case concurrencyKind:
		return a.compile(r, p)
	case counterKind:
		return a.compile(r, p)
	case gcraKind:
		return a.compile(r, p)
	case quotaKind:
		return a.compile(r, p)
	}
	rc, pc := *r, *p
	bad := p.alg.compile(&rc, &pc)
	*p = pc
	return bad
}

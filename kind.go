package ratelimit

import (
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// algorithm is one kind of limit, as each part of the package asks it: the
// rule's checks (ruleKind), the local meter (localKind), the Redis script
// and its arguments (redisKind), the shield's marks (shieldKind), and the
// write-back's stamps (writeBackKind). Each kind is one type in its own file
// beside its lua/ file, its meter's state and arithmetic in an internal
// package (the meter.Meter it returns): slidingKind (slidinglog.go, an
// eventlog.Log), counterKind (counter.go, a SlidingLog rule with
// Approximate, a meter.Counter), gcraKind (gcra.go, a meter.Bucket),
// quotaKind (quota.go, a meter.Quota), concurrencyKind (concurrency.go,
// an eventlog.Log), fixedKind (fixedwindow.go, a meter.FixedWindow). A
// plan holds its kind's algorithm, the one the registry below made for
// it, compared by pointer (the shield and the write-back match a plan's
// kind that way); the rest of the package asks it, never which kind a plan
// has. Adding a kind is a Go file and a Lua file, a line in the registry,
// README and docs/, and tests.
//
// The kinds are values without state. Their methods take what they need
// by value: a pointer passed through an interface moves what it points to
// to the heap, an allocation per call.
type algorithm struct {
	rules  ruleKind
	local  localKind
	redis  redisKind
	shield shieldKind
	back   writeBackKind
}

// ruleKind is what compiling and checking a rule asks a kind.
type ruleKind interface {
	// name is the kind's name, as Kind.String gives it.
	name() string
	// compile checks the rule's kind-dependent fields (each once, against
	// the kind it belongs to) and returns p with the kind's fields set,
	// and what is wrong, or "".
	compile(r Rule, p plan) (plan, string)
	// capacity names what n may not exceed: "Rate", or GCRA's "Burst".
	capacity() string
	// timed reports whether the call's time fixes part of the plan (a
	// quota's period); then setTime returns p with it set, and the script
	// decides at the call's time whatever the clock.
	timed() bool
	setTime(p plan, now int64) plan
	// degrade returns p with what the degraded share scales of it beside
	// its rate.
	degrade(p plan, s *settings) plan
	// grouped says why AllowGroup does not take the kind ("" when it
	// does).
	grouped() (why string)
	// leased reports whether the kind hands out leases (see Acquire): the
	// rate methods refuse it, its rejections are never cached (a release
	// may free a slot at any moment), and its events are always recorded
	// under their lease's id.
	leased() bool
}

// localKind is the kind's local meter of a pair, kept in its table among
// the shard's meterTables, all of the shard a kind sees (the caller holds
// the shard's lock). Its methods are given the
// plan's numbers a meter is fitted to (meterFit), not the plan: a call
// copies its arguments, and a plan is many times larger.
type localKind interface {
	// newMeters makes a shard's table of the kind's meters (see
	// slotOwners), and meterName names them (see Limiter.LocalMeters).
	newMeters(size int) meterTable
	meterName() string
	// meter returns k's meter fitted to f, creating it if asked to. Its
	// arguments are in the order that passes f in registers, loaded from
	// the plan, and k on the stack, copied from the call's key.
	meter(ms *meterTables, f meterFit, h uint64, now int64, create bool, k lkey) (meter.Meter, bool)
	// unrecord takes n events at now back from k's meter.
	unrecord(ms *meterTables, k lkey, h uint64, f meterFit, now, n int64)
	// dropEmpty forgets k's meter when it holds nothing at now.
	dropEmpty(ms *meterTables, k lkey, h uint64, now int64)
}

// meterFit is what of a plan a kind's local meter is fitted to, and its
// events taken back under; each kind reads its own. It is the first part
// of the plan (see plan).
type meterFit struct {
	rate   int64 // the capacity decide compares count + n with: Rate, or GCRA's Burst
	window int64 // µs: Window (0 for a CalendarQuota); the fixed window's size, the counter's windows
	// GCRA: Window/Rate normalised (see setGCRA, meter.Bucket.Fit).
	wq, rq int64
	// CalendarQuota: the bounds of the period that holds the call's
	// time (µs), set by the kind's setTime (see meter.Quota.SetPeriod).
	start, end int64
}

// redisKind is what the Redis path asks a kind.
type redisKind interface {
	// letter is the last letter of the Redis key of the pair's meter
	// (see redisKeys).
	letter() byte
	// scripts are the entries composed with the kind's pieces: its
	// decision, its undo and its write-back.
	scripts() *kindScripts
	// args returns allow.lua's ARGV[2] and ARGV[5] (see lua/allow.lua);
	// member reports that ARGV[5] is the call's member id instead.
	args(p plan) (second, fifth int64, member bool)
	// undoArgs returns undo.lua's ARGV[3] and ARGV[4] for events allowed
	// in the fixed window win (see lua/undo.lua).
	undoArgs(p plan, win int64) (third, fourth int64)
	// windowed reports whether the script's reply ends with the fixed
	// window its events went into (decision.win; the kind's <kind>.tail
	// piece).
	windowed() bool
}

// shieldKind is what the hot-key shield asks a kind: shieldMark is what
// else a cached rejection must match of the plan (see shielded); horizon
// is the latest time it may hold to.
type shieldKind interface {
	shieldMark(p plan) int64
	horizon(p plan) int64
}

// writeBackKind is what the write-back and the fleet's reserve ask a kind
// of what Redis lacks (see writeback.go and fleet.go): stamp is what an
// event allowed at now is owed under, dueFrom the oldest stamp still worth
// writing back at now, kept how long what the state holds at now can still
// count (µs), and named whether events are written back under the member
// id of the call that may have run on Redis. lost says how much of what
// Redis lost at at still counts at now: of events (the others' shares
// the reserve counts, see Limiter.reserve), how many a decision at now
// must count, and whether the loss counts at all (the process' own count
// is then owed whole). Events lost at at were recorded at at or before it.
type writeBackKind interface {
	stamp(p plan, now int64) int64
	dueFrom(p plan, now int64) int64
	kept(p plan, now int64) int64
	named() bool
	lost(p plan, at, now, events int64) (int64, bool)
}

// kindParts is a kind's type: every part the package asks of it.
type kindParts interface {
	ruleKind
	localKind
	redisKind
	shieldKind
	writeBackKind
}

// register returns the algorithm of kind.
func register(kind kindParts) *algorithm {
	return &algorithm{rules: kind, local: kind, redis: kind, shield: kind, back: kind}
}

// The registry: the algorithm of each kind.
var (
	algSliding     = register(slidingKind{})
	algCounter     = register(counterKind{})
	algGCRA        = register(gcraKind{})
	algQuota       = register(quotaKind{})
	algConcurrency = register(concurrencyKind{})
)

// kinds is the algorithm of each Kind. A SlidingLog rule with Approximate
// is the approximate counter's.
var kinds = [...]*algorithm{
	SlidingLog:    algSliding,
	GCRA:          algGCRA,
	CalendarQuota: algQuota,
	Concurrency:   algConcurrency,
	FixedWindow:   algFixed,
}

// algorithms is every kind's algorithm, the approximate counter's included.
var algorithms = [...]*algorithm{algSliding, algCounter, algGCRA, algQuota, algConcurrency, algFixed}

// algorithmOf returns the algorithm of r's Kind, or what is wrong.
func algorithmOf(r *Rule) (*algorithm, string) {
	switch {
	case r.Kind < 0 || int(r.Kind) >= len(kinds) || kinds[r.Kind] == nil:
		return nil, fmt.Sprintf("unknown Kind %d", int(r.Kind))
	case r.Approximate && r.Kind != SlidingLog:
		return nil, fmt.Sprintf("Approximate is for the sliding log only, not for %v", r.Kind)
	case r.Approximate:
		return algCounter, ""
	}
	return kinds[r.Kind], ""
}

// String returns the kind's name: "sliding log", "gcra", "calendar quota",
// "concurrency" or "fixed window".
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kinds) && kinds[k] != nil {
		return kinds[k].rules.name()
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// windowKind holds what the kinds with a Window share: their Window checks,
// and a state that counts for two windows.
type windowKind struct{}

func (windowKind) timed() bool                      { return false }
func (windowKind) setTime(p plan, _ int64) plan     { return p }
func (windowKind) degrade(p plan, _ *settings) plan { return p }
func (windowKind) shieldMark(plan) int64            { return 0 }
func (windowKind) horizon(plan) int64               { return maxTime }
func (windowKind) kept(p plan, _ int64) int64       { return 2 * p.window }

// lost: an event of the exact log counts for a Window after it was
// recorded, so what Redis lost at at counts, whole, until at + Window.
func (windowKind) lost(p plan, at, now, events int64) (int64, bool) {
	if now-at < p.window {
		return events, true
	}
	return 0, false
}
func (windowKind) capacity() string { return "Rate" }
func (windowKind) leased() bool     { return false }

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

// unreserve takes n events at now back from k's meter, and with drop
// forgets the meter when that leaves it empty (see localKind). Events
// recorded under id (not 0) in a meter that keeps records by id (see
// recordKeeper) are given back by it: no record, nothing given back.
func (p *plan) unreserve(sh *localShard, k *lkey, h uint64, now, n int64, id uint64, drop bool) {
	if rk, ok := p.alg.local.(recordKeeper); ok && id != 0 {
		rk.settleAs(&sh.meters, *k, h, p.meterFit, id, n)
	} else {
		p.alg.local.unrecord(&sh.meters, *k, h, p.meterFit, now, n)
	}
	if drop {
		p.alg.local.dropEmpty(&sh.meters, *k, h, now)
	}
}

// recordKeeper is a kind whose meter keeps what a reservation took as a
// record of its own, by the reservation's id (in this process the number of
// the call that took it, see undo.rec; in Redis its member id): GCRA, whose bucket cannot
// give tokens back by moving its TAT (see meter.Bucket). The other
// kinds keep a reservation's record in a Redis key beside the meter
// (allow.lua's Reserve) and take events back from their meter. A
// reservation of such a kind, and an AllowAll pair of it that a later pair
// may undo, is recorded under its id on every path (see undo.records):
// in this process' meter (meter.IDMeter) and in Redis' (its kind's <kind>.hold
// piece), and given back by that id.
type recordKeeper interface {
	// settleAs gives back d of the events the reservation id holds in
	// k's meter (d = 0 settles it at its cost), and reports whether the
	// meter held it.
	settleAs(ms *meterTables, k lkey, h uint64, f meterFit, id uint64, d int64) bool
}

// keepsRecords reports whether p's kind keeps reservations' records in
// its meter (see recordKeeper).
func (p *plan) keepsRecords() bool {
	_, ok := p.alg.local.(recordKeeper)
	return ok
}

// addTo records n events at now in m under p, under id when it is not 0
// and m keeps records by id. (An id is a number, not the member string: a
// string read from a call's leg and passed on would move the call's plan
// to the heap.)
func addTo(m meter.Meter, p *plan, now, n int64, id uint64) {
	if id != 0 {
		if im, ok := m.(meter.IDMeter); ok {
			im.AddAs(now, n, id)
			return
		}
	}
	m.Add(now, p.window, n)
}

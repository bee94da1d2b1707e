// Package meter holds the local meters of the kinds that keep a few numbers
// per key: what the local path counts of one (rule, key) pair, as the
// kind's lua/*.lua file counts it in Redis, with the same integers (or the
// same floating-point operations in the same order). A meter is pure state
// and arithmetic: no locks (its shard's lock in the root package guards
// it), no Redis, no clock (every method takes the time, in µs).
//
// The meters are
//
//   - [Bucket], the GCRA bucket (lua/gcra.lua): its theoretical arrival
//     time, exact in ticks, and its outstanding reservations;
//   - [Counter], the approximate sliding-window counter (lua/counter.lua):
//     two fixed windows' counts;
//   - [Quota], the calendar quota (lua/quota.lua): a period and its count;
//   - [FixedWindow], the fixed window (lua/fixedwindow.lua): a window and
//     its count.
//
// The exact sliding log's meter is internal/eventlog's Log, and satisfies
// [Meter] and [Ager] too. [Meter] is what a local decision asks of each;
// [StateCopier], [Ager], [IDMeter] and [Carrier] are what some of them
// offer beside it. [Carry] is what a process owes Redis' bucket for tokens
// it took without Redis (the root's write-back). The root package keeps each kind's adapter (its plan, its scripts,
// its table of meters) and reaches its meters through these types.
package meter

// Meter is what a local decision needs of a key's record of events. Only
// Prune and Add change it, where the scripts write: a peek, a rejection
// and a banned call read without writing on both paths, so a clock that
// later goes backwards finds the same state in Redis and locally.
type Meter interface {
	// Prune drops what no call can count any more, as an allowing or
	// rejecting call does in Redis.
	Prune(now, window int64)
	// Count returns the count at now.
	Count(now, window int64) int64
	// RetryIn returns how long until asked more events fit under rate;
	// called only when they do not fit now.
	RetryIn(now, window, rate, asked int64) int64
	// Reset returns how long until the record is empty; justAdded says the
	// call has just added events at now.
	Reset(now, window int64, justAdded bool) int64
	// Add records n events at now.
	Add(now, window, n int64)
}

// Ager is a meter that knows when its oldest event still in the window was
// recorded, which lets a script tell the events a Reset voided from those
// it did not (the root package's held.since): the sliding log is one.
type Ager interface {
	// Oldest returns the time of the oldest event still in the window at
	// now (eventlog.MaxTime when there is none).
	Oldest(now, window int64) int64
}

// Stamped is a meter that keeps the time of each event (the sliding
// log), which lets the root package tell the events recorded before a
// loss of Redis' data from those after it.
type Stamped interface {
	// Since returns how many of its events were recorded at from or
	// later.
	Since(from int64) int64
}

// StateCopier is a meter whose whole state a decision of Redis' carries (a
// Bucket, a Quota, a FixedWindow): the root package's mirror merges it into
// its own, keeping the later of the two (Redis may have lost what this
// process recorded; this process does not see what others recorded).
type StateCopier interface {
	// CopyFrom merges Redis' answer for a call at now: its count after
	// the call and reset, µs until its record is empty. It takes the
	// reply's numbers by value: a pointer to the root's decision passed
	// through an interface would move every Redis call's decision to the
	// heap. givenBack is how many events settles may have given back in
	// this process since Redis counted (the root's localShard.backs): the
	// process' count took them back already, and Redis' answer may still
	// hold them.
	CopyFrom(now, count, reset, givenBack int64)
}

// CountReplacer is a StateCopier whose state Redis marks once a give-back
// took events from it (a calendar quota, a fixed window, a GCRA bucket;
// see lua/decide.lua): its copy, which keeps the larger count (the later
// TAT), may then hold events another process gave back, and Redis' state,
// which holds every give-back, replaces it.
type CountReplacer interface {
	// ReplaceFrom sets the state to Redis' answer for a call at now (its
	// count and reset, as StateCopier.CopyFrom takes them), less
	// givenBack.
	ReplaceFrom(now, count, reset, givenBack int64)
}

// IDMeter is a meter that records events under a reservation's id, and
// gives them back by it (a Bucket, see Bucket.Settle).
type IDMeter interface {
	// AddAs records n events at now as the reservation id, and decides as
	// Meter.Add.
	AddAs(now, n int64, id uint64)
}

// FloorDiv returns a / b rounded down (towards minus infinity), for b != 0.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// CeilDiv returns a / b rounded up, for b > 0.
func CeilDiv(a, b int64) int64 { return -FloorDiv(-a, b) }

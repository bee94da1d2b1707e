package ratelimit

import "github.com/ratelimit-go/ratelimit/internal/meter"

// counterKind is the approximate counter's algorithm (a SlidingLog rule
// with Approximate): two fixed windows' counts in a Redis hash
// (lua/counter.lua), a meter.Counter here.
type counterKind struct{ windowKind }

func (counterKind) name() string                              { return "sliding log" }
func (counterKind) compile(r Rule, p plan) (plan, string)     { return p, checkWindow(&r, false) }
func (counterKind) letter() byte                              { return 'c' }
func (counterKind) windowed() bool                            { return true }
func (counterKind) grouped() string                           { return "approximate rules cannot be grouped" }
func (counterKind) dueFrom(p plan, now int64) int64           { return meter.FloorDiv(now, p.window) - 1 }
func (counterKind) named() bool                               { return false }
func (counterKind) undoArgs(_ plan, win int64) (int64, int64) { return win, 0 }

// lost: what Redis lost counts as the counter weighs it
// (meter.CounterLost): through the fixed window after the loss', fading.
func (counterKind) lost(p plan, at, now, events int64) (int64, bool) {
	return meter.CounterLost(p.window, at, now, events)
}

// stamp: the index of the fixed window the event went into.
func (counterKind) stamp(p plan, now int64) int64 { return meter.FloorDiv(now, p.window) }

func (counterKind) scripts() *kindScripts { return counterScripts }

// counterScripts are the entries composed with lua/counter.lua's pieces
// (see composeKind).
var counterScripts = composeKind("counter")

func (counterKind) args(p plan) (int64, int64, bool) { return p.window, 0, false }

func (counterKind) meter(ms *meterTables, _ meterFit, h uint64, now int64, create bool, k lkey) (meter.Meter, bool) {
	if c := metersOf[meter.Counter](ms, counterMeters).GetOrAdd(&k, h, now, create); c != nil {
		return c, true
	}
	return nil, false
}

// unrecord takes events allowed at now back from the fixed window they
// went into while it still counts: the current one, or the one before it
// (as lua/counter.lua's counter.undo).
func (counterKind) unrecord(ms *meterTables, k lkey, h uint64, f meterFit, now, n int64) {
	if c := metersOf[meter.Counter](ms, counterMeters).Peek(&k, h); c != nil {
		c.Unrecord(now, f.window, n)
	}
}

func (counterKind) dropEmpty(ms *meterTables, k lkey, h uint64, _ int64) {
	if c := metersOf[meter.Counter](ms, counterMeters).Peek(&k, h); c != nil && c.Empty() {
		metersOf[meter.Counter](ms, counterMeters).Remove(&k, h)
	}
}

// counterMeters is the slot of the shard's table of counters.
var counterMeters = meterSlot('c')

func (counterKind) newMeters(size int) meterTable { return newMeters[meter.Counter](size) }
func (counterKind) meterName() string             { return "counter" }

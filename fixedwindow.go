package ratelimit

import "github.com/ratelimit-go/ratelimit/internal/meter"

// FixedWindow allows at most Limit.Rate events in each Limit.Window-long
// window aligned to the Unix epoch: [k·Window, (k+1)·Window) for every
// whole k, one count per key (O(1) memory). A spent window comes back
// whole when the next one starts. Its boundary effect: up to 2 × Rate
// events may pass in a Window-long interval that straddles a boundary
// (Rate at the end of one window, Rate at the start of the next); the
// sliding log (SlidingLog) allows Rate in any such interval. Burst, Period
// and Location must be zero, and Approximate false.
const FixedWindow Kind = Concurrency + 1

// algFixed is the fixed window's algorithm (see kind.go's registry).
var algFixed = register(fixedKind{})

// fixedKind is the fixed window's algorithm (Kind FixedWindow): the window
// and its count in a Redis string (lua/fixedwindow.lua), a
// meter.FixedWindow here.
type fixedKind struct{ windowKind }

func (fixedKind) name() string                              { return "fixed window" }
func (fixedKind) compile(r Rule, p plan) (plan, string)     { return p, checkWindow(&r, false) }
func (fixedKind) grouped() string                           { return "" }
func (fixedKind) letter() byte                              { return 'f' }
func (fixedKind) scripts() *kindScripts                     { return fixedScripts }
func (fixedKind) windowed() bool                            { return true }
func (fixedKind) args(p plan) (int64, int64, bool)          { return p.window, 0, false }
func (fixedKind) undoArgs(_ plan, win int64) (int64, int64) { return win, 0 }
func (fixedKind) named() bool                               { return false }

// fixedScripts are the entries composed with lua/fixedwindow.lua's pieces
// (see composeKind).
var fixedScripts = composeKind("fixed")

// stamp: the index of the window the event went into; only the current
// window's events still count, until it ends.
func (fixedKind) stamp(p plan, now int64) int64   { return meter.FloorDiv(now, p.window) }
func (fixedKind) dueFrom(p plan, now int64) int64 { return meter.FloorDiv(now, p.window) }
func (fixedKind) kept(p plan, now int64) int64 {
	return (meter.FloorDiv(now, p.window)+1)*p.window - now
}

// lost: a fixed window counts only its own events, so what Redis lost at
// at counts, whole, until the window that holds at ends.
func (fixedKind) lost(p plan, at, now, events int64) (int64, bool) {
	if meter.FloorDiv(now, p.window) <= meter.FloorDiv(at, p.window) {
		return events, true
	}
	return 0, false
}

// fixedMeters is the slot of the shard's table of fixed windows.
var fixedMeters = meterSlot('f')

func (fixedKind) newMeters(size int) meterTable { return newMeters[meter.FixedWindow](size) }
func (fixedKind) meterName() string             { return "fixed_window" }

func (fixedKind) meter(ms *meterTables, mf meterFit, h uint64, now int64, create bool, k lkey) (meter.Meter, bool) {
	f := metersOf[meter.FixedWindow](ms, fixedMeters).GetOrAdd(&k, h, now, create)
	if f == nil {
		return nil, false
	}
	f.SetSize(mf.window)
	return f, true
}

// unrecord takes events back from the current window only: once the count
// has moved on they no longer count (as lua/fixedwindow.lua's undo).
func (fixedKind) unrecord(ms *meterTables, k lkey, h uint64, mf meterFit, now, n int64) {
	if f := metersOf[meter.FixedWindow](ms, fixedMeters).Peek(&k, h); f != nil {
		f.Unrecord(now, mf.window, n)
	}
}

func (fixedKind) dropEmpty(ms *meterTables, k lkey, h uint64, _ int64) {
	if f := metersOf[meter.FixedWindow](ms, fixedMeters).Peek(&k, h); f != nil && f.Empty() {
		metersOf[meter.FixedWindow](ms, fixedMeters).Remove(&k, h)
	}
}

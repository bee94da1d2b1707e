package ratelimit

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

// fixedWindow is the local path's fixed-window counter of one key (Kind
// FixedWindow): the window its count belongs to and the count.
// lua/fixedwindow.lua keeps the same two numbers in Redis. A count of an
// earlier window than the call's counts as 0; a clock that went back into
// an earlier window counts as still in the current one. Its shard's lock
// guards it.
type fixedWindow struct {
	win  int64 // index of the window the count belongs to: time / size
	n    int64 // events in it
	size int64 // µs: the rule's Window, set by fixedKind.meter from its plan
}

// view returns the window now is in (or the later one the count belongs
// to) and its events.
func (f *fixedWindow) view(now, window int64) (win, n int64) {
	if idx := floorDiv(now, window); idx > f.win {
		return idx, 0
	}
	return f.win, f.n
}

// Prune does nothing: like lua/fixedwindow.lua, the count moves to a new
// window only when it records events there.
func (f *fixedWindow) Prune(int64, int64) {}

func (f *fixedWindow) Count(now, window int64) int64 {
	_, n := f.view(now, window)
	return n
}

// RetryIn returns how long until the window ends: a spent window comes
// back only with the next.
func (f *fixedWindow) RetryIn(now, window, _, _ int64) int64 {
	win, _ := f.view(now, window)
	return (win+1)*window - now
}

func (f *fixedWindow) Reset(now, window int64, _ bool) int64 {
	if win, n := f.view(now, window); n > 0 {
		return (win+1)*window - now
	}
	return 0
}

func (f *fixedWindow) Add(now, window, n int64) {
	f.win, f.n = f.view(now, window)
	f.n += n
}

// copyFrom merges what Redis answered into the count: count events in the
// call's window less the givenBack that settles may have given back since,
// unless the count holds more of them itself.
func (f *fixedWindow) copyFrom(now, count, _, givenBack int64) {
	win, n := f.view(now, f.size)
	f.win, f.n = win, max(n, count-givenBack)
}

// fixedKind is the fixed window's algorithm (Kind FixedWindow): the window
// and its count in a Redis string (lua/fixedwindow.lua), a fixedWindow
// here.
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
func (fixedKind) stamp(p plan, now int64) int64   { return floorDiv(now, p.window) }
func (fixedKind) dueFrom(p plan, now int64) int64 { return floorDiv(now, p.window) }
func (fixedKind) kept(p plan, now int64) int64 {
	return (floorDiv(now, p.window)+1)*p.window - now
}

// lost: a fixed window counts only its own events, so what Redis lost at
// at counts, whole, until the window that holds at ends.
func (fixedKind) lost(p plan, at, now, events int64) (int64, bool) {
	if floorDiv(now, p.window) <= floorDiv(at, p.window) {
		return events, true
	}
	return 0, false
}

// fixedMeters is the slot of the shard's table of fixed windows.
var fixedMeters = meterSlot('f')

func (fixedKind) newMeters(size int) meterTable { return newMeters[fixedWindow](size) }
func (fixedKind) meterName() string             { return "fixed_window" }

func (fixedKind) meter(sh *localShard, k lkey, h uint64, p plan, now int64, create bool) (meter, bool) {
	f := metersOf[fixedWindow](sh, fixedMeters).GetOrAdd(&k, h, now, create)
	if f == nil {
		return nil, false
	}
	f.size = p.window
	return f, true
}

// unrecord takes events back from the current window only: once the count
// has moved on they no longer count (as lua/fixedwindow.lua's undo).
func (fixedKind) unrecord(sh *localShard, k lkey, h uint64, p plan, now, n int64) {
	if f := metersOf[fixedWindow](sh, fixedMeters).Peek(&k, h); f != nil && f.win == floorDiv(now, p.window) {
		f.n = max(0, f.n-n)
	}
}

func (fixedKind) dropEmpty(sh *localShard, k lkey, h uint64, _ int64) {
	if f := metersOf[fixedWindow](sh, fixedMeters).Peek(&k, h); f != nil && f.n == 0 {
		metersOf[fixedWindow](sh, fixedMeters).Remove(&k, h)
	}
}

package meter

// FixedWindow is the local path's fixed-window counter of one key (Kind
// FixedWindow): the window its count belongs to and the count.
// lua/fixedwindow.lua keeps the same two numbers in Redis. A count of an
// earlier window than the call's counts as 0; a clock that went back into
// an earlier window counts as still in the current one. The zero
// FixedWindow is empty; SetSize gives it the rule's Window before
// CopyFrom is called.
type FixedWindow struct {
	win  int64 // index of the window the count belongs to: time / size
	n    int64 // events in it
	size int64 // µs: the rule's Window, set by SetSize from its plan
}

// SetSize sets the rule's Window, in µs, which CopyFrom counts in.
func (f *FixedWindow) SetSize(window int64) { f.size = window }

// view returns the window now is in (or the later one the count belongs
// to) and its events.
func (f *FixedWindow) view(now, window int64) (win, n int64) {
	if idx := FloorDiv(now, window); idx > f.win {
		return idx, 0
	}
	return f.win, f.n
}

// Prune does nothing: like lua/fixedwindow.lua, the count moves to a new
// window only when it records events there.
func (f *FixedWindow) Prune(int64, int64) {}

// Count returns the events of the window now is in.
func (f *FixedWindow) Count(now, window int64) int64 {
	_, n := f.view(now, window)
	return n
}

// RetryIn returns how long until the window ends: a spent window comes
// back only with the next.
func (f *FixedWindow) RetryIn(now, window, _, _ int64) int64 {
	win, _ := f.view(now, window)
	return (win+1)*window - now
}

// Reset returns how long until the window ends, when it counts events.
func (f *FixedWindow) Reset(now, window int64, _ bool) int64 {
	if win, n := f.view(now, window); n > 0 {
		return (win+1)*window - now
	}
	return 0
}

// Add moves the count to now's window and records n events there.
func (f *FixedWindow) Add(now, window, n int64) {
	f.win, f.n = f.view(now, window)
	f.n += n
}

// CopyFrom merges what Redis answered into the count: count events in the
// call's window less the givenBack that settles may have given back since,
// unless the count holds more of them itself.
func (f *FixedWindow) CopyFrom(now, count, _, givenBack int64) {
	win, n := f.view(now, f.size)
	f.win, f.n = win, max(n, count-givenBack)
}

// ReplaceFrom sets the count to count events in now's window less the
// givenBack that settles may have given back since (see CountReplacer).
func (f *FixedWindow) ReplaceFrom(now, count, _, givenBack int64) {
	win, _ := f.view(now, f.size)
	f.win, f.n = win, max(0, count-givenBack)
}

// Unrecord takes n events allowed at now back from the current window
// only: once the count has moved on they no longer count (as
// lua/fixedwindow.lua's undo).
func (f *FixedWindow) Unrecord(now, window, n int64) {
	if f.win == FloorDiv(now, window) {
		f.n = max(0, f.n-n)
	}
}

// Empty reports whether the count holds no events.
func (f *FixedWindow) Empty() bool { return f.n == 0 }

package testkit

import (
	"slices"
	"time"
)

// Span is one call that recorded N events, timed by the wall clock around
// it: it was decided somewhere between Start and End.
type Span struct {
	Start, End time.Time
	N          int
}

// MostContained returns the most events of calls whose whole [Start, End]
// lies inside one interval shorter than window, and where that interval
// starts: the containment criterion. A call is decided between its start
// and its return, so those calls were decided within one window, and a
// limit of Rate per window allows at most Rate of their events, whatever
// the scheduling. The limiter keeps time in whole microseconds (exact "to
// the microsecond"), so two calls less than 1µs from exactly a window
// apart may both count as a window apart: the intervals here are shorter
// than the window by that resolution.
func MostContained(spans []Span, window time.Duration) (most int, at time.Time) {
	window -= time.Microsecond
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b Span) int { return a.Start.Compare(b.Start) })
	for i, first := range spans {
		limit := first.Start.Add(window)
		n := 0
		for _, s := range spans[i:] {
			if !s.Start.Before(limit) {
				break
			}
			if s.End.Before(limit) {
				n += s.N
			}
		}
		if n > most {
			most, at = n, first.Start
		}
	}
	return most, at
}

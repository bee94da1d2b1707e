package testkit

import (
	"testing"
	"time"
)

// TestMostContained: calls count together only when both lie inside one
// interval shorter than the window (less its 1µs resolution).
func TestMostContained(t *testing.T) {
	t0 := Epoch()
	at := func(from, to time.Duration, n int) Span { return Span{Start: t0.Add(from), End: t0.Add(to), N: n} }
	w := time.Second
	for _, c := range []struct {
		name  string
		spans []Span
		want  int
	}{
		{"none", nil, 0},
		{"one window", []Span{at(0, 1, 1), at(500*time.Millisecond, 600*time.Millisecond, 2)}, 3},
		{"a call that ends past the window", []Span{at(0, 1, 1), at(500*time.Millisecond, 1001*time.Millisecond, 2)}, 2},
		{"exactly a window apart", []Span{at(0, 1, 1), at(w, w+1, 1)}, 1},
		{"within the resolution", []Span{at(0, 1, 1), at(w-time.Microsecond, w-time.Microsecond+1, 1)}, 1},
		{"just inside", []Span{at(0, 1, 1), at(w-2*time.Microsecond, w-2*time.Microsecond+1, 1)}, 2},
	} {
		if got, _ := MostContained(c.spans, w); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

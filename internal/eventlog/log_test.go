package eventlog

import (
	"math/rand/v2"
	"testing"
)

func TestLogKeepsTimeOrder(t *testing.T) {
	var l Log
	for _, at := range []int64{10, 30, 20, 30, 5, 40} {
		l.Record(at, 1)
	}
	want := []Event{{5, 1}, {10, 1}, {20, 1}, {30, 2}, {40, 1}}
	if got := entries(&l); len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i, e := range entries(&l) {
		if e != want[i] {
			t.Fatalf("events %v, want %v", entries(&l), want)
		}
	}
	if l.Count(29, 10) != 4 || l.RetryIn(29, 10, 4, 1) != 1 || l.Reset(29, 10, false) != 21 || l.head != 0 {
		t.Fatalf("at 29: count %d retry %d reset %d head %d", l.Count(29, 10), l.RetryIn(29, 10, 4, 1), l.Reset(29, 10, false), l.head)
	}
	l.Prune(29, 10) // keeps t0 > 9: a window more than counting needs
	l.Drop(l.gone)  // what a full ring does
	if l.head != 1 || l.total != 5 {
		t.Fatalf("prune left head %d total %d", l.head, l.total)
	}
	l.Prune(39, 10) // keeps t0 > 19
	l.Drop(l.gone)
	if l.head != 2 || l.total != 4 {
		t.Fatalf("prune left head %d total %d", l.head, l.total)
	}
	l.Bound(2)
	if l.total != 2 || *l.at(l.head) != (Event{30, 1}) {
		t.Fatalf("bound(2) left %v", entries(&l))
	}
}

// entries returns l's entries, the oldest first.
func entries(l *Log) []Event {
	e, _ := l.AppendEntries(nil, l.tail-l.head)
	return e
}

// TestLogReusesItsRoom: a log that prunes and adds as the local
// path does at a steady rate stops growing and allocates nothing.
func TestLogReusesItsRoom(t *testing.T) {
	var l Log
	for at := int64(0); at < 64; at++ {
		l.Prune(at, 8)
		l.Add(at, 8, 1)
	}
	room := len(l.ring)
	at := int64(1000)
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 64; i++ {
			l.Prune(at, 8)
			l.Add(at, 8, 1)
			at++
		}
	})
	if allocs != 0 || len(l.ring) != room {
		t.Fatalf("a steady log allocated %v times (room %d -> %d)", allocs, room, len(l.ring))
	}
}

// refLog is the sliding log at its plainest: every surviving Event in a
// sorted slice, trimmed at every prune.
type refLog []Event

func (r *refLog) prune(now, window int64) {
	i := 0
	for i < len(*r) && (*r)[i].At <= now-2*window {
		i++
	}
	*r = (*r)[i:]
}

func (r *refLog) add(now, n int64) {
	i := 0
	for i < len(*r) && (*r)[i].At < now {
		i++
	}
	if i < len(*r) && (*r)[i].At == now {
		(*r)[i].N += n
		return
	}
	*r = append((*r)[:i], append([]Event{{now, n}}, (*r)[i:]...)...)
}

func (r refLog) count(now, window int64) (c int64) {
	for _, e := range r {
		if e.At > now-window {
			c += e.N
		}
	}
	return c
}

func (r refLog) retryIn(now, window, rate, asked int64) int64 {
	k := r.count(now, window) + asked - rate
	if k <= 0 {
		return 0
	}
	if asked > rate {
		return window
	}
	var seen int64
	for _, e := range r {
		if e.At > now-window {
			if seen += e.N; seen >= k {
				return e.At + window - now
			}
		}
	}
	return window
}

func (r refLog) reset(now, window int64) int64 {
	if len(r) == 0 {
		return 0
	}
	return max(0, r[len(r)-1].At+window-now)
}

func (r *refLog) bound(limit int64) {
	var total int64
	for _, e := range *r {
		total += e.N
	}
	for total > limit && len(*r) > 0 {
		if drop := total - limit; drop >= (*r)[0].N {
			total -= (*r)[0].N
			*r = (*r)[1:]
		} else {
			(*r)[0].N -= drop
			total -= drop
		}
	}
}

func (r *refLog) remove(at, n int64) {
	for i := len(*r) - 1; i >= 0; i-- {
		if (*r)[i].At == at {
			n = min(n, (*r)[i].N)
			if (*r)[i].N -= n; (*r)[i].N == 0 {
				*r = append((*r)[:i], (*r)[i+1:]...)
			}
			return
		}
	}
}

// TestLogMatchesEagerTrim checks the log, which sheds gone events
// only when its ring is full and skips reading its events when none leave
// the window, against refLog on random calls: a clock that mostly moves on
// and sometimes jumps back, windows that change, undos and bounds.
func TestLogMatchesEagerTrim(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		l := New()
		var r refLog
		now := int64(1000)
		for step := 0; step < 400; step++ {
			window := []int64{5, 10, 40}[rng.IntN(3)]
			if step%50 > 3 {
				window = 10
			}
			switch x := rng.IntN(20); {
			case x == 0:
				now -= rng.Int64N(60)
			case x < 12:
				now += rng.Int64N(4)
			}
			rate := 1 + rng.Int64N(12)
			asked := 1 + rng.Int64N(3)
			l.Prune(now, window)
			r.prune(now, window)
			if got, want := l.Count(now, window), r.count(now, window); got != want {
				t.Fatalf("seed %d step %d: count %d, want %d", seed, step, got, want)
			}
			if got, want := l.Reset(now, window, false), r.reset(now, window); got != want {
				t.Fatalf("seed %d step %d: reset %d, want %d", seed, step, got, want)
			}
			if r.count(now, window)+asked > rate {
				if got, want := l.RetryIn(now, window, rate, asked), r.retryIn(now, window, rate, asked); got != want {
					t.Fatalf("seed %d step %d: retry %d, want %d", seed, step, got, want)
				}
				continue
			}
			l.Record(now, asked)
			r.add(now, asked)
			switch rng.IntN(10) {
			case 0:
				l.Remove(now, 1)
				r.remove(now, 1)
			case 1:
				l.Bound(rate)
				r.bound(rate)
			}
		}
	}
}

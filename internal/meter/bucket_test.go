package meter

import (
	"math/rand/v2"
	"testing"
)

// newBucket returns an empty bucket of burst tokens at rate tokens per
// window µs.
func newBucket(window, rate, burst int64) *Bucket {
	var b Bucket
	wq, rq := Ticks(window, rate)
	b.Fit(wq, rq, burst)
	return &b
}

func TestTicks(t *testing.T) {
	for _, c := range []struct{ window, rate, wq, rq int64 }{
		{1_000_000, 3, 1_000_000, 3},
		{60_000_000, 60, 1_000_000, 1},
		{10, 4, 5, 2},
	} {
		if wq, rq := Ticks(c.window, c.rate); wq != c.wq || rq != c.rq {
			t.Errorf("Ticks(%d, %d) = %d, %d; want %d, %d", c.window, c.rate, wq, rq, c.wq, c.rq)
		}
	}
}

func TestBucketKeepsItsTATExactly(t *testing.T) {
	b := newBucket(1_000_000, 3, 3) // T = 333333⅓ µs
	b.Add(0, 0, 1)
	if w, r := b.TAT(); w != 333_333 || r != 1 {
		t.Fatalf("TAT after one token = %d µs + %d ticks, want 333333 + 1", w, r)
	}
	if b.Count(0, 0) != 1 || b.Reset(0, 0, true) != 333_334 {
		t.Fatalf("count %d reset %d, want 1 and 333334 (rounded up)", b.Count(0, 0), b.Reset(0, 0, true))
	}
	if b.Count(333_333, 0) != 1 || b.Count(333_334, 0) != 0 || b.Reset(333_334, 0, false) != 0 {
		t.Fatal("the token did not flow out at 333333⅓ µs")
	}
	b.Add(0, 0, 2) // three tokens: the TAT is 1s exactly
	if w, r := b.TAT(); w != 1_000_000 || r != 0 || b.Count(0, 0) != 3 || b.Reset(0, 0, false) != 1_000_000 {
		t.Fatalf("TAT %d + %d, count %d", w, r, b.Count(0, 0))
	}
	// One more fits once a token has flowed out: at 333334 µs.
	if got := b.RetryIn(0, 0, 3, 1); got != 333_334 {
		t.Fatalf("retry = %d, want 333334", got)
	}
	b.Unrecord(2)
	if w, r := b.TAT(); w != 333_333 || r != 1 {
		t.Fatalf("TAT after giving 2 back = %d + %d, want 333333 + 1", w, r)
	}
	// A clock gone far back: the bucket counts as full, and waits from w
	// until a token fits: 10333333⅓ - 666666⅔ µs.
	if b.Count(-10_000_000, 0) != 3 || b.RetryIn(-10_000_000, 0, 3, 1) != 9_666_667 {
		t.Fatalf("far behind the TAT: count %d retry %d", b.Count(-10_000_000, 0), b.RetryIn(-10_000_000, 0, 3, 1))
	}
	// Another rate cuts the remainder to fit, as lua/gcra.lua does.
	b.Fit(1_000_000, 1, 1)
	if w, r := b.TAT(); w != 333_333 || r != 0 {
		t.Fatalf("TAT refitted to rq 1 = %d + %d, want 333333 + 0", w, r)
	}
}

func TestBucketCopiesRedisLaterTAT(t *testing.T) {
	b := newBucket(10, 10, 10) // T = 1 µs
	b.Add(100, 0, 5)           // TAT 105
	b.CopyFrom(100, 0, 3, 0)   // Redis: full at 103, earlier: the bucket's own stands
	if w, _ := b.TAT(); w != 105 {
		t.Fatalf("TAT after an earlier answer = %d, want 105", w)
	}
	b.CopyFrom(100, 0, 8, 0) // Redis counted others' calls: 108
	if w, _ := b.TAT(); w != 108 {
		t.Fatalf("TAT after a later answer = %d, want 108", w)
	}
	b.CopyFrom(100, 0, 12, 2) // 112 less the 2 tokens given back since: 110
	if w, _ := b.TAT(); w != 110 {
		t.Fatalf("TAT after an answer with 2 given back = %d, want 110", w)
	}
	b.CopyFrom(100, 0, 3, 5) // nothing to learn: the give-backs' cost passes the answer
	if w, _ := b.TAT(); w != 110 {
		t.Fatalf("TAT after an answer all given back = %d, want 110", w)
	}
}

// TestBucketReplacesWithRedisTAT: an answer of a bucket a give-back moved
// back (lua/gcra.lua's mark) replaces the bucket's TAT, earlier or later,
// as CopyFrom reads it; an answer in the same µs keeps the exact ticks.
func TestBucketReplacesWithRedisTAT(t *testing.T) {
	b := newBucket(10, 10, 10) // T = 1 µs
	b.Add(100, 0, 8)           // TAT 108: another process' give-back is not in it
	b.ReplaceFrom(100, 0, 3, 0)
	if w, _ := b.TAT(); w != 103 {
		t.Fatalf("TAT after an earlier marked answer = %d, want 103", w)
	}
	b.ReplaceFrom(100, 0, 12, 2) // 112 less the 2 tokens given back since: 110
	if w, _ := b.TAT(); w != 110 {
		t.Fatalf("TAT after a marked answer with 2 given back = %d, want 110", w)
	}
	b.ReplaceFrom(100, 0, 3, 5) // the give-backs' cost passes the answer: full
	if w, r := b.TAT(); w != 100 || r != 0 || b.Count(100, 0) != 0 {
		t.Fatalf("TAT after a marked answer all given back = %d + %d, want 100 (full)", w, r)
	}
	b.ReplaceFrom(100, 0, 0, 0) // a full bucket stays as it is
	if w, _ := b.TAT(); w != 100 {
		t.Fatalf("TAT after a full marked answer = %d, want 100", w)
	}
	b = newBucket(1_000_000, 3, 3) // T = 333333⅓ µs
	b.Add(0, 0, 1)                 // 333333 µs + 1 tick, which Redis answers as 333334
	b.ReplaceFrom(0, 0, 333_334, 0)
	if w, r := b.TAT(); w != 333_333 || r != 1 {
		t.Fatalf("TAT after a marked answer of the same µs = %d + %d, want 333333 + 1", w, r)
	}
}

// TestBucketSettlesAsIfReservedLess is reserved's example: reserve 10 at 0,
// a call at 5T, a cancel at 5T leaves Burst - 1 tokens, the TAT at 6T.
func TestBucketSettlesAsIfReservedLess(t *testing.T) {
	const T = 1000
	b := newBucket(10*T, 10, 10)
	b.AddAs(0, 10, 1)
	if b.Count(0, 0) != 10 || b.Outstanding() != 1 {
		t.Fatalf("count %d, outstanding %d after the reservation", b.Count(0, 0), b.Outstanding())
	}
	b.Add(5*T, 0, 1)
	if !b.Settle(1, 10) {
		t.Fatal("the bucket did not hold the reservation")
	}
	if w, r := b.TAT(); w != 6*T || r != 0 || b.Count(5*T, 0) != 1 || b.Outstanding() != 0 {
		t.Fatalf("after the cancel TAT %d + %d, count %d, want 6T and 1", w, r, b.Count(5*T, 0))
	}
	if b.Settle(1, 10) {
		t.Fatal("a reservation given back twice")
	}
	// A reservation at a bucket found full later is forgotten.
	b.AddAs(10*T, 2, 2)
	b.Add(20*T, 0, 1)
	if b.Outstanding() != 0 || b.Settle(2, 2) {
		t.Fatal("a call at a full bucket left the reservation's record")
	}
	// Settled at its cost (d = 0), a reservation stays taken.
	b.AddAs(30*T, 3, 3)
	w0, r0 := b.TAT()
	if !b.Settle(3, 0) {
		t.Fatal("the bucket did not hold reservation 3")
	}
	if w, r := b.TAT(); w != w0 || r != r0 || b.Outstanding() != 0 {
		t.Fatalf("a settle at cost moved the TAT from %d to %d", w0, w)
	}
}

// TestBucketMatchesTheModel checks the bucket against the model reserved
// describes, on random sequences: after events (t_e, m_e), TAT = max over
// e of t_e + T·Σ_{f >= e} m_f, a reservation settled for less being the
// event it would have been had it asked for that much less. A settle the
// bucket refuses (its record forgotten once the bucket was full) must be
// one the model's TAT does not notice.
func TestBucketMatchesTheModel(t *testing.T) {
	type event struct {
		at, m, id int64
		open      bool
	}
	rng := rand.New(rand.NewPCG(28, 1))
	for round := range 300 {
		window, rate := int64(1+rng.IntN(1000)), int64(1+rng.IntN(20))
		burst := rate + int64(rng.IntN(10))
		b := newBucket(window, rate, burst)
		wq, rq := Ticks(window, rate)
		var events []event
		model := func(evs []event) int64 { // ticks
			var tat, sum int64
			for i := len(evs) - 1; i >= 0; i-- {
				sum += evs[i].m * wq
				tat = max(tat, evs[i].at*rq+sum)
			}
			return tat
		}
		now, id := int64(0), int64(0)
		for step := range 60 {
			now += int64(rng.IntN(int(1 + 2*window/rate)))
			switch op := rng.IntN(3); {
			case op == 0:
				n := int64(1 + rng.IntN(3))
				b.Add(now, 0, n)
				events = append(events, event{at: now, m: n})
			case op == 1:
				id++
				n := int64(1 + rng.IntN(5))
				b.AddAs(now, n, uint64(id))
				events = append(events, event{at: now, m: n, id: id, open: true})
			default:
				var open []int
				for i, e := range events {
					if e.open {
						open = append(open, i)
					}
				}
				if len(open) == 0 {
					continue
				}
				i := open[rng.IntN(len(open))]
				d := int64(rng.IntN(int(events[i].m) + 2))
				settled := append([]event(nil), events...)
				settled[i].m -= min(d, settled[i].m)
				settled[i].open = false
				if b.Settle(uint64(events[i].id), d) {
					events = settled
				} else if model(settled) != model(events) {
					t.Fatalf("round %d step %d: the bucket forgot reservation %d, which moves the model's TAT from %d to %d ticks", round, step, events[i].id, model(events), model(settled))
				} else {
					events[i].open = false
				}
			}
			w, r := b.TAT()
			if r < 0 || r >= rq {
				t.Fatalf("round %d step %d: the TAT's remainder %d is outside [0, %d): Fit relies on it", round, step, r, rq)
			}
			if got, want := w*rq+r, model(events); got != want {
				t.Fatalf("round %d step %d (window %d, rate %d): TAT %d ticks, the model's %d", round, step, window, rate, got, want)
			}
		}
	}
}

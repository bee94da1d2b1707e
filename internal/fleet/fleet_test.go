package fleet

import (
	"sync"
	"sync/atomic"
	"testing"
)

const period int64 = 1_000_000 // µs: the heartbeat interval of these tests

// learnt returns a View that learnt r from one heartbeat.
func learnt(r Reply) *View {
	v := New(new(atomic.Int64))
	v.Learn(v.Begin(), r, false, period, 0, 0)
	return v
}

func TestLearnTheCount(t *testing.T) {
	old := 3 * period // a set old enough to lower the count
	for _, c := range []struct {
		name   string
		before int64 // the count last seen
		r      Reply
		kicked bool
		missed bool // a heartbeat failed before this one
		want   int64
	}{
		{"the first count", 0, Reply{Live: 3, Age: old}, false, false, 3},
		{"a lower count", 5, Reply{Live: 3, Age: old}, false, false, 3},
		{"never below 1", 5, Reply{Live: 0, Age: old}, false, false, 1},
		{"a young set raises", 2, Reply{Live: 3, Age: 3*period - 1}, false, false, 3},
		{"a young set does not lower", 5, Reply{Live: 3, Age: 3*period - 1}, false, false, 5},
		{"a kicked beat raises", 2, Reply{Live: 3, Age: old}, true, false, 3},
		{"a kicked beat does not lower", 5, Reply{Live: 3, Age: old}, true, false, 5},
		{"a rejoining beat does not lower", 5, Reply{Live: 3, Age: old}, false, true, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			live := new(atomic.Int64)
			live.Store(c.before)
			v := New(live)
			if c.missed {
				v.Missed()
			}
			v.Learn(v.Begin(), c.r, c.kicked, period, 0, 0)
			if got := v.Live(); got != c.want || live.Load() != c.want {
				t.Errorf("Live() = %d (shared count %d), want %d", got, live.Load(), c.want)
			}
		})
	}
}

// TestRejoinBeats: after a failed heartbeat, the next RejoinBeats of the
// period may raise the count but not lower it; kicked beats meanwhile do
// not use them up; the one after lowers it.
func TestRejoinBeats(t *testing.T) {
	v := learnt(Reply{Live: 4, Age: 3 * period})
	v.Missed()
	low := Reply{Live: 1, Age: 3 * period}
	v.Learn(v.Begin(), low, true, period, 0, 0) // kicked: not one of them
	for i := range RejoinBeats {
		v.Learn(v.Begin(), low, false, period, 0, 0)
		if v.Live() != 4 {
			t.Fatalf("rejoining beat %d lowered the count to %d", i+1, v.Live())
		}
	}
	v.Learn(v.Begin(), low, false, period, 0, 0)
	if v.Live() != 1 {
		t.Fatalf("the beat after the rejoining ones counts %d, want 1", v.Live())
	}
}

func TestLearnALoss(t *testing.T) {
	v := learnt(Reply{Live: 2, Age: 3 * period, Epoch: 100, Now: 1000})
	if v.Lost() != nil {
		t.Fatal("the first epoch seen counted as a loss")
	}
	v.Learn(v.Begin(), Reply{Live: 2, Age: period, Epoch: 100, Now: 2000}, false, period, 0, 0)
	if v.Lost() != nil {
		t.Fatal("the same epoch counted as a loss")
	}
	v.Learn(v.Begin(), Reply{Live: 2, Age: 0, Epoch: 5000, Now: 9000, LostBy: 8000}, false, period, 70, 60)
	if got, want := v.Lost(), (Loss{Process: 70, Clock: 60, Redis: 9000, Age: 1000}); got == nil || *got != want {
		t.Fatalf("Lost() = %+v, want %+v", got, want)
	}
	// A LostBy later than the heartbeat's TIME is no age.
	v.Learn(v.Begin(), Reply{Epoch: 6000, Now: 9000, LostBy: 9500}, false, period, 0, 0)
	if got := v.Lost(); got == nil || got.Age != 0 {
		t.Fatalf("Lost() = %+v, want Age 0", got)
	}
}

func TestLossOn(t *testing.T) {
	ls := Loss{Process: 100, Clock: 5000, Redis: 9000, Age: 1000}
	// On Redis' clock: its TIME less the age, and a Prefetch later; the
	// decision's time is the heartbeat's TIME moved on by the process
	// clock since (250 - 100).
	if at, then := ls.On(false, 20, 7777, 250); at != 8020 || then != 9150 {
		t.Errorf("on Redis' clock: %d, %d; want 8020, 9150", at, then)
	}
	// On the Limiter's: the learning, a Prefetch later, and the call's
	// time as it is.
	if at, then := ls.On(true, 20, 7777, 250); at != 5020 || then != 7777 {
		t.Errorf("on the Limiter's clock: %d, %d; want 5020, 7777", at, then)
	}
}

// TestSettling: an opening of the breaker, or a failed call, is settled by
// the next heartbeat that began after it, which also makes the others
// count only once they announce themselves after it (SettleFrom), until
// three periods have passed on Redis' clock.
func TestSettling(t *testing.T) {
	v := learnt(Reply{Live: 2, Age: 3 * period, Now: 0})
	if !v.Settled() || v.SettleFrom() != 0 {
		t.Fatalf("a fresh View: Settled %v, SettleFrom %d; want true, 0", v.Settled(), v.SettleFrom())
	}
	v.Opened(40)
	if v.Settled() {
		t.Fatal("settled after the breaker opened")
	}
	b := v.Begin()
	if v.SettleFrom() != 40 {
		t.Fatalf("SettleFrom %d after an opening at 40, want 40", v.SettleFrom())
	}
	v.Opened(45) // opens again while the heartbeat is on its way
	v.Learn(b, Reply{Live: 2, Age: 3 * period, Now: 1000}, true, period, 0, 0)
	if v.Settled() {
		t.Fatal("a heartbeat that began before the second opening settled it")
	}
	v.Learn(v.Begin(), Reply{Live: 2, Age: 3 * period, Now: 2000}, true, period, 0, 0)
	if !v.Settled() || v.SettleFrom() != 45 {
		t.Fatalf("Settled %v, SettleFrom %d; want true, 45", v.Settled(), v.SettleFrom())
	}

	// A failed call: the first failure since the last heartbeat counts,
	// before any opening.
	v.Failed(70)
	v.Failed(80)
	v.Opened(90)
	b = v.Begin()
	if v.SettleFrom() != 70 {
		t.Fatalf("SettleFrom %d after failures at 70 and 80, want 70", v.SettleFrom())
	}
	v.Learn(b, Reply{Live: 2, Age: 3 * period, Now: 3000}, false, period, 0, 0)
	if !v.Settled() {
		t.Fatal("the heartbeat after the failures did not settle them")
	}
	v.Failed(95) // a new first failure
	v.Begin()
	if v.SettleFrom() != 95 {
		t.Fatalf("SettleFrom %d after a failure at 95, want 95", v.SettleFrom())
	}
	// Three periods after it on Redis' clock, the bound is dropped.
	v.Learn(v.Begin(), Reply{Live: 2, Age: 3 * period, Now: 95 + 3*period}, false, period, 0, 0)
	if v.SettleFrom() != 0 {
		t.Fatalf("SettleFrom %d three periods after it, want 0", v.SettleFrom())
	}
}

func TestTrySettle(t *testing.T) {
	v := New(new(atomic.Int64))
	for _, c := range []struct {
		at   int64
		want bool
	}{{100, true}, {150, false}, {199, false}, {200, true}, {201, false}} {
		if got := v.TrySettle(c.at, 100); got != c.want {
			t.Errorf("TrySettle at %d = %v, want %v", c.at, got, c.want)
		}
	}
}

// TestConcurrentUse: heartbeats, failures and openings from many
// goroutines (go test -race); every failure and opening noted before the
// last heartbeat began is settled by it.
func TestConcurrentUse(t *testing.T) {
	v := New(new(atomic.Int64))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 500 {
				switch (i + j) % 4 {
				case 0:
					v.Failed(int64(j + 1))
				case 1:
					v.Opened(int64(j + 1))
				case 2:
					v.Learn(v.Begin(), Reply{Live: int64(i + 1), Age: 3 * period, Now: int64(j)}, j%2 == 0, period, 0, 0)
				default:
					_ = v.Settled() && v.Live() >= 0 && v.Unsettled() >= 0
				}
			}
		}()
	}
	wg.Wait()
	v.Learn(v.Begin(), Reply{Live: 3, Age: 3 * period}, false, period, 0, 0)
	if !v.Settled() {
		t.Fatal("the last heartbeat, after every failure and opening, did not settle them")
	}
}

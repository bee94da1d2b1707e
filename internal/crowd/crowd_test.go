package crowd

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// woken reports whether w was woken, and with a seat.
func woken(w *Seat) (bool, bool) {
	select {
	case <-w.Ready():
		return true, w.Granted()
	default:
		return false, false
	}
}

func TestSeatsGoToTheOldestFirst(t *testing.T) {
	c := New()
	if c.Full() || !c.Idle() {
		t.Fatalf("a new crowd is full or busy: %+v", c)
	}
	c.Sit()
	if !c.Full() || c.Flying() != 1 {
		t.Fatalf("after one call sat, Full %v, Flying %d; want true, 1", c.Full(), c.Flying())
	}
	a, b, gone, d := c.Wait(), c.Wait(), c.Wait(), c.Wait()
	if gone.Leave() {
		t.Fatal("a call that left before a seat freed reports one")
	}
	c.Stand()
	c.Left(2) // two seats, none taken: the two oldest that wait get them
	for _, tc := range []struct {
		name        string
		w           *Seat
		woken, seat bool
	}{{"a", a, true, true}, {"b", b, true, true}, {"gone", gone, false, false}, {"d", d, false, false}} {
		if w, s := woken(tc.w); w != tc.woken || s != tc.seat {
			t.Errorf("%s: woken %v with a seat %v; want %v, %v", tc.name, w, s, tc.woken, tc.seat)
		}
	}
	if c.Flying() != 2 || !c.Full() {
		t.Fatalf("Flying %d, Full %v; want 2, true (d waits)", c.Flying(), c.Full())
	}
	if !a.Leave() {
		t.Fatal("a call given a seat does not report it when it leaves")
	}
	c.GiveBack() // a gives its seat back: d gets it
	if w, s := woken(d); !w || !s {
		t.Fatalf("d: woken %v with a seat %v after a seat was given back; want both", w, s)
	}
	if c.Flying() != 2 || !c.Full() || c.Idle() {
		t.Fatalf("Flying %d, Full %v, Idle %v; want 2, true, false", c.Flying(), c.Full(), c.Idle())
	}
}

func TestRejectedWakesEveryoneWithoutASeat(t *testing.T) {
	c := New()
	c.Left(5)
	for range 5 {
		c.Sit()
	}
	var ws []*Seat
	for range 3 {
		ws = append(ws, c.Wait())
	}
	c.Stand() // one call lands, rejected
	c.Rejected()
	for i, w := range ws {
		if ok, seat := woken(w); !ok || seat {
			t.Errorf("waiter %d: woken %v with a seat %v; want woken without one", i, ok, seat)
		}
	}
	if c.Flying() != 4 || !c.Full() {
		t.Fatalf("Flying %d, Full %v after a rejection left one seat; want 4, true", c.Flying(), c.Full())
	}
	for range 4 {
		c.Stand()
	}
	if !c.Idle() || c.Full() {
		t.Fatalf("Idle %v, Full %v once every call landed; want true, false", c.Idle(), c.Full())
	}
}

func TestWakeAllSkipsCallsThatLeft(t *testing.T) {
	c := New()
	c.Sit()
	left, stays := c.Wait(), c.Wait()
	left.Leave()
	c.WakeAll() // closing left's channel again would panic
	if ok, _ := woken(left); ok {
		t.Error("a call that left was woken")
	}
	if ok, seat := woken(stays); !ok || seat {
		t.Errorf("the call that stayed: woken %v with a seat %v; want woken without one", ok, seat)
	}
}

func TestAwait(t *testing.T) {
	t.Run("woken", func(t *testing.T) {
		c := New()
		c.Sit()
		w := c.Wait()
		go func() { // the landing of the call that flies
			c.Stand()
			c.SeatWaiting()
		}()
		var wt Waiting
		defer wt.Stop()
		ok, err := wt.Await(context.Background(), w, time.Hour)
		if !ok || err != nil || !w.Granted() {
			t.Fatalf("Await = %v, %v, granted %v; want woken with a seat", ok, err, w.Granted())
		}
	})
	t.Run("the budget counts from the first wait", func(t *testing.T) {
		c := New()
		c.Sit()
		var wt Waiting
		defer wt.Stop()
		ok, err := wt.Await(context.Background(), c.Wait(), time.Millisecond)
		if ok || err != nil {
			t.Fatalf("Await = %v, %v; want its time run out", ok, err)
		}
		// The second wait of the same call has nothing left.
		ok, err = wt.Await(context.Background(), c.Wait(), time.Hour)
		if ok || err != nil {
			t.Fatalf("a second Await = %v, %v; want its time run out at once", ok, err)
		}
	})
	t.Run("ctx ends", func(t *testing.T) {
		c := New()
		c.Sit()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var wt Waiting
		defer wt.Stop()
		ok, err := wt.Await(ctx, c.Wait(), time.Hour)
		if ok || !errors.Is(err, context.Canceled) {
			t.Fatalf("Await = %v, %v; want context.Canceled", ok, err)
		}
	})
}

// TestHammer: many calls take, wait for and give back seats under one
// lock, as the local store's callers do; at no time do more fly than the
// room, and every call ends with a seat or having left.
func TestHammer(t *testing.T) {
	const room, calls = 3, 2000
	var mu sync.Mutex
	c := New()
	c.Left(room)
	var wg sync.WaitGroup
	var most int64
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			var w *Seat
			if c.Full() {
				w = c.Wait()
			} else {
				c.Sit()
			}
			mu.Unlock()
			if w != nil {
				var wt Waiting
				ok, _ := wt.Await(context.Background(), w, time.Duration(i%3)*time.Millisecond)
				wt.Stop()
				mu.Lock()
				seated := ok && w.Granted() || !ok && w.Leave()
				mu.Unlock()
				if !seated {
					return
				}
			}
			mu.Lock()
			most = max(most, c.Flying())
			c.GiveBack()
			mu.Unlock()
		}()
	}
	wg.Wait()
	if most > room || c.Flying() != 0 {
		t.Fatalf("at most %d flew (room %d), %d fly at the end; want at most the room, then none", most, room, c.Flying())
	}
}

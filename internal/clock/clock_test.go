package clock

import (
	"sync"
	"testing"
	"time"
)

func TestFakeMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	f := NewFake(start)
	if got := f.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	if got := f.Advance(1500 * time.Millisecond); !got.Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("Advance returned %v", got)
	}
	f.Set(start.Add(-time.Hour))
	if got := f.Now(); !got.Equal(start.Add(-time.Hour)) {
		t.Fatalf("after Set backwards Now = %v", got)
	}
}

func TestFakeConcurrentAdvance(t *testing.T) {
	start := time.Unix(0, 0)
	f := NewFake(start)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Advance(time.Microsecond)
			_ = f.Now()
		}()
	}
	wg.Wait()
	if got := f.Now().Sub(start); got != 50*time.Microsecond {
		t.Fatalf("advanced %v, want 50µs", got)
	}
}

func TestFakeAfterFiresWhenMovedPastIt(t *testing.T) {
	start := time.Unix(1000, 0)
	f := NewFake(start)
	c := f.After(time.Second)
	now := f.After(0)
	select {
	case got := <-now:
		if !got.Equal(start) {
			t.Fatalf("After(0) fired at %v", got)
		}
	default:
		t.Fatal("After(0) did not fire at once")
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-c:
		t.Fatal("fired before it was due")
	default:
	}
	if f.Waiters() != 1 {
		t.Fatalf("Waiters = %d, want 1", f.Waiters())
	}
	f.Set(start.Add(5 * time.Second))
	if got := <-c; !got.Equal(start.Add(5 * time.Second)) {
		t.Fatalf("fired with %v", got)
	}
	if f.Waiters() != 0 {
		t.Fatalf("Waiters = %d after firing", f.Waiters())
	}
}

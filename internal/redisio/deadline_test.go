package redisio

import (
	"testing"
	"time"
)

func TestSharedDeadlineStaysWithinTheBudget(t *testing.T) {
	const budget = 80 * time.Millisecond
	s := NewSharedDeadline(budget)
	first := s.Context()
	for i := 0; i < 200; i++ {
		before := time.Now()
		ctx := s.Context()
		after := time.Now()
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		// The deadline is budget after a moment inside the call, and at
		// least seven eighths of the budget after it.
		if left := dl.Sub(after); left > budget {
			t.Fatalf("a call got %v, more than its budget %v", left, budget)
		}
		if left := dl.Sub(before); left < budget-budget/8 {
			t.Fatalf("a call got only %v of its %v budget", left, budget)
		}
		time.Sleep(time.Millisecond)
	}
	if first == s.Context() {
		t.Fatal("the shared context was never renewed")
	}
}

func TestSharedDeadlineIsShared(t *testing.T) {
	s := NewSharedDeadline(time.Hour)
	if a, b := s.Context(), s.Context(); a != b {
		t.Fatal("two calls in the same eighth of the budget got different contexts")
	}
}

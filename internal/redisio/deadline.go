package redisio

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// SharedDeadline hands out contexts whose deadline is at most the budget
// away and at least seven eighths of it, shared by every call that starts
// in the same eighth of the budget. A call thus never waits past its budget,
// yet does not pay for a context and a timer of its own (context.WithTimeout
// costs 4–5 allocations and, at 256 goroutines, a quarter of the
// throughput).
type SharedDeadline struct {
	budget time.Duration
	cur    atomic.Pointer[deadlineCtx]
	mu     sync.Mutex // serializes renewals
}

// deadlineCtx is one shared context. A renewal leaves the one it replaces
// to expire on its own (calls may still be waiting on it), which releases its
// timer; Stop cancels the current one when its owner closes.
type deadlineCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	end    int64 // deadline, UnixNano
}

// NewSharedDeadline returns the shared deadline of calls that each may
// take budget.
func NewSharedDeadline(budget time.Duration) *SharedDeadline {
	return &SharedDeadline{budget: budget}
}

// Context returns a context that expires at most budget after now.
func (s *SharedDeadline) Context() context.Context {
	now := time.Now().UnixNano()
	earliest := now + int64(s.budget-s.budget/8)
	if c := s.cur.Load(); c != nil && c.end >= earliest {
		return c.ctx
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cur.Load(); c != nil && c.end >= earliest {
		return c.ctx
	}
	end := time.Now().Add(s.budget)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	s.cur.Store(&deadlineCtx{ctx: ctx, cancel: cancel, end: end.UnixNano()})
	return ctx
}

// Stop cancels the current shared context, releasing its timer: calls still
// waiting on it end as if their budget had run out.
func (s *SharedDeadline) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cur.Load(); c != nil {
		c.cancel()
	}
}

package ledger

import "sync"

// Queue holds what waits for Redis to be usable again beside the debts (a
// lease's release, a settle's give-back or charge), oldest first, for its
// caller's write-back to send. Past its bound the oldest is dropped: what it
// would have freed on Redis then expires there. It is safe for concurrent
// use; its zero value is empty.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add keeps v, dropping the oldest when max are kept already; it returns
// what it dropped, if anything.
func (q *Queue[T]) Add(v T, max int) (dropped T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= max {
		dropped, ok = q.items[0], true
		q.items = q.items[1:]
	}
	q.items = append(q.items, v)
	return dropped, ok
}

// Pending reports whether anything waits.
func (q *Queue[T]) Pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) > 0
}

// Take returns what waits, and forgets it.
func (q *Queue[T]) Take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

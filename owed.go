package ratelimit

import "sync"

// owedQueue holds what waits for Redis to be usable again (a lease's
// release, a settle's give-back or charge), oldest first, for the
// write-back's loop to send. Past its bound the oldest is dropped: what it
// would have freed on Redis then expires there. It is safe for concurrent
// use; its zero value is empty.
type owedQueue[T any] struct {
	mu    sync.Mutex
	items []T
}

// add keeps v, dropping the oldest when max are kept already; it returns
// what it dropped, if anything.
func (q *owedQueue[T]) add(v T, max int) (dropped T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= max {
		dropped, ok = q.items[0], true
		q.items = q.items[1:]
	}
	q.items = append(q.items, v)
	return dropped, ok
}

// pending reports whether anything waits.
func (q *owedQueue[T]) pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) > 0
}

// take returns what waits, and forgets it.
func (q *owedQueue[T]) take() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

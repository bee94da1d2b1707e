package breaker

import "sync"

// Queue hands the breakers' state changes from under the gobreaker's mutex
// to a goroutine that delivers them (see Run), in order.
type Queue struct {
	mu      sync.Mutex // guards pending
	pending []Change
	wake    chan struct{}
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{wake: make(chan struct{}, 1)}
}

// push adds c to the queue and wakes Run. It runs under the gobreaker's
// mutex: it takes only the queue's own lock, and never blocks.
func (q *Queue) push(c Change) {
	q.mu.Lock()
	q.pending = append(q.pending, c)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Run delivers the changes to handle, one at a time and in order, until
// done is closed, then delivers what is left and returns.
func (q *Queue) Run(done <-chan struct{}, handle func(Change)) {
	for {
		select {
		case <-q.wake:
		case <-done:
			q.drain(handle)
			return
		}
		q.drain(handle)
	}
}

// drain delivers the changes pending, and those pushed meanwhile, to
// handle.
func (q *Queue) drain(handle func(Change)) {
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		q.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, c := range batch {
			handle(c)
		}
	}
}

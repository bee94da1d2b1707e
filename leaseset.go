package ratelimit

import (
	"sync"
	"sync/atomic"

	"github.com/ratelimit-go/ratelimit/internal/ledger"
)

// leaseSet is what a Limiter knows of the leases it handed out: the ones
// held (Close releases them, a Reset loses them), the releases Redis could
// not take yet (the write-back's loop sends them once it can), and a signal
// that a lease was released (AcquireWait wakes on it). The leases of a pair
// are linked through their own prev and next fields, so that taking and
// giving back a slot of a pair seen before allocates nothing here.
type leaseSet struct {
	mu   sync.Mutex
	held map[lkey]*Lease    // by pair: the newest lease of the pair, whose prev links the others
	n    int                // the leases in held
	owed ledger.Queue[undo] // releases Redis has not taken yet
	wake chan struct{}      // closed, and replaced, when a lease is released

	released, renewed, lost atomic.Uint64 // since the Limiter was made (see Stats)
}

// len returns the number of leases held.
func (s *leaseSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// byRule returns the number of leases held by rule name (nil when none is
// held).
func (s *leaseSet) byRule() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return nil
	}
	out := make(map[string]int)
	for k, le := range s.held {
		for ; le != nil; le = le.prev {
			out[k.Rule]++
		}
	}
	return out
}

// maxOwedReleases bounds the releases kept for Redis: past it the oldest
// are dropped, and their leases expire in Redis at their TTL.
const maxOwedReleases = 100_000

// linked reports whether le is among the leases held: a pair's newest
// lease is the one held maps the pair to, and every other one has a newer
// one after it. The caller holds s.mu.
func (s *leaseSet) linked(le *Lease) bool {
	return le.next != nil || s.held[le.u.k] == le
}

// add counts le among the leases held, once.
func (s *leaseSet) add(le *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.linked(le) {
		return
	}
	if s.held == nil {
		s.held = make(map[lkey]*Lease)
	}
	k := &le.u.k
	if newest := s.held[*k]; newest != nil {
		newest.next, le.prev = le, newest
	}
	s.held[*k] = le
	s.n++
}

// remove forgets le among the leases held, if it is.
func (s *leaseSet) remove(le *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.linked(le) {
		return
	}
	switch {
	case le.next != nil:
		le.next.prev = le.prev
	case le.prev != nil:
		s.held[le.u.k] = le.prev
	default:
		delete(s.held, le.u.k)
	}
	if le.prev != nil {
		le.prev.next = le.next
	}
	le.prev, le.next = nil, nil
	s.n--
}

// all returns the leases held.
func (s *leaseSet) all() []*Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Lease, 0, s.n)
	for _, le := range s.held {
		for ; le != nil; le = le.prev {
			out = append(out, le)
		}
	}
	return out
}

// of returns the leases of pair k held.
func (s *leaseSet) of(k lkey) []*Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Lease
	for le := s.held[k]; le != nil; le = le.prev {
		out = append(out, le)
	}
	return out
}

// onRedis returns the leases of pair k held at now whose state Redis was
// last told by this process, in a call it decided (an Acquire or a Renew)
// or by the write-back (see written), as a decision's script takes them
// back when Redis lost them (see lua/concurrency.lua): a pair of arguments
// each, the lease's time and its id. A lease decided without Redis and not
// written back yet is left out: the decision counts it among what the
// process owes.
func (s *leaseSet) onRedis(k lkey, now int64) []string {
	var out []string
	for _, le := range s.of(k) {
		le.mu.Lock()
		if !le.done && le.onRedis && le.expires > now {
			out = append(out, itoa(le.u.now), le.u.member)
		}
		le.mu.Unlock()
	}
	return out
}

// written notes that the write-back brought the leases of pair k among
// named to Redis: a lease whose event there is the one it holds now (no
// renewal since) is on Redis, as one Redis decided is (see onRedis).
func (s *leaseSet) written(k lkey, named []ledger.Named) {
	for _, le := range s.of(k) {
		le.mu.Lock()
		for _, nm := range named {
			if !le.done && nm.Member == le.u.member && nm.At == le.u.now {
				le.onRedis = true
			}
		}
		le.mu.Unlock()
	}
}

// lose marks the leases of pair k lost, as a Reset of it does; the Reset
// has cleared what the local store counted of them.
func (s *leaseSet) lose(k lkey) {
	for _, le := range s.of(k) {
		le.mu.Lock()
		if !le.done {
			le.done = true
			s.lost.Add(1)
		}
		le.mu.Unlock()
		s.remove(le)
	}
	s.signal()
}

// freed returns a channel closed when a lease is next released.
func (s *leaseSet) freed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

// signal wakes those waiting on freed.
func (s *leaseSet) signal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

package ratelimit

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/redisio"
	"github.com/sony/gobreaker/v2"
)

// slotsPerBreaker is how many consecutive slots share one circuit breaker on
// a Redis Cluster. A master owns whole ranges of slots, so a master that
// goes down opens the breakers of its ranges and leaves the others closed;
// only the few ranges that straddle two masters mix them.
const slotsPerBreaker = 64

// BreakerState is the state of the circuit breaker in front of Redis.
type BreakerState int

const (
	// BreakerClosed: calls go to Redis.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: one call probes Redis; the others are decided locally.
	BreakerHalfOpen
	// BreakerOpen: every call is decided locally until Options.ProbeAfter
	// has passed.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

func fromGobreaker(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// BreakerChange is one state change of a circuit breaker.
type BreakerChange struct {
	// Breaker names the breaker: "redis" for a single Redis, "slots
	// 0-63" and so on for the breakers of a Redis Cluster's slot ranges.
	Breaker string
	// From and To are the states before and after the change.
	From, To BreakerState
}

// breaker wraps a gobreaker with a lock-free check of its state: while it is
// open and not yet due for a probe, calls skip the gobreaker (and its mutex)
// altogether.
type breaker struct {
	cb         *gobreaker.CircuitBreaker[struct{}]
	state      atomic.Int32 // a BreakerState, copied from OnStateChange
	openedAt   atomic.Int64 // process clock, UnixNano, of the last opening
	probeAfter time.Duration
	changes    *changeQueue
	gate       atomic.Pointer[redisio.Gate] // admission control of the key range's master
	answered   atomic.Int32                 // the last call's outcome: answerNone, answerYes or answerNo
}

// The outcomes of a breaker's last call to Redis, for Stats.RedisInUse.
const (
	answerNone int32 = iota // no call went through the breaker yet
	answerYes               // Redis replied (a misuse reply included)
	answerNo                // the call failed as an outage
)

// noteAnswer records the outcome of a call sent through the breaker. A
// load first, so that the calls of a healthy Redis only read the word.
func (b *breaker) noteAnswer(outcome int32) {
	if b.answered.Load() != outcome {
		b.answered.Store(outcome)
	}
}

func newBreaker(name string, s *settings, changes *changeQueue) *breaker {
	b := &breaker{probeAfter: s.ProbeAfter, changes: changes}
	trip := uint32(s.TripAfter)
	b.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: 1,
		Timeout:     s.ProbeAfter,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= trip },
		// Runs under the gobreaker's mutex: only atomics and a queue here.
		OnStateChange: func(name string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.openedAt.Store(time.Now().UnixNano())
			}
			b.state.Store(int32(fromGobreaker(to)))
			changes.push(BreakerChange{Breaker: name, From: fromGobreaker(from), To: fromGobreaker(to)})
		},
		// The request functions return a *callError unwrapped, or nil.
		IsSuccessful: func(err error) bool {
			ce, ok := err.(*callError)
			return err == nil || ok && ce.cause == misuse
		},
		IsExcluded: func(err error) bool {
			ce, ok := err.(*callError)
			return ok && ce.cause == callerGone
		},
	})
	return b
}

// resting reports whether the breaker is open and not yet due for a probe.
func (b *breaker) resting() bool {
	return BreakerState(b.state.Load()) == BreakerOpen &&
		time.Now().UnixNano() < b.openedAt.Load()+int64(b.probeAfter)
}

// untilProbe returns how long until the breaker lets Redis be tried again.
func (b *breaker) untilProbe() time.Duration {
	if BreakerState(b.state.Load()) != BreakerOpen {
		return b.probeAfter
	}
	left := time.Duration(b.openedAt.Load() + int64(b.probeAfter) - time.Now().UnixNano())
	return max(left, time.Millisecond)
}

// changeQueue hands breaker state changes from under the gobreaker's mutex
// to a goroutine that calls the user's hook and logs them, in order.
type changeQueue struct {
	mu      sync.Mutex // guards pending
	pending []BreakerChange
	wake    chan struct{}
}

func newChangeQueue() *changeQueue {
	return &changeQueue{wake: make(chan struct{}, 1)}
}

func (q *changeQueue) push(c BreakerChange) {
	q.mu.Lock()
	q.pending = append(q.pending, c)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run delivers changes to handle until done is closed, then delivers what
// is left.
func (q *changeQueue) run(done <-chan struct{}, handle func(BreakerChange)) {
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

func (q *changeQueue) drain(handle func(BreakerChange)) {
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

// breakerSet is the breakers in front of one client: one for a single Redis,
// one per range of slotsPerBreaker slots for a Redis Cluster, so that keys
// whose master is healthy stay on Redis while another master is down.
type breakerSet struct {
	all     []*breaker
	cluster bool
}

// Every breaker starts in front of one shared admission gate; on a Redis
// Cluster, followMasters then gives each master a gate of its own, shared
// by the breakers of its slot ranges.
func newBreakerSet(cluster bool, s *settings, changes *changeQueue) breakerSet {
	shared := redisio.NewGate(s.Timeout)
	if !cluster {
		b := newBreaker("redis", s, changes)
		b.gate.Store(shared)
		return breakerSet{all: []*breaker{b}}
	}
	all := make([]*breaker, redisio.ClusterSlots/slotsPerBreaker)
	for i := range all {
		name := fmt.Sprintf("slots %d-%d", i*slotsPerBreaker, (i+1)*slotsPerBreaker-1)
		all[i] = newBreaker(name, s, changes)
		all[i].gate.Store(shared)
	}
	return breakerSet{all: all, cluster: true}
}

// forPair returns the breaker in front of k's keys under p: the one
// breaker of a single Redis, or, on a Redis Cluster, that of the slot of
// the key of k's events (what forKey is given for its calls).
func (bs *breakerSet) forPair(prefix string, k *lkey, p *plan) *breaker {
	if !bs.cluster {
		return bs.all[0]
	}
	var b strings.Builder
	b.Grow(keyLen(prefix, *k))
	writeKey(&b, prefix, *k, p.alg.redis.letter())
	return bs.forKey(b.String())
}

// forKey returns the breaker in front of the Redis key.
func (bs *breakerSet) forKey(key string) *breaker {
	if !bs.cluster {
		return bs.all[0]
	}
	return bs.all[redisio.KeySlot(key)/slotsPerBreaker]
}

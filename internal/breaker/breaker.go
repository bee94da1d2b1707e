// Package breaker keeps the circuit breakers in front of Redis (see
// docs/fallback.md#circuit-breaker): a [Breaker] wraps a gobreaker
// (github.com/sony/gobreaker/v2) with a lock-free check of its state, a
// [Set] is the breakers in front of one client, and a [Queue] hands their
// state changes, in order, to whoever reports them. It knows nothing of
// the Limiter or of its calls: its caller sends each Redis call through
// the breaker in front of the call's key ([Set.ForKey], [Breaker.Execute])
// and says, through [Config], which of the call's errors are Redis' fault.
//
// # Rules
//
//   - A breaker opens after [Config.TripAfter] consecutive failures: calls
//     that failed as an outage (a timeout, a network error, a reply that
//     means Redis cannot serve now, such as LOADING or BUSY). A reply that
//     means misuse (WRONGTYPE, a script error) is Redis' answer all the
//     same: it counts as a success ([Config.Successful]). A call whose
//     caller's context ended is neither Redis' fault nor an answer: the
//     breaker does not count it ([Config.Excluded]). A call the caller did
//     not send (shed by admission control, or refused by the breaker
//     itself) never reaches the breaker and never moves it.
//   - An open breaker rests for [Config.ProbeAfter]: meanwhile
//     [Breaker.Resting] reports true and its caller decides without Redis,
//     without taking the gobreaker's mutex. Then the breaker is half-open:
//     it lets one call through as a probe and refuses the others; the
//     probe's success closes it, its failure opens it again.
//   - A call decided without Redis because its breaker is not closed is
//     decided under a hold ([Breaker.Hold], [Breaker.Release]), so that
//     [Breaker.Owes] is true until its decision is recorded, even once the
//     breaker has closed.
//   - On a single Redis, one breaker stands in front of every key. On a
//     Redis Cluster, one stands in front of each range of [SlotsPerRange]
//     consecutive slots, so that the keys of a master that goes down open
//     the breakers of its ranges and leave the others closed.
//   - Each breaker sends through an admission gate ([redisio.Gate]): at
//     first one shared by all; on a Cluster, its caller gives the breakers
//     of each master's ranges that master's gate ([Set.SetGate]).
//   - Each state change is pushed from under the gobreaker's mutex onto
//     the set's [Queue], which delivers it to a handler of the caller's
//     from a goroutine of its own ([Queue.Run]), in order.
package breaker

import (
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/redisio"
	"github.com/sony/gobreaker/v2"
)

// State is the state of a breaker.
type State int32

const (
	// Closed: calls go to Redis.
	Closed State = iota
	// HalfOpen: one call probes Redis; the others are refused.
	HalfOpen
	// Open: every call is refused until Config.ProbeAfter has passed.
	Open
)

func fromGobreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	}
	return Closed
}

// Change is one state change of a breaker.
type Change struct {
	// Name names the breaker: "redis" for a single Redis, "slots 0-63" and
	// so on for the breakers of a Redis Cluster's slot ranges.
	Name string
	// From and To are the states before and after the change.
	From, To State
}

// Config is what a breaker needs from its caller's settings.
type Config struct {
	// TripAfter is how many consecutive failures open a breaker.
	TripAfter int
	// ProbeAfter is how long an open breaker rests before it lets one call
	// probe Redis.
	ProbeAfter time.Duration
	// Successful reports whether a request that returned err counts as a
	// success: err is nil, or Redis answered all the same (a reply that
	// means misuse). Nil counts nil as the only success.
	Successful func(err error) bool
	// Excluded reports whether a request that returned err is left out of
	// the counts altogether: neither Redis' fault nor its answer (the
	// caller's context ended). Nil leaves none out.
	Excluded func(err error) bool
	// Changes receives every state change of the breakers, in order; it
	// must not be nil.
	Changes *Queue
}

// Breaker is a gobreaker with a lock-free check of its state: while it is
// open and not yet due for a probe, calls skip the gobreaker (and its
// mutex) altogether. It also holds the admission gate its calls go through
// and the outcome of its last call.
type Breaker struct {
	cb         *gobreaker.CircuitBreaker[struct{}]
	state      atomic.Int32 // a State, copied from OnStateChange
	openedAt   atomic.Int64 // process clock, UnixNano, of the last opening
	probeAfter time.Duration
	gate       atomic.Pointer[redisio.Gate] // admission control of the key range's master
	answered   atomic.Int32                 // the last call's outcome, an Answer
	deciding   atomic.Int64                 // decisions without Redis under way (see Hold)
}

// Answer is the outcome of a breaker's last call to Redis, for
// Stats.RedisInUse.
type Answer int32

const (
	// AnswerNone: no call went through the breaker yet.
	AnswerNone Answer = iota
	// AnswerYes: Redis replied (a misuse reply included).
	AnswerYes
	// AnswerNo: the call failed as an outage.
	AnswerNo
)

// New returns a closed breaker named name, which sends through gate.
func New(name string, c Config, gate *redisio.Gate) *Breaker {
	b := &Breaker{probeAfter: c.ProbeAfter}
	b.gate.Store(gate)
	trip := uint32(c.TripAfter)
	changes := c.Changes
	b.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: 1,
		Timeout:     c.ProbeAfter,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= trip },
		// Runs under the gobreaker's mutex: only atomics and a queue here.
		OnStateChange: func(name string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				b.openedAt.Store(time.Now().UnixNano())
			}
			b.state.Store(int32(fromGobreaker(to)))
			changes.push(Change{Name: name, From: fromGobreaker(from), To: fromGobreaker(to)})
		},
		IsSuccessful: c.Successful,
		IsExcluded:   c.Excluded,
	})
	return b
}

// Execute runs req through the breaker, and returns the error req
// returned, or gobreaker.ErrOpenState or gobreaker.ErrTooManyRequests when
// the breaker refused it (it opened meanwhile, or is half-open with its
// probe under way) without running it. req has the gobreaker's own type,
// so that it reaches the gobreaker as it is.
func (b *Breaker) Execute(req func() (struct{}, error)) error {
	_, err := b.cb.Execute(req)
	return err
}

// State returns the breaker's state.
func (b *Breaker) State() State {
	return State(b.state.Load())
}

// Resting reports whether the breaker is open and not yet due for a probe.
func (b *Breaker) Resting() bool {
	return State(b.state.Load()) == Open &&
		time.Now().UnixNano() < b.openedAt.Load()+int64(b.probeAfter)
}

// UntilProbe returns how long until the breaker lets Redis be tried again:
// ProbeAfter unless it is open, and at least a millisecond.
func (b *Breaker) UntilProbe() time.Duration {
	if State(b.state.Load()) != Open {
		return b.probeAfter
	}
	left := time.Duration(b.openedAt.Load() + int64(b.probeAfter) - time.Now().UnixNano())
	return max(left, time.Millisecond)
}

// NoteAnswer records the outcome of a call sent through the breaker. It
// loads first, so that the calls of a healthy Redis only read the word.
func (b *Breaker) NoteAnswer(a Answer) {
	if Answer(b.answered.Load()) != a {
		b.answered.Store(int32(a))
	}
}

// LastAnswer returns the outcome of the last call sent through the
// breaker.
func (b *Breaker) LastAnswer() Answer {
	return Answer(b.answered.Load())
}

// Gate returns the admission gate the breaker's calls go through.
func (b *Breaker) Gate() *redisio.Gate {
	return b.gate.Load()
}

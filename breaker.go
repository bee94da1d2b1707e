package ratelimit

import (
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/breaker"
	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/ratelimit-go/ratelimit/internal/redisio"
)

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

// breakerState returns s as a BreakerState: internal/breaker's states are
// numbered as BreakerState's (checked at compile time below).
func breakerState(s breaker.State) BreakerState { return BreakerState(s) }

// The states of internal/breaker and BreakerState are numbered alike: an
// index other than 0 does not compile.
var _ = [1]struct{}{}[BreakerState(breaker.Closed)-BreakerClosed]
var _ = [1]struct{}{}[BreakerState(breaker.HalfOpen)-BreakerHalfOpen]
var _ = [1]struct{}{}[BreakerState(breaker.Open)-BreakerOpen]

// BreakerChange is one state change of a circuit breaker.
type BreakerChange struct {
	// Breaker names the breaker: "redis" for a single Redis, "slots
	// 0-63" and so on for the breakers of a Redis Cluster's slot ranges.
	Breaker string
	// From and To are the states before and after the change.
	From, To BreakerState
}

// newBreakers returns the breakers in front of a client (see
// internal/breaker), with s's thresholds, reporting their changes to
// changes, all in front of one shared admission gate; on a Redis Cluster,
// followMasters then gives each master a gate of its own, shared by the
// breakers of its slot ranges.
func newBreakers(cluster bool, s *settings, changes *breaker.Queue) breaker.Set {
	c := breaker.Config{
		TripAfter:  s.TripAfter,
		ProbeAfter: s.ProbeAfter,
		Successful: redisAnswered,
		Excluded:   callerLeft,
		Changes:    changes,
	}
	return breaker.NewSet(cluster, c, redisio.NewGate(s.Timeout))
}

// redisAnswered reports whether a request sent through a breaker, which
// returned a *callError unwrapped or nil, counts as a success: it
// succeeded, or Redis answered that it was misused.
func redisAnswered(err error) bool {
	ce, ok := err.(*callError)
	return err == nil || ok && ce.cause == misuse
}

// callerLeft reports whether a request sent through a breaker failed
// because its caller's context ended: the breaker does not count it.
func callerLeft(err error) bool {
	ce, ok := err.(*callError)
	return ok && ce.cause == callerGone
}

// pairBreaker returns the breaker of bs in front of k's keys under p: the
// one breaker of a single Redis, or, on a Redis Cluster, that of the slot
// of the key of k's events (what send is given for its calls).
func pairBreaker(bs *breaker.Set, prefix string, k *lkey, p *plan) *breaker.Breaker {
	if !bs.Cluster() {
		return bs.All()[0]
	}
	var b strings.Builder
	b.Grow(pair.KeyLen(prefix, *k))
	pair.WriteKey(&b, prefix, *k, p.alg.redis.letter())
	return bs.ForKey(b.String())
}

package breaker

import (
	"fmt"

	"github.com/ratelimit-go/ratelimit/internal/redisio"
)

// SlotsPerRange is how many consecutive slots share one breaker on a Redis
// Cluster. A master owns whole ranges of slots, so a master that goes down
// opens the breakers of its ranges and leaves the others closed; only the
// few ranges that straddle two masters mix them.
const SlotsPerRange = 64

// Set is the breakers in front of one client: one for a single Redis, one
// per range of SlotsPerRange slots for a Redis Cluster, so that keys whose
// master is healthy stay on Redis while another master is down.
type Set struct {
	all     []*Breaker
	cluster bool
}

// NewSet returns the breakers in front of a single Redis, or of a Redis
// Cluster when cluster is set, all closed and sending through the one
// shared gate; on a Cluster, SetGate then gives each master's ranges a
// gate of their own.
func NewSet(cluster bool, c Config, shared *redisio.Gate) Set {
	if !cluster {
		return Set{all: []*Breaker{New("redis", c, shared)}}
	}
	all := make([]*Breaker, redisio.ClusterSlots/SlotsPerRange)
	for i := range all {
		name := fmt.Sprintf("slots %d-%d", i*SlotsPerRange, (i+1)*SlotsPerRange-1)
		all[i] = New(name, c, shared)
	}
	return Set{all: all, cluster: true}
}

// Cluster reports whether the set stands in front of a Redis Cluster.
func (s *Set) Cluster() bool {
	return s.cluster
}

// All returns every breaker of the set, in the order of their slots. The
// caller must not modify the slice.
func (s *Set) All() []*Breaker {
	return s.all
}

// ForKey returns the breaker in front of the Redis key: the one breaker
// of a single Redis, or that of the key's slot range on a Cluster.
func (s *Set) ForKey(key string) *Breaker {
	if !s.cluster {
		return s.all[0]
	}
	return s.all[redisio.KeySlot(key)/SlotsPerRange]
}

// SetGate makes the breakers of the slots first through last, which a
// Cluster's map gives one master, send through that master's gate g; a
// range that straddles two masters sends through the gate given last. The
// set is a Cluster's, and 0 <= first <= last < redisio.ClusterSlots.
func (s *Set) SetGate(first, last int, g *redisio.Gate) {
	for i := first / SlotsPerRange; i <= last/SlotsPerRange; i++ {
		s.all[i].gate.Store(g)
	}
}

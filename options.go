package ratelimit

import (
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"
)

// Defaults used where an Options field is zero.
const (
	DefaultTimeout    = 100 * time.Millisecond
	DefaultTripAfter  = 5
	DefaultProbeAfter = 5 * time.Second
	// DefaultHeartbeatInterval is how often a Limiter announces itself to
	// Redis when Options.HeartbeatInterval is 0 (see Options.DegradedShare).
	DefaultHeartbeatInterval = 5 * time.Second
)

// minHeartbeat is the shortest Options.HeartbeatInterval: an instance counts
// as live for three heartbeats, which must outlast a round trip to Redis.
const minHeartbeat = 10 * time.Millisecond

// Clock tells the current time. Pass one as Options.Clock to make decisions
// at times of your choosing (package ratelimittest has a fake).
type Clock interface {
	Now() time.Time
}

// Options configure a Limiter. The zero value is a sensible configuration:
// each field documents its default.
type Options struct {
	// Clock, when set, is the time every decision is made at: each call
	// reads it once, decides locally at that time and passes it to the
	// scripts on Redis. When nil, the scripts read Redis' own TIME (one clock
	// for every application instance, immune to skew between them) and the
	// local path the process clock. The machinery around the decisions
	// (Timeout, the circuit breaker's ProbeAfter, admission control, log
	// throttling) always runs on the process clock: it measures how long
	// Redis takes, not the time decisions are made at.
	Clock Clock
	// Timeout is the budget of one Redis call; a call that takes longer is
	// decided locally. The default is DefaultTimeout (100ms).
	Timeout time.Duration
	// TripAfter is the number of consecutive failed Redis calls that opens
	// the circuit breaker. The default is DefaultTripAfter (5).
	TripAfter int
	// ProbeAfter is how long the breaker stays open before it lets one call
	// probe Redis again. The default is DefaultProbeAfter (5s).
	ProbeAfter time.Duration
	// LocalCapacity is the number of keys the local limiter keeps logs for
	// (and, separately, violation records and bans for), least recently used
	// first out. The default is DefaultLocalCapacity (100,000).
	LocalCapacity int
	// KeyPrefix starts every Redis key; it may not contain braces. The
	// default is DefaultKeyPrefix ("rl:").
	KeyPrefix string
	// Degraded says how rules are decided while Redis cannot be used, unless
	// a Rule says otherwise. The default is DegradedLocal.
	Degraded DegradedPolicy
	// DegradedShare scales the rate each process enforces while degraded.
	// The degraded Rate is ceil(Rate × share), at least 1; an AllowN above
	// it is rejected. It must be in (0, 1].
	//
	// The default, 0, sizes the share to the fleet: while Redis is healthy
	// every Limiter on it announces itself (see HeartbeatInterval), and one
	// that falls back enforces ceil(Rate / N), at least 1, where N is the
	// number of live Limiters under the same KeyPrefix it last saw
	// (Stats.Instances), so that the fleet as a whole admits about the
	// rule's rate. Before its first announcement succeeded, and with
	// HeartbeatInterval negative, N is 1.
	// Give each service its own KeyPrefix, or the fleets count each other.
	// Set DegradedShare to 1 to have every process enforce the whole rate
	// whatever the fleet's size.
	DegradedShare float64
	// HeartbeatInterval is how often the Limiter announces itself to Redis
	// while Redis can be used: a Limiter counts as live while its last
	// announcement is less than three heartbeats old (by Redis' clock), and
	// the live count sizes the degraded share (see DegradedShare). The
	// announcement is one small script on one key per KeyPrefix, sent from a
	// goroutine of the Limiter's through the same breaker and admission
	// control as every call, and never with the last free admission slot;
	// Close withdraws it. The default is DefaultHeartbeatInterval (5s); it
	// must be at least 10ms. Negative turns the announcement off: the Limiter then
	// counts as alone.
	//
	// With the announcement, the Limiter also holds a subscription to the
	// fleet's channel (named as its key) on a connection of its own, whose
	// end tells it of a restart or failover of Redis that none of its calls
	// met (docs/fallback.md, "Who learns of an outage"). An ACL user needs
	// that channel: &<KeyPrefix>v1:{instances}.
	HeartbeatInterval time.Duration
	// Logger receives breaker state changes and Redis failures (each kind at
	// most once per LogInterval) and misconfiguration such as NOAUTH, which
	// is logged as an error. The default is slog.Default().
	Logger *slog.Logger
	// LogInterval is the least time between two log lines of one kind, so an
	// outage does not flood the log. The default is 10s.
	LogInterval time.Duration
	// ShieldMax bounds the hot-key shield. A rejection that nothing but a
	// Reset can lift early (a full window, or a ban) is cached per process,
	// and the same call (as many events) is answered from the cache,
	// without a Redis round trip, until it could pass; under a penalty each
	// answer counts a violation, which the key's next call delivers to
	// Redis. A Reset through this Limiter clears the cache at once; a Reset
	// made by another process is seen here when the cached rejection ends,
	// or after ShieldMax when ShieldMax > 0. Negative turns the shield off,
	// and with it the crowd at a full key (see docs/operations.md, "Hot keys and large limits").
	// The default, 0, caches each rejection until it ends.
	ShieldMax time.Duration
	// WriteBackMax bounds the events decided without Redis (during an
	// outage, or for calls admission control shed) that wait to be written
	// back to Redis once it can be used again, over all keys. The
	// write-back runs in the background, only while admission control has
	// a slot to spare, so that Redis' state counts every event allowed in
	// every process, whatever the rule's kind (see docs/fallback.md, "Write-back"). When more events wait,
	// the oldest are dropped: those of the least recently used keys near
	// the new one in the local limiter first. Events dropped, and events
	// still waiting when the Limiter is closed, are counted in
	// Stats.WriteBackDropped; Redis never learns of them. Events that no
	// longer count (out of the window, refilled into a GCRA bucket, in a
	// quota's period that ended) are not sent, nor counted as dropped. The default, 0, is
	// DefaultWriteBackMax (100,000); negative is ErrInvalidOptions. Each
	// waiting event costs about 16 bytes.
	WriteBackMax int
	// OnDecision, when set, is called after every decision: each Allow,
	// AllowN, Peek and Wait try, and each pair AllowAll or AllowGroup
	// decides (see Decision), on the caller's goroutine, with the decision,
	// where it was made and how long it took. Keep it fast: it is on the
	// request path.
	OnDecision func(Decision)
	// OnBreakerChange, when set, is called after each state change of a
	// circuit breaker, in order, from a goroutine of the Limiter's and never
	// under a lock of its: it may call back into the Limiter. A single Redis
	// has one breaker; a Redis Cluster has one per range of 64 slots.
	OnBreakerChange func(BreakerChange)
}

// settings is a validated Options with defaults filled in.
type settings struct {
	Options
	// fleet is the live Limiters the last heartbeat counted, 0 before one
	// succeeded; nil for settings that belong to no Limiter. It is shared,
	// so that copies of the settings see one count.
	fleet *atomic.Int64
}

// settings checks o and returns it with every default filled in, ready
// for a Limiter.
func (o Options) settings() (settings, error) {
	if err := o.check(); err != nil {
		return settings{Options: o}, err
	}
	s := settings{Options: o, fleet: new(atomic.Int64)}
	orDefault(&s.Timeout, DefaultTimeout)
	orDefault(&s.TripAfter, DefaultTripAfter)
	orDefault(&s.ProbeAfter, DefaultProbeAfter)
	orDefault(&s.LocalCapacity, DefaultLocalCapacity)
	orDefault(&s.KeyPrefix, DefaultKeyPrefix)
	orDefault(&s.Degraded, DegradedLocal)
	orDefault(&s.HeartbeatInterval, DefaultHeartbeatInterval)
	orDefault(&s.WriteBackMax, DefaultWriteBackMax)
	orDefault(&s.LogInterval, 10*time.Second)
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s, nil
}

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// check returns an error wrapping ErrInvalidOptions for the first field of
// o that is out of range, and nil when every field is in range.
func (o *Options) check() error {
	switch {
	case o.Timeout < 0:
		return fmt.Errorf("%w: Timeout %v is negative", ErrInvalidOptions, o.Timeout)
	case o.TripAfter < 0:
		return fmt.Errorf("%w: TripAfter %d is negative", ErrInvalidOptions, o.TripAfter)
	case o.ProbeAfter < 0:
		return fmt.Errorf("%w: ProbeAfter %v is negative", ErrInvalidOptions, o.ProbeAfter)
	case o.LocalCapacity < 0:
		return fmt.Errorf("%w: LocalCapacity %d is negative", ErrInvalidOptions, o.LocalCapacity)
	case o.Degraded < DegradedDefault || o.Degraded > DegradedDeny:
		return fmt.Errorf("%w: unknown Degraded policy %d", ErrInvalidOptions, o.Degraded)
	case math.IsNaN(o.DegradedShare) || o.DegradedShare < 0 || o.DegradedShare > 1:
		return fmt.Errorf("%w: DegradedShare %v is outside (0, 1]", ErrInvalidOptions, o.DegradedShare)
	case o.WriteBackMax < 0:
		return fmt.Errorf("%w: WriteBackMax %d is negative", ErrInvalidOptions, o.WriteBackMax)
	case o.HeartbeatInterval > 0 && o.HeartbeatInterval < minHeartbeat:
		return fmt.Errorf("%w: HeartbeatInterval %v is shorter than %v", ErrInvalidOptions, o.HeartbeatInterval, minHeartbeat)
	case o.LogInterval < 0:
		return fmt.Errorf("%w: LogInterval %v is negative", ErrInvalidOptions, o.LogInterval)
	}
	return checkKeyPrefix(o.KeyPrefix)
}

// degradedRate is the rate, or any other quota of a rule (a burst), that one
// process enforces while Redis cannot be used: ceil(rate × DegradedShare)
// when the user set a share, else ceil(rate / N) for the N live Limiters
// the last heartbeat counted (1 before any); at least 1 either way. It is
// the one place that sizes a degraded quota.
func (s *settings) degradedRate(rate int64) int64 {
	if share := s.DegradedShare; share != 0 {
		if share == 1 {
			return rate
		}
		return max(1, int64(math.Ceil(float64(rate)*share)))
	}
	n := int64(1)
	if s.fleet != nil {
		n = max(1, s.fleet.Load())
	}
	return max(1, (rate+n-1)/n)
}

package main

import (
	"context"
	"net"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// limiter is what every contender is measured through: one event for key,
// allowed or not.
type limiter interface {
	Allow(ctx context.Context, key string) (bool, error)
}

// degrader is implemented by our adapter: the number of decisions made
// without Redis, which would make a remote figure measure the fallback.
type degrader interface {
	Degraded() int64
}

// spec is the rule every contender of a case enforces, as closely as its
// algorithm allows: at most rate events per window for each key.
type spec struct {
	name    string // rule name (ours) or key prefix (peers): keeps cases apart
	rate    int
	window  time.Duration
	penalty bool // ours only: the rule carries a Penalty
	// kind is ours only: the rule's Kind (a GCRA rule takes Burst = rate).
	kind ratelimit.Kind
	// prefetch is ours only: the rule's Prefetch.
	prefetch time.Duration
}

// contender builds one limiter for one measured cell. addr is the Redis
// address ("" for an in-process contender). close releases what open made.
type contender struct {
	name   string
	remote bool
	open   func(addr string, s spec) (l limiter, close func(), err error)
}

// dialTimeout is the connect timeout of every client the harness builds
// for a measured limiter: ratelimit.New asks for about Options.Timeout.
const dialTimeout = 100 * time.Millisecond

// rueidisClient is the client of our limiter and of the floor, built the
// same way for both: no client-side cache, everything else rueidis'
// defaults (auto-pipelining over one connection).
func rueidisClient(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{addr},
		DisableCache: true,
		Dialer:       net.Dialer{Timeout: dialTimeout},
	})
}

// goRedisClient is the client of the go-redis based peers, with go-redis'
// defaults (a pool of 10 connections per GOMAXPROCS) and the same connect
// timeout.
func goRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: dialTimeout})
}

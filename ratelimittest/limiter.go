package ratelimittest

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/rueidis"
)

// start is where the Clock of NewLimiter starts when Options.Clock is nil:
// a constant instant, so that a test's times are the same on every run.
func start() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }

// Limiter is a ratelimit.Limiter on an in-process Redis (miniredis) with a
// fake clock: what a test of code that limits needs, with nothing
// installed. Its decisions go through the same scripts as on a real Redis.
type Limiter struct {
	*ratelimit.Limiter
	// Clock is the limiter's clock: move it to move time. It is nil when
	// Options.Clock was a clock of another kind.
	Clock *Clock
	// Redis is the in-process server: Close and Restart it to test an
	// outage.
	Redis *miniredis.Miniredis

	client rueidis.Client
}

// NewLimiter starts an in-process Redis and returns a Limiter on it. When
// opts.Clock is nil the Limiter gets a Clock at 2026-01-01 12:00 UTC; when opts.Timeout is
// 0 it gets a second, so that a busy test machine does not turn a slow call
// into a decision made without Redis. When opts.HeartbeatInterval is 0 it
// gets -1: the Limiter is alone on its Redis, so it announces nothing (see
// ratelimit.Options.HeartbeatInterval), the Redis holds only what its
// decisions wrote, and no background call meets an outage the test makes.
// When opts.Logger is nil the Limiter logs nothing, so that a test's output
// stays quiet through the outages it makes; set a Logger to see the lines.
// Close stops everything.
func NewLimiter(opts ratelimit.Options) (*Limiter, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("ratelimittest: starting miniredis: %w", err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{mr.Addr()},
		DisableCache:      true, // miniredis has no client-side caching
		ForceSingleClient: true,
	})
	if err != nil {
		mr.Close()
		return nil, fmt.Errorf("ratelimittest: connecting to miniredis: %w", err)
	}
	clk, _ := opts.Clock.(*Clock) // nil for a Clock of another kind
	if opts.Clock == nil {
		clk = NewClock(start())
		opts.Clock = clk
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = -1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	lim, err := ratelimit.New(client, opts)
	if err != nil {
		client.Close()
		mr.Close()
		return nil, err
	}
	return &Limiter{Limiter: lim, Clock: clk, Redis: mr, client: client}, nil
}

// Close closes the Limiter, its client and the in-process Redis.
func (l *Limiter) Close() {
	l.Limiter.Close()
	l.client.Close()
	l.Redis.Close()
}

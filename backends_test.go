package ratelimit_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
)

// epoch is where the suites' fake clocks start: a real-world date with a
// microsecond fraction, so timestamps are as large as in production.
var epoch = time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC)

// backend makes limiters that keep their state in one kind of store.
type backend struct {
	name string
	// new returns a limiter on a fresh, empty store, closed at cleanup.
	new func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter
}

// localBackend is the local-only limiter (no Redis).
var localBackend = backend{name: "local", new: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
	return newLimiter(t, nil, opts)
}}

// miniredisBackend keeps state in an in-process miniredis.
var miniredisBackend = backend{name: "miniredis", new: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
	mr := miniredis.RunT(t)
	return newLimiter(t, newClient(t, mr.Addr()), opts)
}}

// backends returns every backend the behaviour suite runs against.
func backends(t testing.TB) []backend {
	return append([]backend{localBackend, miniredisBackend}, realBackends(t)...)
}

func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  addrs,
		DisableCache: true,
		Dialer:       dialer(),
	})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%v): %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

func newLimiter(t testing.TB, c rueidis.Client, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(c, opts)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func newClock() *ratelimittest.Clock { return ratelimittest.NewClock(epoch) }

// testOptions are the options of tests about decisions, not outages: a fake
// clock, and a Timeout long enough that a loaded machine (or -race) never
// turns a slow call into a degraded decision.
func testOptions(clk ratelimit.Clock) ratelimit.Options {
	return ratelimit.Options{Clock: clk, Timeout: 10 * time.Second}
}

func ratelimitClientOption(addrs ...string) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: addrs, DisableCache: true}
}

// Package testkit holds the helpers that the root package's tests and the
// suites in reliability/ share: fake clocks that start at one instant,
// limiters and clients closed when the test ends, a log sink, the options
// of an outage test, and whether a test may start a real redis-server.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
)

// Epoch returns where the suites' fake clocks start: a real-world date with
// a microsecond fraction, so timestamps are as large as in production.
func Epoch() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC) }

// NewClock returns a fake clock at Epoch.
func NewClock() *ratelimittest.Clock { return ratelimittest.NewClock(Epoch()) }

// Options are the options of tests about decisions, not outages: the clock
// clk, a Timeout long enough that a loaded machine (or -race) never turns a
// slow call into a degraded decision, and no heartbeat, so that Redis holds
// and runs only what the decisions wrote (the fleet's tests turn it on).
func Options(clk ratelimit.Clock) ratelimit.Options {
	return ratelimit.Options{Clock: clk, Timeout: 10 * time.Second, HeartbeatInterval: -1}
}

// ClientOption is a rueidis option for the servers at addrs, without
// client-side caching (miniredis has none).
func ClientOption(addrs ...string) rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: addrs, DisableCache: true}
}

// NewClient returns a client of the servers at addrs, closed at cleanup.
func NewClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	opt := ClientOption(addrs...)
	opt.Dialer = net.Dialer{Timeout: time.Second}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("rueidis.NewClient(%v): %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// NewLimiter returns ratelimit.New(c, opts), closed at cleanup.
func NewLimiter(t testing.TB, c rueidis.Client, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(c, opts)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// Allow returns what l.Allow decides and fails the test on an error. It
// asserts nothing about the decision (allowed or rejected): the caller
// checks the Result.
func Allow(t testing.TB, l *ratelimit.Limiter, rule ratelimit.Rule, key string) ratelimit.Result {
	t.Helper()
	r, err := l.Allow(context.Background(), rule, key)
	if err != nil {
		t.Fatalf("Allow(%q, %q): %v", rule.Name, key, err)
	}
	return r
}

// HaveRedis reports whether the test may start a real redis-server: never
// under -short, and only when redis-server and redis-cli are installed.
// When they are not, the test skips its real-Redis part (and says how to
// install them), unless RATELIMIT_REQUIRE_REDIS=1 makes that a failure.
func HaveRedis(t testing.TB) bool {
	t.Helper()
	if testing.Short() {
		t.Log("real-Redis backends skipped under -short")
		return false
	}
	_, errServer := exec.LookPath("redis-server")
	_, errCLI := exec.LookPath("redis-cli")
	if errServer == nil && errCLI == nil {
		return true
	}
	if os.Getenv(redistest.RequireEnv) == "1" {
		redistest.Binary(t)
		redistest.CLIBinary(t)
	}
	t.Log("real-Redis backends skipped: redis-server or redis-cli not found; install them with `apt-get install redis-server redis-tools`")
	return false
}

// prefixes hands each limiter on a shared real server its own key space, so
// that every case starts from an empty store.
var prefixes atomic.Int64

// Isolated returns opts with a key prefix no other limiter of this process
// uses, unless opts has a prefix already.
func Isolated(opts ratelimit.Options) ratelimit.Options {
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = fmt.Sprintf("t%d:", prefixes.Add(1))
	}
	return opts
}

// SyncBuffer is a log sink that many goroutines may write to.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StateLog records the breaker's state changes as the hook reports them.
type StateLog struct {
	mu      sync.Mutex
	changes []string
}

// Hook is an Options.OnBreakerChange that records c.
func (s *StateLog) Hook(c ratelimit.BreakerChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, c.From.String()+"->"+c.To.String())
}

func (s *StateLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.changes, " ")
}

// OutageOptions trip the breaker after two failures and probe again soon;
// the limiter logs to logs, and reports breaker changes to states (if not
// nil).
func OutageOptions(clk ratelimit.Clock, logs *SyncBuffer, states *StateLog) ratelimit.Options {
	opts := ratelimit.Options{
		Clock:      clk,
		Timeout:    time.Second,
		TripAfter:  2,
		ProbeAfter: 20 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
	}
	if states != nil {
		opts.OnBreakerChange = states.Hook
	}
	return opts
}

// Eventually polls cond every few milliseconds for up to 10s: a bound on a
// hang, not a speed check.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

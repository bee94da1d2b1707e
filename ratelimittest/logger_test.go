package ratelimittest_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// syncBuffer is a log sink the Limiter's goroutines may write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// outageAndClose decides one call on the Limiter's Redis, one degraded
// while that Redis is closed (an event owed to Redis), and closes the
// Limiter before the event could be written back.
func outageAndClose(t *testing.T, lim *ratelimittest.Limiter) {
	t.Helper()
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(5)}
	if r, err := lim.Allow(context.Background(), rule, "k"); err != nil || r.Degraded {
		t.Fatalf("Allow = %+v, %v; want decided on Redis", r, err)
	}
	lim.Redis.Close()
	if r, err := lim.Allow(context.Background(), rule, "k"); err != nil || !r.Degraded {
		t.Fatalf("Allow with Redis closed = %+v, %v; want degraded", r, err)
	}
	lim.Close()
	if s := lim.Stats(); s.WriteBackDropped != 1 {
		t.Fatalf("WriteBackDropped = %d, want 1: the event owed at Close", s.WriteBackDropped)
	}
}

// TestNewLimiterLogsNothingByDefault: a Limiter of NewLimiter without a
// Logger writes no line through an outage and a Close, not even to
// slog.Default.
func TestNewLimiterLogsNothingByDefault(t *testing.T) {
	var logs syncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	lim, err := ratelimittest.NewLimiter(ratelimit.Options{TripAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	outageAndClose(t, lim)
	if logs.String() != "" {
		t.Errorf("a Limiter without a Logger logged:\n%s", logs.String())
	}
}

// TestNewLimiterLogsToItsLogger: with a Logger, the outage is logged, and
// the event dropped at Close is reported as what it is (docs/fallback.md: events
// still waiting when the Limiter is closed are dropped), at level info,
// not as a warning that something was written back.
func TestNewLimiterLogsToItsLogger(t *testing.T) {
	var logs syncBuffer
	lim, err := ratelimittest.NewLimiter(ratelimit.Options{TripAfter: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	outageAndClose(t, lim)
	out := logs.String()
	if !strings.Contains(out, "level=WARN") {
		t.Errorf("no warning of the outage in the log:\n%s", out)
	}
	var closed string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "wrote back") {
			t.Errorf("a write-back line when nothing was written back: %s", line)
		}
		if strings.Contains(line, "closed with events") {
			closed = line
		}
	}
	if !strings.Contains(closed, "level=INFO") || !strings.Contains(closed, "dropped=1") {
		t.Errorf("the line about the event dropped at Close = %q; want level=INFO and dropped=1 in:\n%s", closed, out)
	}
}

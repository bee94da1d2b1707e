package ratelimit_test

// The Limiter's own tests: its behaviour on every backend without a
// server (the conformance suite), its Options checked by New, and every
// method's answer to a nil context.

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/conformance"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// TestConformance runs the behaviour suite (internal/conformance) on the
// backends that need no server: the local limiter and an in-process
// miniredis. reliability/ runs the same suite on a real redis-server and a
// Redis Cluster.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Local(), conformance.Miniredis())
}

// TestInvalidOptions: New refuses Options it cannot honour, with an error
// wrapping ErrInvalidOptions.
func TestInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts ratelimit.Options
	}{
		{"negative Timeout", ratelimit.Options{Timeout: -1}},
		{"negative TripAfter", ratelimit.Options{TripAfter: -1}},
		{"negative ProbeAfter", ratelimit.Options{ProbeAfter: -1}},
		{"negative LocalCapacity", ratelimit.Options{LocalCapacity: -1}},
		{"brace in KeyPrefix", ratelimit.Options{KeyPrefix: "app{1}:"}},
		{"unknown Degraded", ratelimit.Options{Degraded: 9}},
		{"share above 1", ratelimit.Options{DegradedShare: 1.5}},
		{"negative share", ratelimit.Options{DegradedShare: -0.5}},
		{"NaN share", ratelimit.Options{DegradedShare: math.NaN()}},
		{"negative LogInterval", ratelimit.Options{LogInterval: -1}},
		{"negative WriteBackMax", ratelimit.Options{WriteBackMax: -1}},
		{"HeartbeatInterval under 10ms", ratelimit.Options{HeartbeatInterval: time.Millisecond}},
	} {
		if l, err := ratelimit.New(nil, c.opts); !errors.Is(err, ratelimit.ErrInvalidOptions) || l != nil {
			t.Errorf("New with %s: %v, %v; want nil, ErrInvalidOptions", c.name, l, err)
		}
	}
}

// TestNilContext: every method that takes a context answers a nil one with
// ErrNilContext, on the local path and on Redis alike, and records nothing.
func TestNilContext(t *testing.T) {
	var nilCtx context.Context // a nil context, as a caller's bug passes it
	rule := ratelimit.Rule{Name: "nil-ctx", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{BanAfter: 3, BanFor: time.Minute}}
	pair := []ratelimit.Check{{Rule: rule, Key: "k"}}
	calls := []struct {
		name string
		call func(l *ratelimit.Limiter) error
	}{
		{"Allow", func(l *ratelimit.Limiter) error { _, err := l.Allow(nilCtx, rule, "k"); return err }},
		{"AllowN", func(l *ratelimit.Limiter) error { _, err := l.AllowN(nilCtx, rule, "k", 1); return err }},
		{"Peek", func(l *ratelimit.Limiter) error { _, err := l.Peek(nilCtx, rule, "k"); return err }},
		{"Wait", func(l *ratelimit.Limiter) error { _, err := l.Wait(nilCtx, rule, "k"); return err }},
		{"AllowAll", func(l *ratelimit.Limiter) error { _, err := l.AllowAll(nilCtx, pair); return err }},
		{"AllowAll/no checks", func(l *ratelimit.Limiter) error { _, err := l.AllowAll(nilCtx, nil); return err }},
		{"AllowGroup", func(l *ratelimit.Limiter) error { _, err := l.AllowGroup(nilCtx, "g", pair); return err }},
		{"Reset", func(l *ratelimit.Limiter) error { return l.Reset(nilCtx, rule, "k") }},
		{"Ban", func(l *ratelimit.Limiter) error { return l.Ban(nilCtx, rule, "k", time.Minute) }},
	}
	backends := []struct {
		name string
		new  func(t *testing.T) *ratelimit.Limiter
	}{
		{"local", func(t *testing.T) *ratelimit.Limiter {
			l, err := ratelimit.New(nil, ratelimit.Options{Clock: ratelimittest.NewClock(time.Unix(1e9, 0))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Close)
			return l
		}},
		{"miniredis", func(t *testing.T) *ratelimit.Limiter {
			l, err := ratelimittest.NewLimiter(ratelimit.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Close)
			return l.Limiter
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			l := b.new(t)
			for _, c := range calls {
				if err := c.call(l); !errors.Is(err, ratelimit.ErrNilContext) {
					t.Errorf("%s with a nil context: %v; want ErrNilContext", c.name, err)
				}
			}
			// Nothing was recorded: the one event the rule allows is there.
			if r, err := l.Allow(context.Background(), rule, "k"); err != nil || !r.Allowed || r.Remaining != 0 || r.Banned {
				t.Errorf("Allow after the nil-context calls = %+v, %v; want the rule's one event allowed", r, err)
			}
		})
	}
}

package ratelimit_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// countingClock counts its readings.
type countingClock struct {
	at    time.Time
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.at
}

// TestEachCallReadsTheClockOnce: every method that decides reads
// Options.Clock once per decision, whatever path it takes (local-only, on
// Redis, while Redis is down), so that every part of a decision is made at
// one instant.
func TestEachCallReadsTheClockOnce(t *testing.T) {
	penalized := ratelimit.Rule{Name: "once", Limit: ratelimit.PerMinute(2),
		Penalty: &ratelimit.Penalty{BanAfter: 3, BanFor: time.Minute}}
	other := ratelimit.Rule{Name: "once:other", Limit: ratelimit.PerMinute(5)}
	ctx := context.Background()
	calls := []struct {
		name  string
		reads int64
		call  func(l *ratelimit.Limiter) error
	}{
		{"Allow", 1, func(l *ratelimit.Limiter) error { _, err := l.Allow(ctx, penalized, "k"); return err }},
		{"AllowN", 1, func(l *ratelimit.Limiter) error { _, err := l.AllowN(ctx, penalized, "n", 2); return err }},
		{"Peek", 1, func(l *ratelimit.Limiter) error { _, err := l.Peek(ctx, penalized, "k"); return err }},
		{"AllowAll of two pairs", 2, func(l *ratelimit.Limiter) error {
			_, err := l.AllowAll(ctx, []ratelimit.Check{{Rule: penalized, Key: "a"}, {Rule: other, Key: "a"}})
			return err
		}},
		{"AllowGroup of two pairs", 1, func(l *ratelimit.Limiter) error {
			_, err := l.AllowGroup(ctx, "g", []ratelimit.Check{{Rule: penalized, Key: "a"}, {Rule: other, Key: "a"}})
			return err
		}},
		{"Ban", 1, func(l *ratelimit.Limiter) error { return l.Ban(ctx, penalized, "b", time.Minute) }},
	}
	for _, mode := range []string{"local", "redis", "redis down"} {
		t.Run(mode, func(t *testing.T) {
			clk := &countingClock{at: testkit.Epoch()}
			opts := testkit.Options(clk)
			var l *ratelimit.Limiter
			switch mode {
			case "local":
				l = testkit.NewLimiter(t, nil, opts)
			default:
				mr := miniredis.RunT(t)
				opts.Timeout = time.Second
				opts.Logger = slog.New(slog.DiscardHandler)
				l = testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
				if mode == "redis down" {
					mr.Close()
				}
			}
			for _, c := range calls {
				before := clk.reads.Load()
				err := c.call(l)
				if err != nil && !errors.Is(err, ratelimit.ErrUnavailable) {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got := clk.reads.Load() - before; got != c.reads {
					t.Errorf("%s read the clock %d times, want %d", c.name, got, c.reads)
				}
			}
		})
	}
}

// TestAllowGroupReportsEachPair: AllowGroup reports one Decision per Result
// it returns, on Redis and without it, and one Decision with the error when
// it fails.
func TestAllowGroupReportsEachPair(t *testing.T) {
	perSecond := ratelimit.Rule{Name: "group:s", Limit: ratelimit.PerSecond(1)}
	perMinute := ratelimit.Rule{Name: "group:m", Limit: ratelimit.PerMinute(10)}
	checks := []ratelimit.Check{{Rule: perSecond, Key: "u"}, {Rule: perMinute, Key: "u", N: 2}}
	ctx := context.Background()
	for _, mode := range []struct {
		name string
		path ratelimit.Path
	}{{"local", ratelimit.PathLocal}, {"redis", ratelimit.PathRedis}, {"redis down", ratelimit.PathLocal}} {
		t.Run(mode.name, func(t *testing.T) {
			var seen decisions
			opts := testkit.Options(testkit.NewClock())
			opts.OnDecision = seen.hook
			var l *ratelimit.Limiter
			if mode.name == "local" {
				l = testkit.NewLimiter(t, nil, opts)
			} else {
				mr := miniredis.RunT(t)
				opts.Logger = slog.New(slog.DiscardHandler)
				l = testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
				if mode.name == "redis down" {
					mr.Close()
				}
			}
			first, err := l.AllowGroup(ctx, "user", checks)
			if err != nil || len(first) != 2 || !first[1].Allowed {
				t.Fatalf("first AllowGroup = %+v, %v", first, err)
			}
			second, err := l.AllowGroup(ctx, "user", checks) // denied by the first pair
			if err != nil || len(second) != 1 || second[0].Allowed {
				t.Fatalf("second AllowGroup = %+v, %v", second, err)
			}
			if _, err := l.AllowGroup(ctx, "", checks); !errors.Is(err, ratelimit.ErrInvalidKey) {
				t.Fatalf("AllowGroup with an empty group: %v", err)
			}
			if len(seen.all) != 4 {
				t.Fatalf("%d decisions reported, want 4 (2 pairs, 1 pair, 1 error): %+v", len(seen.all), seen.all)
			}
			for i, want := range []struct {
				rule  string
				n     int
				res   ratelimit.Result
				path  ratelimit.Path
				isErr bool
			}{
				{"group:s", 1, first[0], mode.path, false},
				{"group:m", 2, first[1], mode.path, false},
				{"group:s", 1, second[0], mode.path, false},
				{"group:s", 1, ratelimit.Result{}, ratelimit.PathNone, true},
			} {
				d := seen.all[i]
				if d.Rule.Name != want.rule || d.Key != "u" || d.N != want.n || d.Result != want.res || d.Path != want.path || (d.Err != nil) != want.isErr || d.Peek {
					t.Errorf("decision %d reported as %+v, want rule %s n %d result %+v path %v error %v", i, d, want.rule, want.n, want.res, want.path, want.isErr)
				}
			}
		})
	}
}

package ratelimit_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// benchKeys is the number of distinct keys of the many-keys benchmarks.
const benchKeys = 10_000

var benchKeyNames = func() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
}()

// The benchmarks' rules: a plain rule that mostly allows (benchPlain), a
// hot rule that mostly rejects (benchHot), and a penalty rule
// (benchPenalty).
var (
	benchPlain   = ratelimit.Rule{Name: "bench", Limit: ratelimit.PerSecond(1_000_000)}
	benchHot     = ratelimit.Rule{Name: "hot", Limit: ratelimit.PerMinute(10)}
	benchPenalty = ratelimit.Rule{Name: "bench-penalty", Limit: ratelimit.PerSecond(1_000_000),
		Penalty: &ratelimit.Penalty{WarnAfter: 5, BanAfter: 1 << 30, BanFor: time.Second}}
	// The other kinds, mostly allowing: a bucket as in benchmarks/cmd/compare's
	// case G (1,000,000 per second, Burst = Rate) and a daily quota.
	benchGCRA  = ratelimit.Rule{Name: "bench-gcra", Kind: ratelimit.GCRA, Limit: ratelimit.PerSecond(1_000_000)}
	benchQuota = ratelimit.Rule{Name: "bench-quota", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1 << 30, Period: ratelimit.Day}}
)

func benchOptions() ratelimit.Options {
	return ratelimit.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// runAllow measures Allow over the given keys, round robin per goroutine.
// A degraded decision on a limiter with Redis fails the benchmark: it would
// measure the fallback instead.
func runAllow(b *testing.B, l *ratelimit.Limiter, rule ratelimit.Rule, keys []string) {
	ctx := context.Background()
	var next, degraded atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			i++
			r, err := l.Allow(ctx, rule, keys[i%len(keys)])
			if err != nil {
				b.Error(err)
				return
			}
			if r.Degraded {
				degraded.Add(1)
			}
		}
	})
	if n := degraded.Load(); n > 0 {
		b.Fatalf("%d of %d decisions were degraded: the numbers measure the fallback", n, b.N)
	}
}

func benchSuite(b *testing.B, l *ratelimit.Limiter) {
	hot := []string{"hot"}
	b.Run("many-keys", func(b *testing.B) { runAllow(b, l, benchPlain, benchKeyNames) })
	b.Run("many-keys-penalty", func(b *testing.B) { runAllow(b, l, benchPenalty, benchKeyNames) })
	b.Run("many-keys-gcra", func(b *testing.B) { runAllow(b, l, benchGCRA, benchKeyNames) })
	b.Run("many-keys-quota", func(b *testing.B) { runAllow(b, l, benchQuota, benchKeyNames) })
	b.Run("hot-key-rejected", func(b *testing.B) { runAllow(b, l, benchHot, hot) })
}

func BenchmarkAllowLocal(b *testing.B) {
	benchSuite(b, testkit.NewLimiter(b, nil, benchOptions()))
}

// BenchmarkAllowLocalGoroutines measures the local-only limiter at the
// goroutine counts of benchmarks/cmd/compare's case D (1, 16, 256), on
// many keys and on one hot key.
func BenchmarkAllowLocalGoroutines(b *testing.B) {
	for _, g := range []int{1, 16, 256} {
		l := testkit.NewLimiter(b, nil, benchOptions())
		b.Run("many-keys/g="+strconv.Itoa(g), func(b *testing.B) { runAllowG(b, l, benchPlain, benchKeyNames, g) })
		b.Run("hot-key/g="+strconv.Itoa(g), func(b *testing.B) { runAllowG(b, l, benchHot, []string{"hot"}, g) })
	}
}

// runAllowG measures Allow from exactly g goroutines sharing b.N calls,
// each walking keys round robin from its own offset.
func runAllowG(b *testing.B, l *ratelimit.Limiter, rule ratelimit.Rule, keys []string, g int) {
	ctx := context.Background()
	var next atomic.Int64
	runG(b, g, func(w int) {
		i := w * 7919
		for next.Add(1) <= int64(b.N) {
			i++
			if _, err := l.Allow(ctx, rule, keys[i%len(keys)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// runG reports allocations, resets the timer and runs work(w) on g
// goroutines, w from 0 to g-1, until all return.
func runG(b *testing.B, g int, work func(w int)) {
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w)
		}()
	}
	wg.Wait()
}

func BenchmarkAllowMiniredis(b *testing.B) {
	mr := miniredis.RunT(b)
	benchSuite(b, testkit.NewLimiter(b, testkit.NewClient(b, mr.Addr()), benchOptions()))
}

func BenchmarkAllowRedis(b *testing.B) {
	if !testkit.HaveRedis(b) {
		b.Skip("no redis-server")
	}
	server := redistest.Start(b, redistest.Options{})
	benchSuite(b, testkit.NewLimiter(b, testkit.NewClient(b, server.Addr()), benchOptions()))
}

// BenchmarkAllowDegraded measures decisions while Redis cannot be used (the
// breaker open, 16 goroutines on many keys): the local log, and the events
// owed to Redis for the write-back, bounded by WriteBackMax, so a long run
// also measures dropping the oldest of them.
func BenchmarkAllowDegraded(b *testing.B) {
	mr := miniredis.RunT(b)
	opts := benchOptions()
	opts.TripAfter, opts.ProbeAfter = 1, time.Hour
	l := testkit.NewLimiter(b, testkit.NewClient(b, mr.Addr()), opts)
	mr.Close()
	if r, _ := l.Allow(context.Background(), benchPlain, "trip"); !r.Degraded {
		b.Fatal("the decision after Redis closed was not degraded")
	}
	runAllowG(b, l, benchPlain, benchKeyNames, 16)
}

// BenchmarkPrefetchHotKey measures Allow on one allowed hot key of a rule
// with Prefetch 20ms (benchmarks/cmd/compare's case P) from 1, 16 and 256
// goroutines, each making its share of b.N calls, on redis-server: the one
// RATELIMIT_BENCH_REDIS names (host:port, FLUSHALLed first; so that it may
// run pinned to another core than the benchmark), or one of its own. For
// profiles of the prefetched path (-cpuprofile, -mutexprofile).
func BenchmarkPrefetchHotKey(b *testing.B) {
	if !testkit.HaveRedis(b) {
		b.Skip("no redis-server")
	}
	addr := os.Getenv("RATELIMIT_BENCH_REDIS")
	if addr == "" {
		addr = redistest.Start(b, redistest.Options{}).Addr()
	}
	rule := ratelimit.Rule{Name: "p", Limit: ratelimit.Limit{Rate: 10_000_000, Window: 10 * time.Second}, Prefetch: 20 * time.Millisecond}
	for _, g := range []int{1, 16, 256} {
		b.Run("g="+strconv.Itoa(g), func(b *testing.B) {
			c := testkit.NewClient(b, addr)
			if err := c.Do(context.Background(), c.B().Flushall().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			l := testkit.NewLimiter(b, c, benchOptions())
			ctx := context.Background()
			var degraded atomic.Int64
			runG(b, g, func(w int) {
				for range b.N/g + btoi(w < b.N%g) {
					r, err := l.Allow(ctx, rule, "hot")
					if err != nil {
						b.Error(err)
						return
					}
					if r.Degraded {
						degraded.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := degraded.Load(); n > 0 {
				b.Logf("%d of %d decisions were degraded", n, b.N)
			}
			l.Close() // before the next run's FLUSHALL: a fleet of two would see Redis' data lost
			st := l.Stats()
			b.ReportMetric(float64(st.PrefetchSlotsUsed)/float64(b.N), "prefetched/op")
			b.ReportMetric(float64(st.PrefetchGrants), "grants")
			b.ReportMetric(float64(st.PrefetchSlotsGranted)/float64(b.N), "granted/op")
			b.ReportMetric(float64(st.PrefetchSlotsReturned)/float64(b.N), "returned/op")
		})
	}
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

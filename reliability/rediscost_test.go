package reliability_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// BenchmarkRedisCost measures what one decision costs Redis itself, from
// the server's own accounting (INFO commandstats: the microseconds Redis
// spent in EVALSHA per call, and in each command the script ran), with 16
// callers over 10,000 keys on a private redis-server. The figure does not
// depend on how busy the client side is, so it compares scripts fairly on
// a shared machine: run it with -benchtime=20000x or more.
func BenchmarkRedisCost(b *testing.B) {
	if !testkit.HaveRedis(b) {
		b.Skip("needs redis-server")
	}
	srv := redistest.Start(b, redistest.Options{})
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	plain := ratelimit.Rule{Name: "plain", Limit: ratelimit.PerSecond(1_000_000)}
	penalty := plain
	penalty.Name = "penalty"
	penalty.Penalty = &ratelimit.Penalty{WarnAfter: 3, BanAfter: 10, BanFor: time.Minute}
	approx := plain
	approx.Name = "approx"
	approx.Approximate = true
	for _, c := range []struct {
		name  string
		rule  ratelimit.Rule
		clock bool
	}{
		{"floor", ratelimit.Rule{}, false},
		{"naive", ratelimit.Rule{}, false},
		{"cheapest-exact", ratelimit.Rule{}, false},
		{"plain/redis-time", plain, false},
		{"plain/clock", plain, true},
		{"penalty/redis-time", penalty, false},
		{"approximate/redis-time", approx, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := ratelimit.Options{KeyPrefix: c.name + ":", ShieldMax: -1}
			if c.clock {
				opts.Clock = wallClock{}
			}
			l, err := ratelimit.Dial(testkit.ClientOption(srv.Addr()), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			allow := func(key string) (ratelimit.Result, error) { return l.Allow(ctx, c.rule, key) }
			if src, ok := map[string]string{"floor": floorSrc, "naive": naiveSrc, "cheapest-exact": cheapestSrc}[c.name]; ok {
				client := testkit.NewClient(b, srv.Addr())
				script := rueidis.NewLuaScript(src)
				var seq atomic.Int64
				allow = func(key string) (ratelimit.Result, error) {
					now := strconv.FormatInt(time.Now().UnixMicro(), 10)
					v, err := script.Exec(ctx, client, []string{c.name + ":" + key}, []string{now, "1000000", "1000000", strconv.FormatInt(seq.Add(1), 10)}).AsInt64()
					return ratelimit.Result{Allowed: v == 1}, err
				}
			}
			for _, k := range keys { // every key has a log before the count
				if _, err := allow(k); err != nil {
					b.Fatal(err)
				}
			}
			mustDo(b, srv, "CONFIG", "RESETSTAT")
			b.ResetTimer()
			var wg sync.WaitGroup
			per := (b.N + 15) / 16
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						r, err := allow(keys[(g*per+i)%len(keys)])
						if err != nil || r.Degraded {
							b.Errorf("Allow = %+v, %v", r, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			stats := commandStats(b, srv)
			calls := stats["evalsha"].calls
			if calls == 0 {
				b.Fatal("no EVALSHA ran")
			}
			b.ReportMetric(stats["evalsha"].usec/float64(calls), "redis-µs/op")
			var inner []string
			for name, s := range stats {
				if name != "evalsha" && name != "config" && name != "info" {
					inner = append(inner, fmt.Sprintf("%s %.2f×%.2fµs", name, float64(s.calls)/float64(calls), s.usec/float64(s.calls)))
				}
			}
			sort.Strings(inner)
			b.Logf("per decision: %s", strings.Join(inner, ", "))
		})
	}
}

// floorSrc decides nothing: the least an EVALSHA costs Redis.
const floorSrc = "return 1"

// cheapestSrc is the cheapest exact sliding log: count the live events by
// score, add the event if it fits, expire; it never trims (the key's
// expiry does), and answers only allowed or not.
const cheapestSrc = `
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('ZCOUNT', KEYS[1], string.format('(%d', now - window), '+inf') < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return 1
end
return 0`

// naiveSrc is the sliding log as most ports of it run (see
// benchmarks/cmd/compare): trim, count, add if allowed, expire. The
// scripts are made in the benchmark, not at init: rueidis names a script
// by its SHA-1, which a FIPS 140-only run of this package forbids.
const naiveSrc = `
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return 1
end
return 0`

// wallClock is a Clock that reads the process' wall clock, so that the
// scripts take the time from the caller instead of Redis' TIME.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

type commandStat struct {
	calls int64
	usec  float64
}

// commandStats reads INFO commandstats: calls and microseconds by command.
func commandStats(t testing.TB, s redisDoer) map[string]commandStat {
	out := map[string]commandStat{}
	for _, line := range strings.Split(mustDo(t, s, "INFO", "commandstats"), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st commandStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

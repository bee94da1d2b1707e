package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/rueidis"
)

// BenchmarkRedisCost measures what one decision costs Redis itself, from
// the server's own accounting (INFO commandstats: the microseconds Redis
// spent in EVALSHA per call, and in each command the script ran), with 16
// callers over case A's keys on a private redis-server. The figure does not
// depend on how busy the client side is, so it compares scripts fairly on
// a shared machine. redis_rate's GCRA script (go-redis runs it by EVALSHA
// too) stands beside our GCRA rule:
//
//	go test -run '^$' -bench RedisCost -benchtime=30000x ./cmd/compare
func BenchmarkRedisCost(b *testing.B) {
	e := testRedis(b)
	generous := spec{name: "cost", rate: 1_000_000, window: time.Second}
	oursWith := func(change func(*ratelimit.Options, *ratelimit.Rule)) func(string, spec) (limiter, func(), error) {
		return func(addr string, s spec) (limiter, func(), error) {
			opts, rule := ourOptions(), ourRule(s)
			opts.ShieldMax = -1
			change(&opts, &rule)
			l, err := ratelimit.Dial(rueidis.ClientOption{InitAddress: []string{addr}}, opts)
			if err != nil {
				return nil, nil, err
			}
			return &ours{l: l, rule: rule}, l.Close, nil
		}
	}
	for _, c := range []contender{
		floorContender, naiveContender, cheapestContender,
		{name: "ratelimit plain, Redis' TIME", open: oursWith(func(*ratelimit.Options, *ratelimit.Rule) {})},
		{name: "ratelimit plain, a Clock", open: oursWith(func(o *ratelimit.Options, _ *ratelimit.Rule) { o.Clock = wallClock{} })},
		{name: "ratelimit penalty", open: oursWith(func(_ *ratelimit.Options, r *ratelimit.Rule) {
			r.Penalty = &ratelimit.Penalty{WarnAfter: 3, BanAfter: 10, BanFor: time.Minute}
		})},
		{name: "ratelimit approximate", open: oursWith(func(_ *ratelimit.Options, r *ratelimit.Rule) { r.Approximate = true })},
		{name: "ratelimit GCRA, Redis' TIME", open: oursWith(func(_ *ratelimit.Options, r *ratelimit.Rule) {
			r.Kind, r.Limit.Burst = ratelimit.GCRA, r.Limit.Rate
		})},
		{name: "ratelimit GCRA, a Clock", open: oursWith(func(o *ratelimit.Options, r *ratelimit.Rule) {
			o.Clock = wallClock{}
			r.Kind, r.Limit.Burst = ratelimit.GCRA, r.Limit.Rate
		})},
		redisRateContender, cheapestGCRAContender,
	} {
		b.Run(strings.NewReplacer(" ", "-", "'", "", ",", "", "(", "", ")", "").Replace(c.name), func(b *testing.B) {
			ctx := context.Background()
			if err := flushAll(ctx, e.admin); err != nil {
				b.Fatal(err)
			}
			l, closeFn, err := c.open(e.addr, generous)
			if err != nil {
				b.Fatal(err)
			}
			defer closeFn()
			if err := prime(l, manyKeys, maxPrimers); err != nil { // every key has a log before the count
				b.Fatal(err)
			}
			if err := e.admin.Do(ctx, e.admin.B().ConfigResetstat().Build()).Error(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			per := (b.N + 15) / 16
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if _, err := l.Allow(ctx, manyKeys[(g*per+i)%len(manyKeys)]); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if d, ok := l.(degrader); ok && d.Degraded() > 0 {
				b.Fatalf("%d decisions were degraded", d.Degraded())
			}
			stats, err := commandStats(ctx, e.admin)
			if err != nil {
				b.Fatal(err)
			}
			calls := stats["evalsha"].calls
			if calls == 0 {
				b.Fatal("no EVALSHA ran")
			}
			b.ReportMetric(stats["evalsha"].usec/float64(calls), "redis-µs/op")
			var inner []string
			for name, s := range stats {
				if name != "evalsha" && name != "config|resetstat" && name != "info" {
					inner = append(inner, fmt.Sprintf("%s %.2f×%.2fµs", name, float64(s.calls)/float64(calls), s.usec/float64(s.calls)))
				}
			}
			sort.Strings(inner)
			b.Logf("per decision: %s", strings.Join(inner, ", "))
		})
	}
}

// wallClock is a Clock that reads the process' wall clock, so that the
// scripts take the time from the caller instead of Redis' TIME.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

type commandStat struct {
	calls int64
	usec  float64
}

// commandStats reads INFO commandstats: calls and microseconds by command.
func commandStats(ctx context.Context, c rueidis.Client) (map[string]commandStat, error) {
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		return nil, err
	}
	out := map[string]commandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st commandStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				fmt.Sscan(v, &st.calls)
			case "usec":
				fmt.Sscan(v, &st.usec)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}

package main

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/rueidis"
)

// naiveAcquire and naiveRelease are the semaphore most Redis recipes use:
// a ZSET of holders scored by when they took the slot; acquire trims the
// expired, counts, and adds the holder if a slot is free; release removes
// it. Two scripts, as ours: one round trip each.
var (
	naiveAcquire = rueidis.NewLuaScript(`
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000))
  return 1
end
return 0`)
	naiveRelease = rueidis.NewLuaScript(`return redis.call('ZREM', KEYS[1], ARGV[1])`)
)

// BenchmarkAcquireRelease takes and gives back one slot per op on a real
// redis-server, over 1,000 keys with 8 slots each (so nearly every acquire
// finds a slot): ours (Limiter.Acquire, Lease.Release) beside the naive
// semaphore, in one run.
//
//	go test -run '^$' -bench AcquireRelease -benchtime 3s ./cmd/compare
func BenchmarkAcquireRelease(b *testing.B) {
	e := testRedis(b)
	const keys = 1000
	names := make([]string, keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	b.Run("ours", func(b *testing.B) {
		c, err := rueidisClient(e.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		opts := ourOptions()
		opts.KeyPrefix = "lease-ours:"
		opts.Timeout = 2 * time.Second
		l, err := ratelimit.New(c, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		rule := ratelimit.Rule{Name: "slots", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 8, Window: 30 * time.Second}}
		var n atomic.Uint64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				le, res, err := l.Acquire(ctx, rule, names[n.Add(1)%keys])
				if err != nil || res.Degraded {
					b.Errorf("Acquire = %+v, %v", res, err)
					return
				}
				if le != nil {
					le.Release(ctx)
				}
			}
		})
	})
	b.Run("naive", func(b *testing.B) {
		c, err := rueidisClient(e.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		var n, id atomic.Uint64
		ttl := strconv.FormatInt((30 * time.Second).Microseconds(), 10)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				key := "lease-naive:" + names[n.Add(1)%keys]
				holder := strconv.FormatUint(id.Add(1), 10)
				now := strconv.FormatInt(time.Now().UnixMicro(), 10)
				got, err := naiveAcquire.Exec(ctx, c, []string{key}, []string{now, ttl, "8", holder}).AsInt64()
				if err != nil {
					b.Error(err)
					return
				}
				if got == 1 {
					naiveRelease.Exec(ctx, c, []string{key}, []string{holder})
				}
			}
		})
	})
}

package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/rueidis"
)

// idleKeys is how many keys the in-process memory figure fills.
const idleKeys = numKeys

// stepClock is a ratelimit.Clock that moves one microsecond forward at every
// reading, so that every event gets an instant of its own: the local log
// merges events that share an instant, and spread-out traffic never does.
type stepClock struct {
	base time.Time
	n    atomic.Int64
}

func (c *stepClock) Now() time.Time {
	return c.base.Add(time.Duration(c.n.Add(1)) * time.Microsecond)
}

// heapInUse collects garbage and returns the live heap.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memoryRow is one line of a memory table.
type memoryRow struct {
	what  string
	rate  int
	bytes float64 // per key
	note  string
}

// localMemory measures the live heap per idle key: idleKeys keys each
// given rate events, then a GC; the limiter is built after the baseline.
func localMemory() ([]memoryRow, error) {
	ctx := context.Background()
	keys := manyKeys[:idleKeys]
	var rows []memoryRow
	for _, rate := range []int{10, 100} {
		s := spec{name: "mem", rate: rate, window: time.Hour}

		base := heapInUse()
		opts := ourOptions()
		opts.Clock = &stepClock{base: time.Unix(1_700_000_000, 0)}
		l, err := ratelimit.New(nil, opts)
		if err != nil {
			return nil, err
		}
		rule := ourRule(s)
		for _, k := range keys {
			for range rate {
				r, err := l.Allow(ctx, rule, k)
				if err != nil || !r.Allowed {
					return nil, fmt.Errorf("filling %q: allowed %v, %v", k, r.Allowed, err)
				}
			}
		}
		used := heapInUse() - base
		runtime.KeepAlive(l)
		l.Close()
		rows = append(rows, memoryRow{what: oursLocal.name, rate: rate, bytes: float64(used) / idleKeys,
			note: "each event at its own µs (a fake clock): one log entry per event"})

		for _, c := range []contender{sethvargoContender, xTimeRateContender} {
			base := heapInUse()
			pl, closeFn, err := c.open("", s)
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				for range rate {
					if _, err := pl.Allow(ctx, k); err != nil {
						return nil, err
					}
				}
			}
			used := heapInUse() - base
			runtime.KeepAlive(pl)
			closeFn()
			rows = append(rows, memoryRow{what: c.name, rate: rate, bytes: float64(used) / idleKeys, note: "a token bucket: the same at any rate"})
		}
	}
	return rows, nil
}

// logKey is the Redis key of our sliding log of (rule, key) with the
// default prefix, for a rule and key that need no escaping.
func logKey(rule, key string) string {
	return "rl:v1:{" + strconv.Itoa(len(rule)) + ":" + rule + ":=" + key + "}:l"
}

// counterKey is the Redis key of our approximate counter of (rule, key).
func counterKey(rule, key string) string {
	return "rl:v1:{" + strconv.Itoa(len(rule)) + ":" + rule + ":=" + key + "}:c"
}

// memoryUsage returns MEMORY USAGE key SAMPLES 0 (every element counted).
func memoryUsage(ctx context.Context, c rueidis.Client, key string) (int64, error) {
	return c.Do(ctx, c.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
}

// redisMemory fills one key with rate events through our limiter, AllowN
// in chunks of at most 1,000, and reads MEMORY USAGE of its log key, and of
// its counter under an approximate rule; then it reads the key of each
// Redis peer after one call, which does not grow with the rate.
func redisMemory(ctx context.Context, e *env) ([]memoryRow, error) {
	var rows []memoryRow
	const key = "user-1"
	for _, rate := range []int{10, 1_000, 100_000} {
		used, err := approximateMemory(ctx, e, rate, key)
		if err != nil {
			return nil, err
		}
		rows = append(rows, memoryRow{what: oursRemote.name + " (Approximate)", rate: rate, bytes: float64(used),
			note: "one small hash per key, at any rate"})
	}
	for _, rate := range []int{10, 1_000, 100_000} {
		row, err := logMemory(ctx, e, rate, key)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	for _, c := range []contender{redisRateContender, ululeContender} {
		row, err := peerMemory(ctx, e, c, key)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, flushAll(ctx, e.admin)
}

// logMemory fills one key with rate events under our exact rule (see
// fillLog) and returns its row: MEMORY USAGE of its log key, per event and
// with the ZSET's encoding.
func logMemory(ctx context.Context, e *env, rate int, key string) (memoryRow, error) {
	if err := flushAll(ctx, e.admin); err != nil {
		return memoryRow{}, err
	}
	rule := ourRule(spec{name: "mem", rate: rate, window: time.Hour})
	if err := fillLog(ctx, e.addr, rule, key, rate); err != nil {
		return memoryRow{}, err
	}
	lk := logKey(rule.Name, key)
	n, err := e.admin.Do(ctx, e.admin.B().Zcard().Key(lk).Build()).AsInt64()
	if err != nil || n != int64(rate) {
		return memoryRow{}, fmt.Errorf("ZCARD %s = %d, %v; want %d", lk, n, err, rate)
	}
	used, err := memoryUsage(ctx, e.admin, lk)
	if err != nil {
		return memoryRow{}, fmt.Errorf("MEMORY USAGE %s: %w", lk, err)
	}
	enc, _ := e.admin.Do(ctx, e.admin.B().ObjectEncoding().Key(lk).Build()).ToString()
	return memoryRow{what: oursRemote.name, rate: rate, bytes: float64(used),
		note: fmt.Sprintf("%.1f B/event, ZSET encoding %s", float64(used)/float64(rate), enc)}, nil
}

// fillLog gives key rate events of rule through a limiter of our own on
// the server at addr, AllowN in chunks of at most 1,000, and closes the
// limiter and its client before it returns.
func fillLog(ctx context.Context, addr string, rule ratelimit.Rule, key string, rate int) error {
	c, err := rueidisClient(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := ratelimit.New(c, ourOptions())
	if err != nil {
		return err
	}
	defer l.Close()
	chunk := min(rate, 1000)
	for filled := 0; filled < rate; filled += chunk {
		r, err := l.AllowN(ctx, rule, key, chunk)
		if err == nil && (!r.Allowed || r.Degraded) {
			err = fmt.Errorf("allowed %v, degraded %v", r.Allowed, r.Degraded)
		}
		if err != nil {
			return fmt.Errorf("filling rate %d: %w", rate, err)
		}
	}
	return nil
}

// peerMemory makes one call of the Redis peer c on key and returns its
// row: MEMORY USAGE of the one key the call left, which does not grow with
// the rate.
func peerMemory(ctx context.Context, e *env, c contender, key string) (memoryRow, error) {
	if err := flushAll(ctx, e.admin); err != nil {
		return memoryRow{}, err
	}
	s := spec{name: "mem", rate: 100_000, window: time.Hour}
	pl, closeFn, err := c.open(e.addr, s)
	if err != nil {
		return memoryRow{}, err
	}
	_, err = pl.Allow(ctx, key)
	closeFn()
	if err != nil {
		return memoryRow{}, err
	}
	keys, err := e.admin.Do(ctx, e.admin.B().Keys().Pattern("*").Build()).AsStrSlice()
	if err != nil || len(keys) != 1 {
		return memoryRow{}, fmt.Errorf("%s: keys after one call: %q, %v", c.name, keys, err)
	}
	used, err := memoryUsage(ctx, e.admin, keys[0])
	if err != nil {
		return memoryRow{}, err
	}
	return memoryRow{what: c.name, rate: 0, bytes: float64(used), note: "one small value per key, at any rate"}, nil
}

// approximateMemory fills one key with rate events under an approximate rule
// and returns MEMORY USAGE of its counter.
func approximateMemory(ctx context.Context, e *env, rate int, key string) (int64, error) {
	if err := flushAll(ctx, e.admin); err != nil {
		return 0, err
	}
	c, err := rueidisClient(e.addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	l, err := ratelimit.New(c, ourOptions())
	if err != nil {
		return 0, err
	}
	defer l.Close()
	rule := ratelimit.Rule{Name: "mem", Limit: ratelimit.Limit{Rate: rate, Window: time.Hour}, Approximate: true}
	chunk := min(rate, 1000)
	for filled := 0; filled < rate; filled += chunk {
		r, err := l.AllowN(ctx, rule, key, chunk)
		if err == nil && (!r.Allowed || r.Degraded) {
			err = fmt.Errorf("allowed %v, degraded %v", r.Allowed, r.Degraded)
		}
		if err != nil {
			return 0, fmt.Errorf("filling an approximate rate %d: %w", rate, err)
		}
	}
	return memoryUsage(ctx, e.admin, counterKey(rule.Name, key))
}

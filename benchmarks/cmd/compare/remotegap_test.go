package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/rueidis"
)

// TestRemoteGap times one goroutine's calls on one redis-server
// (RATELIMIT_GAP_REDIS; skipped without it): ours with default Options and
// with a Clock, our decision's script sent bare (below), the naive script
// (also under a context with a deadline, as ours sends every call) and the
// floor, each primed by 16 goroutines first (rueidis pipelines from then
// on, as in a service that has seen concurrent calls), in alternating
// blocks of calls so that all see the same machine (RATELIMIT_GAP_BLOCKS
// blocks of RATELIMIT_GAP_CALLS calls; 20 of 1,000 unless set).
//
// For each it logs the median, lowest and highest of its per-block p50
// and the median of its per-block p90; the medians over blocks of its mean
// wall time a call, of the process' CPU time a call (every goroutine of
// the process: the caller's, rueidis' writer and reader, the runtime's),
// of the difference (the time the process spent waiting for Redis and the
// network, or for the core) and of the times the kernel preempted one of
// the process' threads per 1,000 calls; and the median and quartiles of
// its per-block p50 less the naive script's in the same round. Run it
// pinned to one core (taskset) so that every microsecond of the process'
// CPU is one on the call's path. With RATELIMIT_GAP_SPREAD, it logs the
// last block's percentiles too.
//
// "ours' script, bare" sends the very command ours sent for its last
// decision (read off ours' client: same script, same arguments), under
// its own keys and member ids, straight through rueidis: Redis' part of
// ours without the Limiter around it.
func TestRemoteGap(t *testing.T) {
	addr := os.Getenv("RATELIMIT_GAP_REDIS")
	if addr == "" {
		t.Skip("set RATELIMIT_GAP_REDIS to a redis-server (it is not emptied)")
	}
	blocks, calls := envInt(t, "RATELIMIT_GAP_BLOCKS", 20), envInt(t, "RATELIMIT_GAP_CALLS", 1000)
	s := spec{name: "gap", rate: 1_000_000, window: time.Second}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	type contestant struct {
		name             string
		l                limiter
		ctx              context.Context
		p50s, p90s, gaps []time.Duration
		walls, cpus      []time.Duration // a call's mean wall time and the process' CPU time, per block
		waits            []time.Duration // wall less CPU, per block
		preempted        []int64         // the process' preemptions per 1,000 calls, per block
		spread           []time.Duration
		degradedAtStart  int64
	}
	// The naive script again under a context with a deadline, as ours
	// sends every call (Options.Timeout): rueidis then waits on the
	// context too.
	dl, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var cs []*contestant
	var spy *spyClient
	spied := contender{name: "ratelimit", remote: true, open: func(addr string, s spec) (limiter, func(), error) {
		c, err := rueidisClient(addr)
		if err != nil {
			return nil, nil, err
		}
		spy = &spyClient{Client: c}
		l, err := ratelimit.New(spy, ourOptions())
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return &ours{l: l, rule: ourRule(s)}, func() { l.Close(); c.Close() }, nil
	}}
	clocked := contender{name: "ratelimit, Options.Clock", remote: true, open: func(addr string, s spec) (limiter, func(), error) {
		c, err := rueidisClient(addr)
		if err != nil {
			return nil, nil, err
		}
		opts := ourOptions()
		opts.Clock = wallClock{}
		l, err := ratelimit.New(c, opts)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return &ours{l: l, rule: ourRule(s)}, func() { l.Close(); c.Close() }, nil
	}}
	bareContender := contender{name: "ours' script, bare", remote: true, open: func(addr string, s spec) (limiter, func(), error) {
		c, err := rueidisClient(addr)
		if err != nil {
			return nil, nil, err
		}
		cmd := spy.decision()
		if cmd == nil {
			c.Close()
			t.Fatal("ours sent no decision of one key to copy")
		}
		return &bareScript{c: c, cmd: cmd}, c.Close, nil
	}}
	var naive *contestant
	for _, c := range []contender{spied, clocked, bareContender, naiveContender, floorContender} {
		l, closeFn, err := c.open(addr, s)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFn()
		if err := prime(l, keys, 16); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, &contestant{name: c.name, l: l, ctx: context.Background()})
		if c.name == naiveContender.name {
			naive = cs[len(cs)-1]
			cs = append(cs, &contestant{name: c.name + ", ctx with deadline", l: l, ctx: dl})
		}
	}
	for _, c := range cs {
		if dg, ok := c.l.(degrader); ok {
			c.degradedAtStart = dg.Degraded()
		}
	}
	took := make([]time.Duration, calls)
	for block := range blocks {
		for _, c := range cs {
			cpu0, pre0 := processCPU()
			wall0 := time.Now()
			for i := range took {
				start := time.Now()
				if _, err := c.l.Allow(c.ctx, keys[(block*calls+i)%len(keys)]); err != nil {
					t.Fatal(err)
				}
				took[i] = time.Since(start)
			}
			cpu1, pre1 := processCPU()
			wall, cpu := time.Since(wall0)/time.Duration(calls), (cpu1-cpu0)/time.Duration(calls)
			c.preempted = append(c.preempted, (pre1-pre0)*1000/int64(calls))
			c.walls, c.cpus, c.waits = append(c.walls, wall), append(c.cpus, cpu), append(c.waits, wall-cpu)
			slices.Sort(took)
			c.p50s, c.p90s = append(c.p50s, took[len(took)/2]), append(c.p90s, took[len(took)*9/10])
			if block == blocks-1 {
				c.spread = []time.Duration{took[calls/10], took[calls/4], took[calls/2], took[calls*3/4], took[calls*9/10]}
			}
		}
		for _, c := range cs {
			c.gaps = append(c.gaps, c.p50s[block]-naive.p50s[block])
		}
	}
	med := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	q := func(d []time.Duration, f float64) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[int(f*float64(len(d)-1))]
	}
	for _, c := range cs {
		if dg, ok := c.l.(degrader); ok && dg.Degraded() > c.degradedAtStart {
			t.Errorf("%s: %d decisions made without Redis while measured: its figures are void", c.name, dg.Degraded()-c.degradedAtStart)
		}
		t.Logf("%-36s p50 per block: min %v, median %v, max %v; p90 per block: median %v", c.name, q(c.p50s, 0), med(c.p50s), q(c.p50s, 1), med(c.p90s))
		pre := slices.Clone(c.preempted)
		slices.Sort(pre)
		t.Logf("%-36s a call: wall %v, process CPU %v, wall less CPU %v; preempted %d times per 1,000 calls; p50 less the naive script's: median %v, quartiles %v / %v",
			"", med(c.walls), med(c.cpus), med(c.waits), pre[len(pre)/2], med(c.gaps), q(c.gaps, 0.25), q(c.gaps, 0.75))
		if os.Getenv("RATELIMIT_GAP_SPREAD") != "" {
			t.Logf("%-36s last block p10 %v p25 %v p50 %v p75 %v p90 %v", "", c.spread[0], c.spread[1], c.spread[2], c.spread[3], c.spread[4])
		}
	}
}

// envInt returns the positive integer in the environment variable name, or
// def when it is not set.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// spyClient is a rueidis client that remembers the last script call of
// one key it was given (EVALSHA, the SHA, "1", the key, the arguments).
type spyClient struct {
	rueidis.Client
	mu   sync.Mutex
	last []string
}

func (s *spyClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if args := cmd.Commands(); len(args) > 4 && args[0] == "EVALSHA" && args[2] == "1" {
		s.mu.Lock()
		s.last = slices.Clone(args)
		s.mu.Unlock()
	}
	return s.Client.Do(ctx, cmd)
}

// decision returns the last script call of one key the client was given,
// or nil.
func (s *spyClient) decision() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.last)
}

// bareScript sends cmd, a script call of one key whose last argument is
// the event's member id, for each key under its own key name and member
// ids.
type bareScript struct {
	c   rueidis.Client
	cmd []string
	n   atomic.Int64
}

func (b *bareScript) Allow(ctx context.Context, key string) (bool, error) {
	args := slices.Clone(b.cmd[1:])
	args[2] = "gapbare:{" + key + "}"
	args[len(args)-1] = "gapbare-" + strconv.FormatInt(b.n.Add(1), 10)
	err := b.c.Do(ctx, b.c.B().Arbitrary(b.cmd[0]).Args(args...).Build()).Error()
	return err == nil, err
}

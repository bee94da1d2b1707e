package main

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// sampleEvery: each goroutine times one call in sampleEvery (its 1st, 9th,
// 17th, ...), the same for every contender, so that two clock reads per
// call do not weigh on the in-process contenders' throughput.
const sampleEvery = 8

// histogram counts latencies in buckets of about 3% (32 sub-buckets per
// power of two; exact below 64 ns). Each goroutine fills its own.
type histogram struct {
	counts [64 + 40*32]uint64
}

func bucketOf(ns int64) int {
	if ns < 64 {
		if ns < 0 {
			return 0
		}
		return int(ns)
	}
	exp := bits.Len64(uint64(ns)) - 6 // >= 1; mantissa in [32, 63]
	mant := int(uint64(ns) >> exp)
	i := 64 + (exp-1)*32 + (mant - 32)
	if i >= len(histogram{}.counts) {
		return len(histogram{}.counts) - 1
	}
	return i
}

// bucketMid is the middle of bucket i, in ns.
func bucketMid(i int) float64 {
	if i < 64 {
		return float64(i)
	}
	exp := (i-64)/32 + 1
	mant := (i-64)%32 + 32
	lo := float64(uint64(mant) << exp)
	return lo + float64(uint64(1)<<exp)/2
}

func (h *histogram) record(d time.Duration) { h.counts[bucketOf(int64(d))]++ }

func (h *histogram) add(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

func (h *histogram) total() uint64 {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile returns the q-quantile (0 < q <= 1) of the recorded latencies.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(bucketMid(i))
		}
	}
	return time.Duration(bucketMid(len(h.counts) - 1))
}

// cellResult is one contender measured at one concurrency.
type cellResult struct {
	contender  string
	goroutines int
	ops        uint64
	allowed    uint64
	elapsed    time.Duration
	p50, p99   time.Duration
	mallocs    uint64        // runtime.MemStats.Mallocs delta over the measured run
	degraded   int64         // ours only: decisions made without Redis
	redisCPU   time.Duration // CPU time redis-server spent over the measured run
	err        error         // the first error a call returned; the cell is void

	invalidRounds int // rounds of this cell that were void (errors, degraded)
}

func (r *cellResult) opsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ops) / r.elapsed.Seconds()
}

// redisCPUPerOp is the CPU time redis-server spent per call (0 for an
// in-process contender).
func (r *cellResult) redisCPUPerOp() time.Duration {
	if r.ops == 0 {
		return 0
	}
	return r.redisCPU / time.Duration(r.ops)
}

func (r *cellResult) allocsPerOp() float64 {
	if r.ops == 0 {
		return 0
	}
	return float64(r.mallocs) / float64(r.ops)
}

// valid reports whether the cell measured what it meant to.
func (r *cellResult) valid() bool { return r.err == nil && r.degraded == 0 && r.ops > 0 }

// worker is one goroutine of a run.
type worker struct {
	hist    histogram
	ops     uint64
	allowed uint64
	err     error
	_       [64]byte // keeps the counters of neighbours off one cache line
}

// call calls l.Allow until stop is set or a call fails, walking keys round
// robin from offset and timing one call in sampleEvery, and keeps its
// counts, latencies and error in w.
func (w *worker) call(ctx context.Context, l limiter, keys []string, offset int, stop *atomic.Bool) {
	i := offset % len(keys)
	var ops, allowed uint64
	for !stop.Load() {
		key := keys[i]
		if i++; i == len(keys) {
			i = 0
		}
		var ok bool
		var err error
		if ops%sampleEvery == 0 {
			t0 := time.Now()
			ok, err = l.Allow(ctx, key)
			w.hist.record(time.Since(t0))
		} else {
			ok, err = l.Allow(ctx, key)
		}
		if err != nil {
			w.err = err
			break
		}
		ops++
		if ok {
			allowed++
		}
	}
	w.ops, w.allowed = ops, allowed
}

// run calls l.Allow from g goroutines for d, each goroutine walking keys
// round robin from its own offset, and measures it: the goroutines and
// their histograms exist before the clock and the allocation count start.
func run(l limiter, keys []string, g int, d time.Duration) cellResult {
	ctx := context.Background()
	workers := make([]worker, g)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var stop atomic.Bool
	ready.Add(g)
	done.Add(g)
	for w := range workers {
		go func(w *worker, offset int) {
			defer done.Done()
			ready.Done()
			<-start
			w.call(ctx, l, keys, offset, &stop)
		}(&workers[w], w*7919)
	}
	ready.Wait()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	close(start)
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	done.Wait()
	elapsed := time.Since(t0)
	timer.Stop()
	runtime.ReadMemStats(&after)

	res := cellResult{goroutines: g, elapsed: elapsed, mallocs: after.Mallocs - before.Mallocs}
	var h histogram
	for i := range workers {
		w := &workers[i]
		res.ops += w.ops
		res.allowed += w.allowed
		if w.err != nil && res.err == nil {
			res.err = w.err
		}
		h.add(&w.hist)
	}
	res.p50, res.p99 = h.quantile(0.50), h.quantile(0.99)
	return res
}

// cellPlan says how long to warm up and to measure each cell.
type cellPlan struct {
	warmup, measure time.Duration
	primeWith       int // prime with at least this many goroutines (see config.primeWith)
}

// maxPrimers is the most goroutines that prime a limiter.
const maxPrimers = 16

// prime calls l.Allow once for every key, so that every key exists (in
// Redis and in any local state) before the timed warm-up, whatever the
// speed of the cell. It uses at most as many goroutines as the cell: a
// client that has seen concurrent calls may work differently from then on
// (rueidis keeps its pipelining goroutines running), and a cell of one
// goroutine must not be measured in a mode that only priming started.
func prime(l limiter, keys []string, g int) error {
	ctx := context.Background()
	primers := min(g, maxPrimers)
	errs := make(chan error, primers)
	var wg sync.WaitGroup
	for p := range primers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < len(keys); i += primers {
				if _, err := l.Allow(ctx, keys[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// measureCell builds a fresh limiter of c for spec s, empties Redis for a
// remote contender, calls Allow once for every key, warms up at the same
// concurrency, collects garbage and measures. Every contender of every cell
// gets the same treatment.
func measureCell(ctx context.Context, e *env, c contender, s spec, keys []string, g int, p cellPlan) cellResult {
	res := cellResult{contender: c.name, goroutines: g}
	l, closeFn, err := readyCell(ctx, e, c, s, keys, g, p)
	if err != nil {
		res.err = err
		return res
	}
	defer closeFn()
	var deg0 int64
	dg, isDegrader := l.(degrader)
	if isDegrader {
		deg0 = dg.Degraded()
	}
	runtime.GC()
	var cpu0 time.Duration
	if c.remote {
		if cpu0, err = redisCPU(ctx, e.admin); err != nil {
			res.err = err
			return res
		}
	}
	res = run(l, keys, g, p.measure)
	res.contender = c.name
	if c.remote {
		cpu1, err := redisCPU(ctx, e.admin)
		if err != nil && res.err == nil {
			res.err = err
		}
		res.redisCPU = cpu1 - cpu0
	}
	if isDegrader {
		res.degraded = dg.Degraded() - deg0
	}
	return res
}

// readyCell readies a cell for its measured run: it empties Redis for a
// remote contender, builds a fresh limiter of c for spec s, calls Allow
// once for every key and warms up at g goroutines. The returned func
// closes the limiter; on an error the limiter is already closed.
func readyCell(ctx context.Context, e *env, c contender, s spec, keys []string, g int, p cellPlan) (limiter, func(), error) {
	addr := ""
	if c.remote {
		addr = e.addr
		if err := flushAll(ctx, e.admin); err != nil {
			return nil, nil, fmt.Errorf("FLUSHALL: %w", err)
		}
	}
	l, closeFn, err := c.open(addr, s)
	if err != nil {
		return nil, nil, fmt.Errorf("building %s: %w", c.name, err)
	}
	if err := prime(l, keys, max(g, p.primeWith)); err != nil {
		closeFn()
		return nil, nil, fmt.Errorf("priming: %w", err)
	}
	if p.warmup > 0 {
		if w := run(l, keys, g, p.warmup); w.err != nil {
			closeFn()
			return nil, nil, fmt.Errorf("warm-up: %w", w.err)
		}
	}
	return l, closeFn, nil
}

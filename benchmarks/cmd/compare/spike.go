package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/rueidis"
)

// Case S: a load spike against a healthy Redis. It first measures the
// capacity of ratelimit's Redis path (64 callers in a closed loop), then
// offers several times that: spikeCallers callers that each pause
// spikePause between calls, as request handlers doing other work do. Every
// call is timed.
const (
	capacityCallers = 64
	spikeCallers    = 2048
	spikePause      = 20 * time.Millisecond
	// spikeMinDuration is the shortest a phase runs, whatever -d says: the
	// admission bound needs a few hundred milliseconds to settle.
	spikeMinDuration = 3 * time.Second
)

// spikeResult is one phase of case S.
type spikeResult struct {
	callers   int
	pause     time.Duration
	elapsed   time.Duration
	calls     int64
	onRedis   int64 // decisions not Degraded: on Redis or from the shield
	shed      uint64
	outage    uint64
	openings  int64
	worst     time.Duration
	p99       time.Duration
	admission int // Stats.AdmissionLimit at the end
	err       error
}

func (s *spikeResult) redisPerSec() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.onRedis) / s.elapsed.Seconds()
}

func (s *spikeResult) share(n uint64) float64 {
	if s.calls == 0 {
		return 0
	}
	return float64(n) / float64(s.calls)
}

// spikeCase holds both phases of case S.
type spikeCase struct {
	capacity, spike spikeResult
	timeout         time.Duration
}

// measureSpike runs case S: each phase on a fresh limiter built as a new
// user would (ratelimit.Dial, default Options), over numKeys keys, rule
// 1,000,000 per second so that every call is allowed.
func measureSpike(ctx context.Context, e *env, d time.Duration, progress io.Writer) *spikeCase {
	sc := &spikeCase{timeout: ratelimit.DefaultTimeout}
	fmt.Fprintf(progress, "case S: capacity, %d callers in a closed loop...\n", capacityCallers)
	sc.capacity = spikePhase(ctx, e, capacityCallers, 0, d)
	fmt.Fprintf(progress, "case S: spike, %d callers pausing %v...\n", spikeCallers, spikePause)
	sc.spike = spikePhase(ctx, e, spikeCallers, spikePause, d)
	return sc
}

// spikePhase runs one phase of case S: callers goroutines, each pausing
// pause between calls, call a fresh limiter for d, and the phase reports
// what they saw and what the limiter's Stats counted meanwhile.
func spikePhase(ctx context.Context, e *env, callers int, pause, d time.Duration) spikeResult {
	res := spikeResult{callers: callers, pause: pause}
	if err := flushAll(ctx, e.admin); err != nil {
		res.err = err
		return res
	}
	var openings atomic.Int64
	l, err := spikeLimiter(e, &openings)
	if err != nil {
		res.err = err
		return res
	}
	defer l.Close()
	rule := ratelimit.Rule{Name: "s", Limit: ratelimit.PerSecond(1_000_000)}
	o := &ours{l: l, rule: rule}
	if err := prime(o, manyKeys, maxPrimers); err != nil {
		res.err = err
		return res
	}
	before := l.Stats()
	hists := spikeLoad(ctx, l, rule, d, &res)
	after := l.Stats()
	var h histogram
	for i := range hists {
		h.add(&hists[i])
	}
	res.shed, res.outage = after.ShedDecisions-before.ShedDecisions, after.OutageDecisions-before.OutageDecisions
	res.openings, res.p99 = openings.Load(), h.quantile(0.99)
	res.admission = after.AdmissionLimit
	return res
}

// spikeLimiter builds a phase's limiter as a new user would (ratelimit.Dial,
// default Options) on the server of e, counting every opening of its
// breaker in openings.
func spikeLimiter(e *env, openings *atomic.Int64) (*ratelimit.Limiter, error) {
	opts := ourOptions()
	opts.OnBreakerChange = func(c ratelimit.BreakerChange) {
		if c.To == ratelimit.BreakerOpen {
			openings.Add(1)
		}
	}
	return ratelimit.Dial(rueidis.ClientOption{InitAddress: []string{e.addr}}, opts)
}

// spikeLoad offers a phase's load to l for d: res.callers goroutines, each
// walking manyKeys from its own offset and pausing res.pause between calls,
// every call timed. It sets res's elapsed time, calls, decisions on Redis,
// worst call and first error, and returns each caller's histogram.
func spikeLoad(ctx context.Context, l *ratelimit.Limiter, rule ratelimit.Rule, d time.Duration, res *spikeResult) []histogram {
	pause := res.pause
	var stop atomic.Bool
	var calls, onRedis, worst atomic.Int64
	var firstErr atomic.Pointer[error]
	hists := make([]histogram, res.callers)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < res.callers; c++ {
		wg.Add(1)
		go func(h *histogram, i int) {
			defer wg.Done()
			for !stop.Load() {
				key := manyKeys[i%len(manyKeys)]
				i += 7
				t0 := time.Now()
				r, err := l.Allow(ctx, rule, key)
				took := time.Since(t0)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				h.record(took)
				calls.Add(1)
				if !r.Degraded {
					onRedis.Add(1)
				}
				for w := worst.Load(); int64(took) > w && !worst.CompareAndSwap(w, int64(took)); w = worst.Load() {
				}
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}(&hists[c], c*7919)
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	res.elapsed = time.Since(start)
	res.calls, res.onRedis, res.worst = calls.Load(), onRedis.Load(), time.Duration(worst.Load())
	if p := firstErr.Load(); p != nil {
		res.err = *p
	}
	return hists
}

// printSpike writes case S's table.
func printSpike(w io.Writer, sc *spikeCase) {
	fmt.Fprintf(w, "### S — a load spike against a healthy Redis (ratelimit.Dial, default Options: Timeout %v; %d keys, 1,000,000 per 1s)\n\n", sc.timeout, numKeys)
	fmt.Fprintln(w, "| phase | callers | decided on Redis | shed | outage (degraded) | breaker openings | p99 | worst call | admission bound at the end | note |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, p := range []struct {
		name string
		r    *spikeResult
	}{{"capacity (closed loop)", &sc.capacity}, {fmt.Sprintf("spike (each pauses %v)", spikePause), &sc.spike}} {
		note := ""
		if p.r.err != nil {
			note = "error: " + p.r.err.Error()
		}
		fmt.Fprintf(w, "| %s | %d | %s/s | %.1f%% | %.1f%% | %d | %s | %s | %d | %s |\n",
			p.name, p.r.callers, fmtOps(p.r.redisPerSec()), 100*p.r.share(p.r.shed), 100*p.r.share(p.r.outage),
			p.r.openings, fmtDur(p.r.p99), fmtDur(p.r.worst), p.r.admission, note)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Decisions on Redis include the shield's (a rejection answered without a round trip; none here, every call is allowed). Shed: decided by the degraded policy because admission control had as many calls in flight as Redis serves in time. Outage: decided without Redis because it failed (none should be, Redis is healthy).\n\n")
}

// spikeTargets are case S's goals: the spike keeps Redis at 0.8× the
// capacity, the breaker closed and every call within 1.5× Timeout.
func spikeTargets(sc *spikeCase) []target {
	judge := func(f func() (bool, string)) func(results) verdict {
		return func(results) verdict {
			if sc == nil {
				return verdict{"SKIPPED", "not measured in this run"}
			}
			if sc.capacity.err != nil || sc.spike.err != nil {
				return verdict{"VOID", "a phase failed"}
			}
			ok, text := f()
			if ok {
				return verdict{"MET", text}
			}
			return verdict{"NOT MET", text}
		}
	}
	return []target{
		{text: fmt.Sprintf("S: spike (%d callers pausing %v): decisions on Redis ≥ 0.8× the capacity at %d callers", spikeCallers, spikePause, capacityCallers),
			judge: judge(func() (bool, string) {
				ratio := sc.spike.redisPerSec() / sc.capacity.redisPerSec()
				return ratio >= 0.8, fmt.Sprintf("%.2f× (%s/s vs %s/s)", ratio, fmtOps(sc.spike.redisPerSec()), fmtOps(sc.capacity.redisPerSec()))
			})},
		{text: "S: spike: the breaker never opens, no outage decision",
			judge: judge(func() (bool, string) {
				return sc.spike.openings == 0 && sc.spike.outage == 0, fmt.Sprintf("%d openings, %d outage decisions", sc.spike.openings, sc.spike.outage)
			})},
		{text: "S: spike: worst call ≤ 1.5× Options.Timeout",
			judge: judge(func() (bool, string) {
				ratio := float64(sc.spike.worst) / float64(sc.timeout)
				return ratio <= 1.5, fmt.Sprintf("%.2f× (%s)", ratio, fmtDur(sc.spike.worst))
			})},
	}
}

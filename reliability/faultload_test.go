package reliability_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// The load generator of the fault tests (fault_*_test.go): goroutines call
// Allow in a loop while the test injects a fault, and every call is recorded
// with the exact fake time it was decided at (the limiter's Clock is a
// recClock), the phase of the test when it started and ended, its result,
// its error and how long it took.

// Phases of a fault test; a call records the phase at its start and end.
const (
	phaseBefore    int32 = iota // no fault yet
	phaseInjecting              // the fault is being injected
	phaseFault                  // the fault is in place
	phaseRemoving               // the fault is being removed
	phaseAfter                  // the fault is gone
)

// faultCall is one recorded call.
type faultCall struct {
	key                  string
	at                   time.Time // the fake time of the decision
	startPhase, endPhase int32
	res                  ratelimit.Result
	err                  error
	took                 time.Duration
}

// faultLoad drives goroutines against one limiter.
type faultLoad struct {
	t      *testing.T
	l      *ratelimit.Limiter
	rule   ratelimit.Rule
	keys   []string
	bound  time.Duration
	clk    *recClock
	perKey bool
	locks  sync.Map // key → *sync.Mutex, when perKey
	phase  atomic.Int32
	seq    atomic.Int64
	lat    latencies

	mu    sync.Mutex
	calls []faultCall

	stop chan struct{}
	wg   sync.WaitGroup
}

// loadConfig says how hard to drive the limiter.
type loadConfig struct {
	goroutines int
	keys       []string
	// step and every move the fake clock forward by step every every
	// (wall time); zero step keeps it still.
	step, every time.Duration
	// pause between two calls of one goroutine (0: none).
	pause time.Duration
	// keyFor, when set, names the key of each call from the phase the call
	// starts in and a number unique to the call; it overrides keys.
	keyFor func(phase int32, n int64) string
	// perKey runs the calls of one key one at a time (goroutines still share
	// keys and the clock still moves freely). Concurrent calls on one key
	// reach the log out of timestamp order while the clock moves, which the
	// limiter handles (TestExactnessUnderLoad); the fault tests keep each
	// key's calls in time order anyway, so that any excess they find points
	// at fault handling alone.
	perKey bool
}

// startLoad starts the goroutines; stopLoad ends them.
func startLoad(t *testing.T, l *ratelimit.Limiter, clk *recClock, rule ratelimit.Rule, bound time.Duration, cfg loadConfig) *faultLoad {
	f := &faultLoad{t: t, l: l, rule: rule, keys: cfg.keys, bound: bound, clk: clk, perKey: cfg.perKey, stop: make(chan struct{})}
	for g := 0; g < cfg.goroutines; g++ {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-f.stop:
					return
				default:
				}
				if cfg.keyFor != nil {
					f.call(cfg.keyFor(f.phase.Load(), f.seq.Add(1)))
				} else {
					f.call(f.keys[(g+i)%len(f.keys)])
				}
				if cfg.pause > 0 {
					time.Sleep(cfg.pause)
				}
			}
		}()
	}
	if cfg.step > 0 {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			tick := time.NewTicker(cfg.every)
			defer tick.Stop()
			for {
				select {
				case <-f.stop:
					return
				case <-tick.C:
					clk.Advance(cfg.step)
				}
			}
		}()
	}
	return f
}

func (f *faultLoad) call(key string) {
	if f.perKey {
		mu, _ := f.locks.LoadOrStore(key, new(sync.Mutex))
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
	}
	c := faultCall{key: key, startPhase: f.phase.Load()}
	f.clk.begin()
	start := time.Now()
	c.res, c.err = f.l.Allow(context.Background(), f.rule, key)
	c.took = time.Since(start)
	at := f.clk.end(f.t)
	c.endPhase = f.phase.Load()
	if at == 0 && c.err == nil {
		f.t.Errorf("a call (%+v) never read the clock", c.res)
	}
	c.at = time.UnixMicro(at)
	f.lat.observe(c.took, f.bound)
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
}

func (f *faultLoad) setPhase(p int32) { f.phase.Store(p) }

// any reports whether a call recorded so far (an ended one) satisfies
// cond.
func (f *faultLoad) any(cond func(faultCall) bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.calls, cond)
}

// stopLoad ends the goroutines and returns every call made.
func (f *faultLoad) stopLoad() []faultCall {
	close(f.stop)
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// callSummary counts calls by how they were decided.
type callSummary struct {
	calls, errors, degraded, allowed, degradedAllowed, tooSlow int
}

func summarize(calls []faultCall, bound time.Duration, keep func(faultCall) bool) callSummary {
	var s callSummary
	for _, c := range calls {
		if keep != nil && !keep(c) {
			continue
		}
		s.calls++
		if c.err != nil {
			s.errors++
		}
		if c.res.Degraded {
			s.degraded++
		}
		if c.res.Allowed {
			s.allowed++
			if c.res.Degraded {
				s.degradedAllowed++
			}
		}
		if c.took > bound {
			s.tooSlow++
		}
	}
	return s
}

func (s callSummary) String() string {
	return fmt.Sprintf("%d calls: %d allowed (%d of them degraded), %d degraded in all, %d errors, %d over the hang bound",
		s.calls, s.allowed, s.degradedAllowed, s.degraded, s.errors, s.tooSlow)
}

// checkNoErrorsNoHangs fails the test for any call that returned an error
// or took longer than the hang bound.
func checkNoErrorsNoHangs(t *testing.T, calls []faultCall, bound time.Duration) {
	t.Helper()
	for _, c := range calls {
		if c.err != nil {
			t.Errorf("a call (phase %d→%d) returned an error: %v", c.startPhase, c.endPhase, c.err)
			return
		}
		if c.took > bound {
			t.Errorf("a call (phase %d→%d) took %v, beyond the hang bound %v", c.startPhase, c.endPhase, c.took, bound)
			return
		}
	}
}

// maxInWindow returns the most allowed calls for key decided within any
// interval of length window, from the exact decision times.
func maxInWindow(calls []faultCall, key string, window time.Duration, keep func(faultCall) bool) (most int, from time.Time) {
	var times []time.Time
	for _, c := range calls {
		if c.key == key && c.res.Allowed && (keep == nil || keep(c)) {
			times = append(times, c.at)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	i := 0
	for j := range times {
		for times[j].Sub(times[i]) >= window {
			i++
		}
		if n := j - i + 1; n > most {
			most, from = n, times[i]
		}
	}
	return most, from
}

// checkLimitHolds fails the test when more than rate calls for key were
// allowed within one window.
func checkLimitHolds(t *testing.T, calls []faultCall, key string, rule ratelimit.Rule, keep func(faultCall) bool) int {
	t.Helper()
	most, from := maxInWindow(calls, key, rule.Limit.Window, keep)
	if most > rule.Limit.Rate {
		t.Errorf("key %q: %d calls allowed within one window from epoch%+v, rate %d", key, most, from.Sub(testkit.Epoch()), rule.Limit.Rate)
		var n int
		for _, c := range calls {
			if c.key == key && c.res.Allowed && !c.at.Before(from) && c.at.Sub(from) < rule.Limit.Window && n < 400 {
				n++
				t.Logf("  allowed at epoch%+v phase %d→%d degraded=%v", c.at.Sub(testkit.Epoch()), c.startPhase, c.endPhase, c.res.Degraded)
			}
		}
	}
	return most
}

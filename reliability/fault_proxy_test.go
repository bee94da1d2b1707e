package reliability_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultNetwork puts a TCP proxy (redistest.NewProxy) between a limiter
// made by Dial and redis-server and breaks the network four ways while 32
// goroutines call Allow on one key and the fake clock slides the window:
// latency above Timeout, black-holed traffic, connections reset over and
// over, and new connections refused (after resetting the open ones). The
// goroutines share 4 keys, each key's calls in time order (see
// loadConfig.perKey).
//
// For each: no call returns an error or hangs (each ends within 10 ×
// Timeout); while the fault lasts calls are Degraded (except for resets,
// after which the client may reconnect at once); the calls decided on Redis
// never exceed Rate in any window, nor do the calls decided locally; Redis'
// own log never holds more than Rate events; and once the fault is removed
// the limiter returns to Redis.
//
// Together, Redis' and the local decisions respect Rate while the breaker
// opens once and stays open (the local log starts from what Redis allowed):
// that is checked for the faults that stay in place. With connections reset
// over and over the breaker flaps, and local decisions reach Redis only
// through the write-back (docs/fallback.md, "Write-back"), which may not
// have run yet, so a window can hold Rate local decisions and then Rate more
// from Redis: there only 2 × Rate is checked, and the figure is logged.
func TestFaultNetwork(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	type fault struct {
		name string
		// inject starts the fault and returns how many faults it injected.
		inject func(p *redistest.Proxy, stop <-chan struct{}) int
		remove func(p *redistest.Proxy)
		// whether every call that starts during the fault must be Degraded
		alwaysDegraded bool
	}
	faults := []fault{
		{name: "latency", alwaysDegraded: true,
			inject: func(p *redistest.Proxy, _ <-chan struct{}) int { p.SetLatency(600 * time.Millisecond); return 1 },
			remove: func(p *redistest.Proxy) { p.SetLatency(0) }},
		{name: "black hole", alwaysDegraded: true,
			inject: func(p *redistest.Proxy, _ <-chan struct{}) int { p.BlackHole(true); return 1 },
			// The proxy drops what it swallowed, which TCP never does: the
			// streams of the open connections are broken, so the network
			// "heals" by resetting them, as a real partition ends in
			// retransmission or a reset.
			remove: func(p *redistest.Proxy) { p.BlackHole(false); p.ResetAll() }},
		{name: "resets",
			inject: func(p *redistest.Proxy, stop <-chan struct{}) int {
				n := 0
				for {
					p.ResetAll()
					n++
					select {
					case <-stop:
						return n
					case <-time.After(15 * time.Millisecond):
					}
				}
			},
			remove: func(*redistest.Proxy) {}},
		{name: "refused", alwaysDegraded: true,
			inject: func(p *redistest.Proxy, _ <-chan struct{}) int { p.Refuse(true); p.ResetAll(); return 1 },
			remove: func(p *redistest.Proxy) { p.Refuse(false) }},
	}
	for _, f := range faults {
		t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
			srv := redistest.Start(t, redistest.Options{})
			proxy := redistest.NewProxy(t, srv.Addr())
			var logs testkit.SyncBuffer
			var states testkit.StateLog
			clk := newRecClock()
			opts := ratelimit.Options{
				Clock:           clk,
				Timeout:         250 * time.Millisecond,
				TripAfter:       2,
				ProbeAfter:      50 * time.Millisecond,
				KeyPrefix:       "net:",
				Logger:          quietLogger(&logs),
				OnBreakerChange: states.Hook,
			}
			l, err := ratelimit.Dial(testkit.ClientOption(proxy.Addr()), opts)
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			t.Cleanup(l.Close)
			rule := ratelimit.Rule{Name: "n", Limit: ratelimit.Limit{Rate: 40, Window: time.Second}}
			bound := hangBound(opts)
			keys := []string{"k0", "k1", "k2", "k3"}

			load := startLoad(t, l, clk, rule, bound, loadConfig{goroutines: 32, keys: keys, perKey: true,
				step: 250 * time.Millisecond, every: 5 * time.Millisecond, pause: 100 * time.Microsecond})
			time.Sleep(150 * time.Millisecond)
			load.setPhase(phaseInjecting)
			stop := make(chan struct{})
			injected := make(chan int, 1)
			go func() { injected <- f.inject(proxy, stop) }()
			if f.alwaysDegraded {
				<-injected // returns at once
			}
			// A fresh window for the local log, whatever the ticker did,
			// before the fault's phase begins: a call that read the clock
			// before it may be answered by the shield from a rejection
			// Redis made, which is exact, and not Degraded.
			clk.Advance(rule.Limit.Window)
			load.setPhase(phaseFault)
			time.Sleep(400 * time.Millisecond)
			if f.alwaysDegraded {
				// The fault lasts until a call begun during it was allowed
				// without Redis: under the race detector on a loaded
				// machine the calls in flight at its start, and those
				// queued behind them on their keys, may each wait out
				// Timeout before the breaker opens, past 400ms.
				testkit.Eventually(t, "a call begun during the fault and allowed without Redis", func() bool {
					return load.any(func(c faultCall) bool { return c.startPhase == phaseFault && c.res.Degraded && c.res.Allowed })
				})
			}
			load.setPhase(phaseRemoving)
			close(stop)
			if !f.alwaysDegraded {
				injected <- <-injected
			}
			f.remove(proxy)
			load.setPhase(phaseAfter)
			// Back on redis for good: 8 probes in a row. A single one may
			// pass between calls still queued behind the latency on the
			// pipelined connection, which then time out and reopen the
			// breaker.
			testkit.Eventually(t, "decisions back on redis", func() bool {
				for range 8 {
					if testkit.Allow(t, l, ratelimit.Rule{Name: "probe", Limit: ratelimit.PerSecond(1 << 20)}, "probe").Degraded {
						return false
					}
				}
				return true
			})
			time.Sleep(150 * time.Millisecond) // some load on redis again
			calls := load.stopLoad()
			nFaults := 1
			if !f.alwaysDegraded {
				nFaults = <-injected
			}

			checkNoErrorsNoHangs(t, calls, bound)
			before := summarize(calls, bound, func(c faultCall) bool { return c.endPhase == phaseBefore })
			during := summarize(calls, bound, func(c faultCall) bool { return c.startPhase == phaseFault && c.endPhase == phaseFault })
			after := summarize(calls, bound, func(c faultCall) bool { return c.startPhase == phaseAfter })
			t.Logf("before: %v", before)
			t.Logf("during: %v", during)
			t.Logf("after:  %v", after)
			t.Logf("worst call latency %v (Timeout %v); breaker: %s", load.lat.Worst(), opts.Timeout, states.String())
			if before.degraded != 0 || before.calls == 0 {
				t.Errorf("before the fault: %v; want every call on redis", before)
			}
			if during.calls == 0 || during.degradedAllowed == 0 {
				t.Errorf("during the fault: %v; want degraded calls, some allowed", during)
			}
			if f.alwaysDegraded && during.degraded != during.calls {
				t.Errorf("during the fault: %v; want every call degraded", during)
			}
			if after.calls == 0 || after.degraded == after.calls {
				t.Errorf("after the fault: %v; want calls back on redis", after)
			}
			// Per key, each path respects the rate on its own, all along;
			// together too, before and during the fault, when the breaker
			// opened once and stayed open.
			together := func(c faultCall) bool { return c.endPhase <= phaseFault }
			var mostRedis, mostLocal, mostTogether int
			for _, k := range keys {
				mostRedis = max(mostRedis, checkLimitHolds(t, calls, k, rule, func(c faultCall) bool { return !c.res.Degraded }))
				mostLocal = max(mostLocal, checkLimitHolds(t, calls, k, rule, func(c faultCall) bool { return c.res.Degraded }))
				if f.alwaysDegraded {
					checkLimitHolds(t, calls, k, rule, together)
				}
				n, _ := maxInWindow(calls, k, rule.Limit.Window, together)
				mostTogether = max(mostTogether, n)
				logKey, _ := layoutKeys(opts.KeyPrefix, rule.Name, k)
				if n := mostInOneWindow(t, srv, logKey, rule.Limit.Window); n > rule.Limit.Rate {
					t.Errorf("Redis' log of %s holds %d events in one window, rate %d", k, n, rule.Limit.Rate)
				}
			}
			if mostTogether > 2*rule.Limit.Rate {
				t.Errorf("%d calls allowed in one window, redis and local together: beyond 2 × rate %d", mostTogether, rule.Limit.Rate)
			}
			t.Logf("most calls allowed in one window: %d on redis, %d locally, %d together (rate %d); fault figures: calls=%d %s=%d",
				mostRedis, mostLocal, mostTogether, rule.Limit.Rate, len(calls), f.name, nFaults)
		})
	}
}

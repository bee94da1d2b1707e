package reliability_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultRedisKilledUnderLoad kills redis-server (SIGKILL) while 64
// goroutines call Allow on 8 keys and the fake clock slides the window (the
// calls of one key in time order: see loadConfig.perKey).
// No call may fail or hang; every call that started after the kill returned
// is Degraded; across the switch from Redis to the local log (which mirrors
// what Redis allowed) no window holds more than Rate allowed calls; and
// after a restart the limiter is back on Redis within ProbeAfter and a probe.
func TestFaultRedisKilledUnderLoad(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	clk := newRecClock()
	opts := testkit.OutageOptions(clk, &logs, &states)
	l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	rule := ratelimit.Rule{Name: "kill", Limit: ratelimit.Limit{Rate: 40, Window: time.Second}}
	bound := hangBound(opts)

	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	load := startLoad(t, l, clk, rule, bound, loadConfig{goroutines: 64, keys: keys, perKey: true,
		step: 50 * time.Millisecond, every: 5 * time.Millisecond})
	time.Sleep(200 * time.Millisecond)
	load.setPhase(phaseInjecting)
	srv.Kill()
	load.setPhase(phaseFault)
	clk.Advance(rule.Limit.Window) // a fresh window for the local log, whatever the ticker did
	time.Sleep(300 * time.Millisecond)
	calls := load.stopLoad()

	checkNoErrorsNoHangs(t, calls, bound)
	before := summarize(calls, bound, func(c faultCall) bool { return c.endPhase == phaseBefore })
	after := summarize(calls, bound, func(c faultCall) bool { return c.startPhase == phaseFault })
	t.Logf("before the kill: %v", before)
	t.Logf("after the kill:  %v", after)
	t.Logf("worst call latency %v (Timeout %v)", load.lat.Worst(), opts.Timeout)
	if before.degraded != 0 || before.allowed == 0 {
		t.Errorf("before the kill: %v; want every call on redis, some allowed", before)
	}
	if after.calls == 0 || after.degraded != after.calls {
		t.Errorf("after the kill: %v; want every call degraded", after)
	}
	if after.allowed == 0 || after.allowed == after.calls {
		t.Errorf("after the kill: %v; want the local log to allow some calls and reject others", after)
	}
	for _, c := range calls {
		if c.res.Limit != rule.Limit.Rate {
			t.Fatalf("a call enforced Limit %d, want %d: %+v", c.res.Limit, rule.Limit.Rate, c.res)
		}
	}
	most := 0
	for _, k := range keys {
		most = max(most, checkLimitHolds(t, calls, k, rule, nil))
	}
	t.Logf("most calls allowed within one window: %d (rate %d), over %d windows", most, rule.Limit.Rate,
		int(clk.Now().Sub(testkit.Epoch())/rule.Limit.Window))

	srv.Restart()
	testkit.Eventually(t, "decisions back on redis after the restart", func() bool {
		return !testkit.Allow(t, l, rule, "after-restart").Degraded
	})
	// The hook runs on the limiter's own goroutine: wait for it to report.
	testkit.Eventually(t, "the hook reports the breaker closed", func() bool {
		return strings.HasSuffix(states.String(), "half-open->closed")
	})
	if s := states.String(); !strings.HasPrefix(s, "closed->open") {
		t.Errorf("breaker changes %q: want it to open first", s)
	}
	t.Logf("fault figures: calls=%d kills=1 restarts=1", len(calls))
}

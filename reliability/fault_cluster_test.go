package reliability_test

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultClusterMasterDown stops one of the three masters of a Redis
// Cluster (no replicas) while 32 goroutines call Allow on 30 keys spread
// over all three (each key's calls in time order: see loadConfig.perKey),
// then restarts it. What must hold whatever the breaker's
// granularity (one for the cluster today, perhaps one per node later):
//
//   - every call gets an answer: no error, no hang (10 × Timeout);
//   - every call for a key on the stopped master that starts while it is down
//     is Degraded, or is a rejection the hot-key shield answers: one Redis
//     made before the stop, which holds until it could pass (it is not
//     Degraded; at most a handful land right after the stop);
//   - per key, neither Redis' decisions nor the local ones exceed Rate in any
//     window;
//   - after the restart (and WaitOK) every key is decided on Redis again.
//
// How many decisions for keys on the healthy masters were Degraded is
// logged: with one breaker for the whole cluster, failures on one master
// open it for all keys.
func TestFaultClusterMasterDown(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server and redis-cli")
	}
	cluster := redistest.StartCluster(t)
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	clk := newRecClock()
	// Decisions Redis made for a key on the stopped master, from a call
	// that started after the stop returned and ended before the restart
	// began: there must be none (the shield may answer, Redis may not).
	const victim = 1
	onVictim := map[string]bool{} // filled before the load starts
	var downFrom, downTo atomic.Int64
	downTo.Store(math.MaxInt64)
	var onRedisWhileDown atomic.Int64
	opts := ratelimit.Options{
		OnDecision: func(d ratelimit.Decision) {
			end := time.Now()
			if start := end.Add(-d.Took).UnixNano(); d.Path == ratelimit.PathRedis && onVictim[d.Key] &&
				downFrom.Load() != 0 && start > downFrom.Load() && end.UnixNano() < downTo.Load() {
				onRedisWhileDown.Add(1)
			}
		},
		Clock:           clk,
		Timeout:         time.Second,
		TripAfter:       3,
		ProbeAfter:      100 * time.Millisecond,
		KeyPrefix:       "cl:",
		Logger:          quietLogger(&logs),
		OnBreakerChange: states.Hook,
	}
	l := testkit.NewLimiter(t, testkit.NewClient(t, cluster.Addrs()...), opts)
	rule := ratelimit.Rule{Name: "c", Limit: ratelimit.Limit{Rate: 20, Window: time.Second}}
	bound := hangBound(opts)

	victimAddr := cluster.Node(victim).Addr()
	var keys []string
	perNode := map[string]int{}
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("key-%d", i)
		logKey, _ := layoutKeys(opts.KeyPrefix, rule.Name, k)
		addr := nodeFor(t, cluster, logKey).Addr()
		perNode[addr]++
		onVictim[k] = addr == victimAddr
		keys = append(keys, k)
	}
	if len(perNode) != 3 {
		t.Fatalf("the 30 keys are on %d nodes, want 3: %v", len(perNode), perNode)
	}

	load := startLoad(t, l, clk, rule, bound, loadConfig{goroutines: 32, keys: keys, perKey: true,
		step: 100 * time.Millisecond, every: 5 * time.Millisecond, pause: time.Millisecond})
	time.Sleep(200 * time.Millisecond)
	load.setPhase(phaseInjecting)
	cluster.Node(victim).Stop()
	downFrom.Store(time.Now().UnixNano())
	load.setPhase(phaseFault)
	time.Sleep(600 * time.Millisecond)
	load.setPhase(phaseRemoving)
	restartAt := time.Now()
	downTo.Store(restartAt.UnixNano())
	cluster.Node(victim).Restart()
	if err := cluster.WaitOK(20 * time.Second); err != nil {
		t.Fatalf("cluster after the restart: %v", err)
	}
	load.setPhase(phaseAfter)
	t.Logf("restart and WaitOK took %v", time.Since(restartAt).Round(time.Millisecond))
	testkit.Eventually(t, "every key back on redis", func() bool {
		for _, k := range keys {
			r, err := l.Peek(t.Context(), rule, k)
			if err != nil || r.Degraded {
				return false
			}
		}
		return true
	})
	time.Sleep(100 * time.Millisecond)
	calls := load.stopLoad()

	checkNoErrorsNoHangs(t, calls, bound)
	during := func(victim bool) func(faultCall) bool {
		return func(c faultCall) bool {
			return c.startPhase == phaseFault && c.endPhase == phaseFault && onVictim[c.key] == victim
		}
	}
	down := summarize(calls, bound, during(true))
	healthy := summarize(calls, bound, during(false))
	before := summarize(calls, bound, func(c faultCall) bool { return c.endPhase == phaseBefore })
	after := summarize(calls, bound, func(c faultCall) bool { return c.startPhase == phaseAfter })
	t.Logf("keys per node %v; stopped %s (%d keys)", perNode, victimAddr, perNode[victimAddr])
	t.Logf("before:                    %v", before)
	t.Logf("down, keys on the victim:  %v", down)
	t.Logf("down, keys on healthy nodes: %v", healthy)
	t.Logf("after:                     %v", after)
	t.Logf("worst call latency %v (Timeout %v); breaker: %s", load.lat.Worst(), opts.Timeout, abbreviate(states.String()))
	if before.degraded != 0 || before.calls == 0 {
		t.Errorf("before the stop: %v; want every call on redis", before)
	}
	if down.calls == 0 || down.degraded == 0 || down.allowed != down.degradedAllowed {
		t.Errorf("keys on the stopped master: %v; want every call degraded, but for the shield's rejections", down)
	}
	if n := onRedisWhileDown.Load(); n != 0 {
		t.Errorf("%d decisions for keys on the stopped master were made on redis while it was down", n)
	}
	if after.calls == 0 {
		t.Errorf("no calls after the restart")
	}
	byKey := map[string][]faultCall{}
	for _, c := range calls {
		byKey[c.key] = append(byKey[c.key], c)
	}
	var stayed []string
	for _, k := range keys {
		if onVictim[k] {
			continue
		}
		s := summarize(byKey[k], bound, during(false))
		if s.degraded == 0 && s.calls > 0 {
			stayed = append(stayed, k)
		}
	}
	sort.Strings(stayed)
	t.Logf("keys on healthy masters decided only on redis while the victim was down: %d of %d %v; "+
		"degraded decisions for keys on healthy masters: %d of %d",
		len(stayed), len(keys)-perNode[victimAddr], stayed, healthy.degraded, healthy.calls)
	for _, k := range keys {
		checkLimitHolds(t, byKey[k], k, rule, func(c faultCall) bool { return !c.res.Degraded })
		checkLimitHolds(t, byKey[k], k, rule, func(c faultCall) bool { return c.res.Degraded })
	}
	t.Logf("fault figures: calls=%d master-stops=1 restarts=1", len(calls))
}

// abbreviate shortens a long breaker history for the log.
func abbreviate(s string) string {
	f := strings.Fields(s)
	if len(f) <= 8 {
		return s
	}
	return fmt.Sprintf("%s ... (%d changes) ... %s", strings.Join(f[:3], " "), len(f), strings.Join(f[len(f)-3:], " "))
}

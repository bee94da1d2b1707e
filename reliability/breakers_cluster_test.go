package reliability_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestClusterBreakersPerSlotRange stops one master of a 3-master cluster:
// keys whose slot range belongs wholly to a healthy master keep being decided
// on Redis, keys of the stopped master are decided locally (and never fail),
// and all return to Redis once the master is back.
func TestClusterBreakersPerSlotRange(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("no redis-server")
	}
	cluster := redistest.StartCluster(t)
	var states testkit.StateLog
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(testkit.NewClock(), &logs, &states)
	opts.Timeout = 300 * time.Millisecond
	opts.ProbeAfter = 200 * time.Millisecond
	l := testkit.NewLimiter(t, testkit.NewClient(t, cluster.Addrs()...), opts)
	rule := ratelimit.Rule{Name: "per-range", Limit: ratelimit.PerMinute(1000)}
	ctx := context.Background()

	down := cluster.Node(0)
	rangeOwners := map[int]map[int]bool{} // slot range -> ports of its masters
	onDown := map[string]bool{}
	slots := map[string]int{}
	var keys []string
	for i := 0; i < 300; i++ {
		key := "user-" + strconv.Itoa(i)
		redisKey := fmt.Sprintf("rl:v1:{%d:%s:=%s}:l", len(rule.Name), rule.Name, key)
		owner, err := cluster.NodeForKey(redisKey)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := owner.Do("CLUSTER", "KEYSLOT", redisKey)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(slot)
		if rangeOwners[n/64] == nil {
			rangeOwners[n/64] = map[int]bool{}
		}
		rangeOwners[n/64][owner.Port()] = true
		slots[key] = n
		onDown[key] = owner == down
		keys = append(keys, key)
		if r := testkit.Allow(t, l, rule, key); r.Degraded {
			t.Fatalf("%s before the fault: %+v", key, r)
		}
	}

	down.Stop()
	var healthyChecked, downDegraded, downCalls int
	for round := 0; round < 5; round++ {
		for _, key := range keys {
			r := testkit.Allow(t, l, rule, key)
			if onDown[key] {
				downCalls++
				if r.Degraded {
					downDegraded++
				}
				continue
			}
			if rangeOwners[slots[key]/64][down.Port()] {
				continue // a range that straddles the stopped master
			}
			healthyChecked++
			if r.Degraded {
				t.Fatalf("round %d: %s on a healthy master was decided locally: %+v", round, key, r)
			}
		}
	}
	if downDegraded != downCalls || healthyChecked == 0 {
		t.Fatalf("%d of %d calls for keys of the stopped master were degraded (want all); %d healthy calls checked", downDegraded, downCalls, healthyChecked)
	}
	t.Logf("master %s stopped: %d calls on healthy masters stayed on redis, %d calls for its keys were decided locally", down.Addr(), healthyChecked, downDegraded)

	down.Restart()
	if err := cluster.WaitOK(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if !onDown[key] {
			continue
		}
		testkit.Eventually(t, "key "+key+" back on redis", func() bool {
			r, err := l.Peek(ctx, rule, key)
			return err == nil && !r.Degraded
		})
	}
}

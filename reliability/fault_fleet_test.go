package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultFleetShare: four limiters on one redis-server, as four
// instances of a service, announce themselves until each counts four live
// instances; then redis-server is killed. Each falls back to its share of
// the rule, ceil(Rate / 4), so in any window that starts after all their
// breakers opened the four together admit at most Rate + 3: with Rate 13,
// exactly 4 × 4 = 16 (each limiter exactly 4), where four limiters that
// each enforced the whole rate would admit 52.
func TestFaultFleetShare(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	clk := testkit.NewClock() // one time for the fleet's decisions
	var logs testkit.SyncBuffer
	const instances = 4
	rule := ratelimit.Rule{Name: "fleet", Limit: ratelimit.Limit{Rate: 13, Window: time.Second}}
	share := (rule.Limit.Rate + instances - 1) / instances

	// A live instance is one beaten within three heartbeats: 1.5 s, long
	// enough that a busy machine does not drop one.
	fleet := outageFleet(t, srv, clk, &logs, "fleet:", 500*time.Millisecond, instances)
	if n := mustInt(t, srv, "ZCARD", "fleet:v1:{instances}"); n != instances {
		t.Fatalf("the instances set holds %d members, want %d", n, instances)
	}
	for i, l := range fleet { // on Redis, each enforces the whole rate
		if r := testkit.Allow(t, l, rule, fmt.Sprintf("healthy%d", i)); r.Degraded || r.Limit != rule.Limit.Rate {
			t.Fatalf("limiter %d on a healthy redis: %+v", i, r)
		}
	}

	srv.Kill()
	testkit.Eventually(t, "every breaker open", func() bool {
		open := 0
		for i, l := range fleet {
			testkit.Allow(t, l, rule, fmt.Sprintf("trip%d", i)) // fails, and trips the breaker
			if l.Stats().BreakersOpen == 1 {
				open++
			}
		}
		return open == instances
	})
	clk.Advance(rule.Limit.Window) // every window from here on starts after all breakers opened
	for i, l := range fleet {
		if n := l.Stats().Instances; n != instances {
			t.Fatalf("limiter %d counts %d instances after redis died, want the %d it last saw", i, n, instances)
		}
	}

	// Three windows in steps of a tenth: at each step every limiter tries
	// 6 calls at once on the one shared key.
	var (
		mu    sync.Mutex
		calls []faultCall
	)
	const steps, perStep = 30, 6
	for range steps {
		at := clk.Now()
		var wg sync.WaitGroup
		for _, l := range fleet {
			for range perStep {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := l.Allow(t.Context(), rule, "sale")
					mu.Lock()
					calls = append(calls, faultCall{key: "sale", at: at, res: r, err: err})
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		clk.Advance(rule.Limit.Window / 10)
	}
	allowed := 0
	for _, c := range calls {
		if c.err != nil || !c.res.Degraded || c.res.Limit != share {
			t.Fatalf("call while redis is down = %+v, %v; want degraded with Limit %d", c.res, c.err, share)
		}
		if c.res.Allowed {
			allowed++
		}
	}
	most, from := maxInWindow(calls, "sale", rule.Limit.Window, nil)
	t.Logf("%d calls, %d allowed over %d windows; most allowed within one window: %d (from epoch%+v), rate %d, share %d",
		len(calls), allowed, steps/10, most, from.Sub(testkit.Epoch()), rule.Limit.Rate, share)
	if most > rule.Limit.Rate+instances-1 {
		t.Errorf("the fleet admitted %d within one window, more than Rate + 3 = %d", most, rule.Limit.Rate+instances-1)
	}
	if most != instances*share {
		t.Errorf("the fleet admitted at most %d within one window, want exactly %d (each limiter its share %d)", most, instances*share, share)
	}
	if allowed != steps/10*instances*share {
		t.Errorf("the fleet admitted %d over %d windows, want exactly %d", allowed, steps/10, steps/10*instances*share)
	}
}

// TestFleetOnCluster: limiters connected to different nodes of a 3-master
// Redis Cluster announce themselves in one set, on the one node that owns
// its hash tag, and count each other; and each holds its watch's
// subscription on that node.
func TestFleetOnCluster(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	cluster := redistest.StartCluster(t)
	var fleet [3]*ratelimit.Limiter
	for i := range fleet {
		opts := testkit.Options(testkit.NewClock())
		opts.KeyPrefix = "cfleet:"
		opts.HeartbeatInterval = 500 * time.Millisecond
		fleet[i] = testkit.NewLimiter(t, testkit.NewClient(t, cluster.Node(i).Addr()), opts)
	}
	testkit.Eventually(t, "every limiter counts three instances", func() bool {
		for _, l := range fleet {
			if l.Stats().Instances != len(fleet) {
				return false
			}
		}
		return true
	})
	key := "cfleet:v1:{instances}"
	owner, err := cluster.NodeForKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		node := cluster.Node(i)
		want := 0
		if node == owner {
			want = 4
		}
		if n := mustInt(t, node, "DBSIZE"); n != want {
			t.Errorf("node %s holds %d keys, want %d: one instances set, the time it was made, the fleet's epoch and when what Redis lost had been recorded, on the node of their slot", node.Addr(), n, want)
		}
	}
	if n := mustInt(t, owner, "ZCARD", key); n != len(fleet) {
		t.Errorf("the instances set holds %d members, want %d", n, len(fleet))
	}
	// Each limiter's watch (docs/fallback.md, "Who learns of an outage")
	// holds its subscription on the node of the fleet's key, so that the
	// end of that node's data ends it.
	testkit.Eventually(t, "every limiter's watch subscribed on the fleet key's node", func() bool {
		for i := range 3 {
			node := cluster.Node(i)
			want := "0"
			if node == owner {
				want = "3"
			}
			reply, err := node.Do("PUBSUB", "SHARDNUMSUB", key)
			if err != nil {
				t.Fatal(err)
			}
			if f := strings.Fields(reply); len(f) != 2 || f[1] != want {
				return false
			}
		}
		return true
	})
}

// TestFaultPauseIsNoLoss: redis-server's thread sleeps (DEBUG SLEEP) for
// longer than three heartbeat periods, so the instances set runs out and
// the next heartbeat makes it anew. The fleet's epoch outlives the set, so
// no loss of Redis' data is counted: once the instances have announced
// themselves again, a decision on Redis counts no reserve, and Peek
// reports the whole Rate. (Before the epoch, a set made anew was a loss:
// each instance counted the other's share for a Window.) A FLUSHALL then
// is a loss: each counts the other's share.
func TestFaultPauseIsNoLoss(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{EnableDebug: true})
	clk := testkit.NewClock() // stands still: only the heartbeats' TIME moves
	var logs testkit.SyncBuffer
	fleet := outageFleet(t, srv, clk, &logs, "pause:", 100*time.Millisecond, 2)
	rule := ratelimit.Rule{Name: "pause", Limit: ratelimit.PerHour(10)}
	remaining := func() int { return remainingOnRedis(t, fleet[0], rule) }
	testkit.Eventually(t, "the whole Rate before the pause", func() bool { return remaining() == 10 })
	born := func() string {
		v, err := srv.Do("GET", "pause:v1:{instances}:born")
		if err != nil && !errors.Is(err, redistest.ErrNil) {
			t.Fatal(err)
		}
		return v
	}
	before := born()
	srv.DebugSleep(time.Second) // ten heartbeat periods
	testkit.Eventually(t, "the instances set made anew after the sleep", func() bool { return born() != before })
	testkit.Eventually(t, "the whole Rate after the set ran out", func() bool { return remaining() == 10 })
	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the other's share reserved after a FLUSHALL", func() bool { return remaining() == 5 })
}

// outageFleet returns n limiters on srv under prefix, as n instances of a
// service, with testkit.OutageOptions on clk and logs and a heartbeat every
// period, once each counts n live instances.
func outageFleet(t *testing.T, srv *redistest.Server, clk ratelimit.Clock, logs *testkit.SyncBuffer, prefix string, period time.Duration, n int) []*ratelimit.Limiter {
	t.Helper()
	fleet := make([]*ratelimit.Limiter, n)
	for i := range fleet {
		opts := testkit.OutageOptions(clk, logs, nil)
		opts.KeyPrefix = prefix
		opts.HeartbeatInterval = period
		fleet[i] = testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	}
	testkit.Eventually(t, fmt.Sprintf("every limiter counts %d instances", n), func() bool {
		for _, l := range fleet {
			if l.Stats().Instances != n {
				return false
			}
		}
		return true
	})
	return fleet
}

// TestFaultRestartLossEndsWithTheStart: two instances, an exact log of 10
// per 6s on Redis' TIME, redis-server killed and restarted without
// persistence while both breakers rest, so that they learn of the loss
// at their probe, ProbeAfter (3s) later. What Redis lost was recorded
// before the new server started, so the other's share counts until that
// start plus a Window (plus INFO's whole second), not until the learning
// plus a Window, as it did when the loss was placed at the epoch's making.
// A FLUSHALL then, on a server that has run for longer than a Window, is a
// loss placed at the epoch's making: the share still counts after it.
func TestFaultRestartLossEndsWithTheStart(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	const window = 6 * time.Second
	fleet := make([]*ratelimit.Limiter, 2)
	for i := range fleet {
		fleet[i] = testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), ratelimit.Options{
			KeyPrefix: "restart:", Timeout: 200 * time.Millisecond, ProbeAfter: 3 * time.Second,
			HeartbeatInterval: 100 * time.Millisecond, Logger: quietLogger(&logs)})
	}
	testkit.Eventually(t, "both limiters count two instances", func() bool {
		return fleet[0].Stats().Instances == 2 && fleet[1].Stats().Instances == 2
	})
	rule := ratelimit.Rule{Name: "restart", Limit: ratelimit.Limit{Rate: 10, Window: window}}
	remaining := func() int { return remainingOnRedis(t, fleet[0], rule) }
	testkit.Eventually(t, "the whole Rate before the restart", func() bool { return remaining() == 10 })

	srv.Kill()
	testkit.Eventually(t, "both breakers open", func() bool {
		return fleet[0].Stats().BreakersOpen > 0 && fleet[1].Stats().BreakersOpen > 0
	})
	srv.Restart()
	restarted := time.Now() // the server started before this
	testkit.Eventually(t, "the other's share reserved once the loss is learnt", func() bool { return remaining() == 5 })
	learnt := time.Now()
	check := restarted.Add(window + 1600*time.Millisecond) // the start, INFO's second, and a margin
	if learnt.Add(window).Before(check.Add(500 * time.Millisecond)) {
		t.Fatalf("the loss was learnt %v after the restart: too soon to tell its start from its learning", learnt.Sub(restarted))
	}
	time.Sleep(time.Until(check))
	if got := remaining(); got != 10 {
		t.Errorf("%v after the restart (the loss learnt %v after it): Remaining %d, want 10: the loss still counts after the server's start plus a Window",
			time.Since(restarted).Round(time.Millisecond), learnt.Sub(restarted).Round(time.Millisecond), got)
	}

	if _, err := srv.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	flushed := time.Now()
	testkit.Eventually(t, "the other's share reserved after a FLUSHALL", func() bool { return remaining() == 5 })
	if time.Since(flushed) < window/2 {
		time.Sleep(time.Until(flushed.Add(window / 2)))
		if got := remaining(); got != 5 {
			t.Errorf("half a Window after a FLUSHALL: Remaining %d, want 5 (the loss counts from the epoch's making)", got)
		}
	}
}

// remainingOnRedis returns what Peek of rule's key "k" on l reports
// Remaining, or -1 when it was decided without Redis.
func remainingOnRedis(t *testing.T, l *ratelimit.Limiter, rule ratelimit.Rule) int {
	t.Helper()
	r, err := l.Peek(context.Background(), rule, "k")
	if err != nil {
		t.Fatal(err)
	}
	if r.Degraded {
		return -1
	}
	return r.Remaining
}

package reliability_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultWriteBackAfterRefusal is issue 13's repro on a real
// redis-server: rule 5 per minute, 3 calls on Redis, Redis refuses every
// command (NOPERM: nothing is executed), 2 calls allowed locally, Redis
// back. The write-back brings the 2 to Redis: its log holds exactly 5, and
// another process (a second Limiter with its own client) is rejected in
// the minute, on Redis, as this one is; not 7 as without the write-back.
// The same for a GCRA bucket of 5 per minute (Redis' TAT counts all 5: the
// next token in 2s) and a quota of 5 a day (Redis' count of the day is 5:
// the next call at midnight).
func TestFaultWriteBackAfterRefusal(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	clk := testkit.NewClock()
	opts := testkit.OutageOptions(clk, &logs, nil)
	l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	rule := ratelimit.Rule{Name: "claim", Limit: ratelimit.PerMinute(5)}
	bucket := ratelimit.Rule{Name: "bucket", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 5, Window: time.Minute, Burst: 5}}
	quota := ratelimit.Rule{Name: "daily", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 5, Period: ratelimit.Day}}
	rules := []ratelimit.Rule{rule, bucket, quota}
	t0 := clk.Now()
	for _, r := range rules {
		for i := 0; i < 3; i++ {
			if res := testkit.Allow(t, l, r, "bob"); !res.Allowed || res.Degraded {
				t.Fatalf("%q: call %d on redis = %+v", r.Name, i, res)
			}
		}
	}

	srv.Forbid(true)
	clk.Advance(10 * time.Second)
	for _, r := range rules {
		var allowed, rejected int
		for allowed+rejected < 4 {
			res := testkit.Allow(t, l, r, "bob")
			if !res.Degraded {
				t.Fatalf("%q: a call while redis refuses everything = %+v, want degraded", r.Name, res)
			}
			if res.Allowed {
				allowed++
			} else {
				rejected++
			}
		}
		if allowed != 2 {
			t.Fatalf("%q: allowed %d without redis, want 2", r.Name, allowed)
		}
	}
	logKey, _ := layoutKeys(ratelimit.DefaultKeyPrefix, rule.Name, "bob")
	bucketKey, _ := layoutKeys(ratelimit.DefaultKeyPrefix, bucket.Name, "bob")
	bucketKey = strings.TrimSuffix(bucketKey, "l") + "g"
	quotaKey, _ := layoutKeys(ratelimit.DefaultKeyPrefix, quota.Name, "bob")
	quotaKey = strings.TrimSuffix(quotaKey, "l") + "q"
	day, midnight := quota.Limit.PeriodAt(clk.Now())

	srv.Forbid(false)
	testkit.Eventually(t, "the 6 events written back", func() bool { return l.Stats().WrittenBack == 6 })
	if n := mustInt(t, srv, "ZCARD", logKey); n != 5 {
		t.Fatalf("redis' log holds %d events after the write-back, want 5", n)
	}
	if v, err := srv.Do("GET", bucketKey); err != nil || v != strconv.FormatInt(t0.Add(time.Minute).UnixMicro(), 10) {
		t.Fatalf("redis' TAT after the write-back = %q (%v), want the first call's time + 60s: 5 tokens of 12s", v, err)
	}
	if v, err := srv.Do("GET", quotaKey); err != nil || v != strconv.FormatInt(day.UnixMicro(), 10)+" 5" {
		t.Fatalf("redis' quota after the write-back = %q (%v), want 5 in the day", v, err)
	}
	other := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), testkit.OutageOptions(clk, &logs, nil))
	for _, c := range []struct {
		rule  ratelimit.Rule
		retry time.Duration
	}{{rule, 50 * time.Second}, {bucket, 2 * time.Second}, {quota, midnight.Sub(clk.Now())}} {
		if r := testkit.Allow(t, other, c.rule, "bob"); r.Allowed || r.Degraded || r.RetryAfter != c.retry {
			t.Fatalf("%q: another process = %+v, want rejected on redis for %v", c.rule.Name, r, c.retry)
		}
		if r := testkit.Allow(t, l, c.rule, "bob"); r.Allowed || r.Degraded {
			t.Fatalf("%q: this process = %+v, want rejected on redis", c.rule.Name, r)
		}
	}
	if n := mustInt(t, srv, "ZCARD", logKey); n != 5 {
		t.Fatalf("redis' log holds %d events at the end, want 5", n)
	}
	if s := l.Stats(); s.WriteBackDropped != 0 || s.WriteBackPending != 0 {
		t.Fatalf("Stats = %+v, want nothing dropped or pending", s)
	}
	// Three batches: a pass may stop between them (a breaker still half
	// open), and the log line says what each pass wrote.
	testkit.Eventually(t, "the write-back logged", func() bool {
		return strings.Contains(logs.String(), "wrote back to redis") && strings.Contains(logs.String(), " dropped=0")
	})
	if strings.Contains(logs.String(), "level=WARN msg=\"ratelimit: wrote back") {
		t.Fatalf("the write-back logged a drop:\n%s", logs.String())
	}
}

// TestFaultWriteBackAfterKillAndRestart kills redis-server (SIGKILL) between
// two bursts of 8 callers, lets them go on without Redis, and restarts it
// with its append-only file (appendfsync always, so it keeps what it had):
// once the write-back is done, Redis' log counts exactly every event
// allowed before, during and after the outage, in one window. No call is
// on its way while the server is killed, so no reply is lost (a lost reply
// is the inexact case docs/fallback.md's failure modes name).
func TestFaultWriteBackAfterKillAndRestart(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	var logs testkit.SyncBuffer
	clk := testkit.NewClock()
	opts := testkit.OutageOptions(clk, &logs, nil)
	l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	rule := ratelimit.Rule{Name: "persist", Limit: ratelimit.Limit{Rate: 100_000, Window: time.Hour}}

	var allowed, degraded atomic.Int64
	burst := func(calls int) {
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < calls; i++ {
					clk.Advance(time.Millisecond)
					r, err := l.Allow(context.Background(), rule, "k")
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						allowed.Add(1)
					}
					if r.Degraded {
						degraded.Add(1)
					}
				}
			}()
		}
		wg.Wait()
	}
	burst(200)
	if degraded.Load() != 0 {
		t.Fatalf("%d calls degraded before the kill", degraded.Load())
	}
	srv.Kill()
	burst(200)
	during := degraded.Load()
	srv.Restart()
	burst(200)
	testkit.Eventually(t, "nothing left to write back", func() bool { return l.Stats().WriteBackPending == 0 })
	s := l.Stats()
	t.Logf("allowed %d, degraded %d (%d during the outage), written back %d, dropped %d",
		allowed.Load(), degraded.Load(), during, s.WrittenBack, s.WriteBackDropped)
	if during == 0 || s.WrittenBack == 0 || s.WriteBackDropped != 0 {
		t.Fatalf("Stats = %+v with %d calls degraded during the outage: want some written back, none dropped", s, during)
	}
	logKey, _ := layoutKeys(ratelimit.DefaultKeyPrefix, rule.Name, "k")
	if n := mustInt(t, srv, "ZCARD", logKey); int64(n) != allowed.Load() {
		t.Fatalf("redis' log holds %d events, want the %d allowed", n, allowed.Load())
	}
}

// TestFaultWriteBackOnCluster: on a 3-master Redis Cluster whose nodes all
// refuse commands for a while, the write-back brings every key's events
// back to the master of its slot (one batch per key: a batch's keys share
// the pair's hash tag), exactly.
func TestFaultWriteBackOnCluster(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server and redis-cli")
	}
	cluster := redistest.StartCluster(t)
	var logs testkit.SyncBuffer
	clk := testkit.NewClock()
	opts := testkit.OutageOptions(clk, &logs, nil)
	opts.KeyPrefix = "wb:"
	l := testkit.NewLimiter(t, testkit.NewClient(t, cluster.Addrs()...), opts)
	rule := ratelimit.Rule{Name: "c", Limit: ratelimit.PerMinute(5)}
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
		for j := 0; j < 2; j++ {
			if r := testkit.Allow(t, l, rule, keys[i]); !r.Allowed || r.Degraded {
				t.Fatalf("%s call %d on redis = %+v", keys[i], j, r)
			}
		}
	}
	for i := 0; i < 3; i++ {
		cluster.Node(i).Forbid(true)
	}
	clk.Advance(time.Second)
	for _, k := range keys {
		for j := 0; j < 4; j++ {
			r := testkit.Allow(t, l, rule, k)
			if !r.Degraded || r.Allowed != (j < 3) {
				t.Fatalf("%s call %d while the cluster refuses = %+v", k, j, r)
			}
		}
	}
	for i := 0; i < 3; i++ {
		cluster.Node(i).Forbid(false)
	}
	testkit.Eventually(t, "every key written back", func() bool { return l.Stats().WrittenBack == 3*uint64(len(keys)) })
	nodes := map[string]bool{}
	for _, k := range keys {
		logKey, _ := layoutKeys(opts.KeyPrefix, rule.Name, k)
		node := nodeFor(t, cluster, logKey)
		nodes[node.Addr()] = true
		if n := mustInt(t, node, "ZCARD", logKey); n != 5 {
			t.Errorf("%s: redis' log holds %d events, want 5", k, n)
		}
	}
	if len(nodes) < 2 {
		t.Fatalf("the keys fell on %d masters, want several", len(nodes))
	}
}

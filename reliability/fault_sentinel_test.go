package reliability_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// sentinelCall is one call of the load in TestFaultSentinelFailover.
type sentinelCall struct {
	start, end time.Time
	res        ratelimit.Result
	err        error
}

// TestFaultSentinelFailover runs a limiter Dialed through three sentinels
// (rueidis.ClientOption.Sentinel) and kills the master (SIGKILL) while 16
// goroutines call Allow on 4 keys under a rule that mostly allows. No call
// may fail or hang; every call made while the replica was still a replica
// is Degraded; the limiter comes back to Redis on the promoted replica by
// itself (waited for, up to 60 s for the promotion, which a failed
// election delays by twice failover-timeout, and 30 s more for the breaker's
// probe: bounds on a hang, no timing is asserted); and there a fresh
// key gets exactly Rate calls, with the Remaining the log implies, and the
// promoted master's log holds exactly Rate events.
func TestFaultSentinelFailover(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	st := redistest.StartSentinel(t)
	var logs testkit.SyncBuffer
	// Default breaker settings (TripAfter 5, ProbeAfter 5 s); a Timeout of
	// 1 s so that a loaded machine (or -race) never turns a slow call on a
	// healthy master into a degraded one.
	opts := testkit.Isolated(ratelimit.Options{Timeout: time.Second, Logger: quietLogger(&logs)})
	l := dialSentinel(t, st, opts)
	rule := ratelimit.Rule{Name: "sentinel", Limit: ratelimit.Limit{Rate: 100_000, Window: time.Minute}}
	waitUntil(t, 30*time.Second, "decisions on redis before the kill", func() bool {
		return !testkit.Allow(t, l, rule, "probe").Degraded
	})

	const goroutines = 16
	keys := []string{"k0", "k1", "k2", "k3"}
	var stop atomic.Bool
	var wg sync.WaitGroup
	perG := make([][]sentinelCall, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				c := sentinelCall{start: time.Now()}
				c.res, c.err = l.Allow(context.Background(), rule, keys[(g+i)%len(keys)])
				c.end = time.Now()
				perG[g] = append(perG[g], c)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	stopLoad := func() []sentinelCall {
		if stop.Swap(true) {
			return nil
		}
		wg.Wait()
		var all []sentinelCall
		for _, cs := range perG {
			all = append(all, cs...)
		}
		return all
	}
	t.Cleanup(func() { stopLoad() })

	time.Sleep(500 * time.Millisecond)
	st.Master().Kill()
	killed := time.Now()

	// Watch the replica until it is promoted. lastReplica is when the last
	// INFO that still answered "slave" was sent: the replica was a replica
	// at every instant before it, and the old master was dead, so no call
	// that ended before it can have been decided on Redis.
	var lastReplica, promoted time.Time
	waitUntil(t, 60*time.Second, "the replica promoted", func() bool {
		sent := time.Now()
		role, err := redistest.Role(st.Replica())
		if err == nil && role == "slave" {
			lastReplica = sent
		}
		if err == nil && role == "master" {
			promoted = time.Now()
			return true
		}
		time.Sleep(5 * time.Millisecond)
		return false
	})
	waitUntil(t, 30*time.Second, "decisions back on redis after the failover", func() bool {
		return !testkit.Allow(t, l, rule, "probe").Degraded
	})
	back := time.Now()
	time.Sleep(300 * time.Millisecond)
	calls := stopLoad()

	var errs, degraded, duringFailover, degradedAfterKill, onRedisAfterBack int
	var worst time.Duration
	for _, c := range calls {
		if c.err != nil {
			errs++
			if errs <= 5 {
				t.Errorf("Allow returned an error: %v", c.err)
			}
			continue
		}
		worst = max(worst, c.end.Sub(c.start))
		if c.res.Degraded {
			degraded++
		}
		if c.start.After(killed) && c.res.Degraded {
			degradedAfterKill++
		}
		if c.start.After(killed) && c.end.Before(lastReplica) {
			duringFailover++
			if !c.res.Degraded {
				t.Errorf("a call made while the replica was still a replica (%v to %v after the kill) was decided on redis: %+v",
					c.start.Sub(killed), c.end.Sub(killed), c.res)
			}
		}
		if c.start.After(back) && !c.res.Degraded {
			onRedisAfterBack++
		}
	}
	t.Logf("calls=%d errors=%d degraded=%d (after the kill: %d; made while the replica was a replica: %d); on redis after the return: %d",
		len(calls), errs, degraded, degradedAfterKill, duringFailover, onRedisAfterBack)
	t.Logf("replica promoted %v after the kill (last seen a replica at %v); limiter back on redis %v after the kill",
		promoted.Sub(killed), lastReplica.Sub(killed), back.Sub(killed))
	t.Logf("worst call %v (Timeout %v)", worst, opts.Timeout)
	if worst > hangBound(opts) {
		t.Errorf("worst call took %v, more than %v: a hang", worst, hangBound(opts))
	}
	if degradedAfterKill == 0 {
		t.Errorf("no call after the kill was decided locally")
	}

	// On the promoted master, decisions are exact: a fresh key gets exactly
	// Rate calls, with Remaining counting down, and the log holds Rate events.
	exact := ratelimit.Rule{Name: "sentinel-exact", Limit: ratelimit.Limit{Rate: 10, Window: time.Minute}}
	const key = "fresh"
	n := exact.Limit.Rate
	for i := range n + 2 {
		r := testkit.Allow(t, l, exact, key)
		wantAllowed, wantRemaining := i < n, max(n-1-i, 0)
		if r.Degraded || r.Allowed != wantAllowed || r.Remaining != wantRemaining {
			t.Errorf("call %d on the promoted master: %+v; want Allowed %v, Remaining %d, not Degraded",
				i+1, r, wantAllowed, wantRemaining)
		}
	}
	logKey, _ := layoutKeys(opts.KeyPrefix, exact.Name, key)
	if got := mustInt(t, st.Replica(), "ZCARD", logKey); got != n {
		t.Errorf("ZCARD %s on the promoted master = %d, want %d", logKey, got, n)
	}
	if t.Failed() {
		t.Logf("limiter log:\n%s", logs.String())
	}
}

// waitUntil polls cond until it holds, failing the test after timeout: a
// bound on a hang, not a speed check.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchFollowsASentinelFailover: after a failover that leaves the old
// master running (SENTINEL FAILOVER), the limiter's watch leaves it for
// the promoted replica, the master its client follows now, within a
// heartbeat period of the client's switch, while the old master is still
// one; otherwise a later restart of the new master would go unseen by a
// silent instance until Sentinel made the old master a replica and killed
// its clients, seconds later (docs/fallback.md, "Who learns of an
// outage").
func TestWatchFollowsASentinelFailover(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	st := redistest.StartSentinel(t)
	var logs testkit.SyncBuffer
	opts := testkit.Isolated(ratelimit.Options{Timeout: time.Second, HeartbeatInterval: 100 * time.Millisecond, Logger: quietLogger(&logs)})
	dialSentinel(t, st, opts)
	channel := opts.KeyPrefix + "v1:{instances}"
	subscribers := func(s *redistest.Server) string {
		reply, err := s.Do("PUBSUB", "NUMSUB", channel)
		if err != nil {
			return err.Error()
		}
		return strings.Fields(reply)[1]
	}
	waitUntil(t, 30*time.Second, "the watch on the master", func() bool { return subscribers(st.Master()) == "1" })
	if _, err := st.Sentinels()[0].Do("SENTINEL", "FAILOVER", redistest.SentinelMasterSet); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	// The old master is made a replica (and its clients killed) only
	// seconds after the promotion: a watch that moves while it is still a
	// master followed the client.
	var oldRole string
	waitUntil(t, 60*time.Second, "the watch on the promoted replica", func() bool {
		if subscribers(st.Replica()) != "1" {
			return false
		}
		oldRole, _ = redistest.Role(st.Master())
		return true
	})
	if oldRole != "master" {
		t.Errorf("the watch moved once the old master was a %q: it did not follow the client, the old master's end moved it", oldRole)
	}
	waitUntil(t, 30*time.Second, "the watch off the old master", func() bool { return subscribers(st.Master()) == "0" })
}

// dialSentinel returns a Limiter Dialed through st's sentinels with opts,
// closed at cleanup.
func dialSentinel(t *testing.T, st *redistest.Sentinel, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.Dial(rueidis.ClientOption{
		InitAddress: st.SentinelAddrs(),
		Sentinel:    rueidis.SentinelOption{MasterSet: redistest.SentinelMasterSet},
	}, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

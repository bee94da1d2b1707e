package reliability_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestFaultLeasesAcrossRestart: leases held while redis-server is killed
// and restarted without persistence (it loses every lease). During the
// outage renewals extend the leases in the process, an acquire takes a slot
// in the process (counting the leases held from before) and a release
// frees one. After the restart the live holders' renewals keep working (a
// lease Redis lost is put back), the lease taken during the outage is in
// Redis under its own id, another instance gets no more than the slots
// left, and once every holder releases Redis holds no lease.
func TestFaultLeasesAcrossRestart(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(nil, &logs, nil)
	opts.KeyPrefix = "leases:"
	opts.HeartbeatInterval = -1 // one instance alone: its degraded share is N
	l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 3, Window: 20 * time.Second}}
	acquire := func(l *ratelimit.Limiter, degraded bool) *ratelimit.Lease {
		t.Helper()
		le, res, err := l.Acquire(ctx, rule, "tenant")
		if err != nil || le == nil || res.Degraded != degraded {
			t.Fatalf("Acquire = %v, %+v, %v; want a lease, Degraded %v", le, res, err, degraded)
		}
		return le
	}
	a, b := acquire(l, false), acquire(l, false)

	srv.Kill()
	for i, le := range []*ratelimit.Lease{a, b} {
		if err := le.Renew(ctx); err != nil {
			t.Fatalf("Renew of lease %d while Redis is down = %v; want it extended in the process", i, err)
		}
	}
	c := acquire(l, true)
	if le, res, err := l.Acquire(ctx, rule, "tenant"); le != nil || err != nil || res.Allowed {
		t.Fatalf("a fourth Acquire while Redis is down = %v, %+v, %v; want refused: the process holds 3", le, res, err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("Release while Redis is down = %v", err)
	}

	srv.Restart()
	testkit.Eventually(t, "deciding on redis again", func() bool {
		r, err := l.Peek(ctx, rule, "tenant")
		return err == nil && !r.Degraded
	})
	testkit.Eventually(t, "the write-back done", func() bool { return l.Stats().WriteBackPending == 0 })
	for i, le := range []*ratelimit.Lease{a, c} {
		if err := le.Renew(ctx); err != nil {
			t.Fatalf("Renew of live lease %d after the restart = %v", i, err)
		}
	}
	// A renewal the breaker or admission control kept from Redis is owed
	// to it (see TestFaultLeasesFleetOutage).
	testkit.Eventually(t, "the renewals written back", func() bool { return l.Stats().WriteBackPending == 0 })
	log, _ := layoutKeys(opts.KeyPrefix, rule.Name, "tenant")
	if got := mustInt(t, srv, "ZCARD", log); got != 2 {
		t.Fatalf("ZCARD %s after the restart and the renewals = %d, want the 2 live leases", log, got)
	}

	// Another instance sees the 2 leases held: one slot is left.
	other := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	d := acquire(other, false)
	if le, res, err := other.Acquire(ctx, rule, "tenant"); le != nil || err != nil || res.Allowed {
		t.Fatalf("another instance's second Acquire = %v, %+v, %v; want refused: 3 are held", le, res, err)
	}
	releaseAll(t, srv, log, a, c, d)
	if r, err := other.Peek(ctx, rule, "tenant"); err != nil || r.Remaining != 3 {
		t.Fatalf("Peek after every release = %+v, %v; want 3 free", r, err)
	}
}

// TestFaultLeasesPutBackByTheNextAcquire: redis-server restarts without
// persistence (it loses every lease) while an instance holds two leases it
// took there and makes no call. Its next Acquire of the key puts them back
// in that same decision: it gets the last slot, Redis holds the three
// leases, and another instance gets none.
func TestFaultLeasesPutBackByTheNextAcquire(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(nil, &logs, nil)
	opts.KeyPrefix = "putback:"
	opts.HeartbeatInterval = -1
	a := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 3, Window: 20 * time.Second}}
	acquire := func(l *ratelimit.Limiter) *ratelimit.Lease {
		t.Helper()
		le, res, err := l.Acquire(ctx, rule, "tenant")
		if err != nil || le == nil || res.Degraded {
			t.Fatalf("Acquire = %v, %+v, %v; want a lease decided on Redis\n%s", le, res, err, logs.String())
		}
		return le
	}
	x, y := acquire(a), acquire(a)

	srv.Kill()
	srv.Restart()
	onRedisAgain(t, a, rule, "tenant")
	log, _ := layoutKeys(opts.KeyPrefix, rule.Name, "tenant")
	if got := mustInt(t, srv, "ZCARD", log); got != 0 {
		t.Fatalf("ZCARD %s after the restart = %d; want 0: the server lost the leases", log, got)
	}
	z := acquire(a)
	if got := mustInt(t, srv, "ZCARD", log); got != 3 {
		t.Fatalf("ZCARD %s after the holder's next Acquire = %d; want its 3 leases", log, got)
	}
	b := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	if le, res, err := b.Acquire(ctx, rule, "tenant"); le != nil || err != nil || res.Allowed {
		t.Fatalf("another instance's Acquire with 3 held = %v, %+v, %v; want refused", le, res, err)
	}
	releaseAll(t, srv, log, x, y, z)
}

// onRedisAgain waits until l decides key under rule on Redis again, in 8
// Peeks in a row: the client has reconnected every connection it keeps,
// and no breaker keeps calls from Redis.
func onRedisAgain(t *testing.T, l *ratelimit.Limiter, rule ratelimit.Rule, key string) {
	t.Helper()
	testkit.Eventually(t, "deciding on redis again", func() bool {
		for range 8 {
			if r, err := l.Peek(context.Background(), rule, key); err != nil || r.Degraded {
				return false
			}
		}
		return true
	})
}

// releaseAll releases leases and waits until Redis holds no lease under
// log: a release Redis could not take when it was made (a connection lost
// in the restart) is sent again by the write-back's loop.
func releaseAll(t *testing.T, srv *redistest.Server, log string, leases ...*ratelimit.Lease) {
	t.Helper()
	for _, le := range leases {
		if err := le.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "no lease left in "+log, func() bool { return mustInt(t, srv, "ZCARD", log) == 0 })
}

// TestFaultLeasesFleetOutage: four limiters (instances of one application,
// each with its own client and heartbeat) share a Concurrency rule of
// N = 8 and hold one lease each when redis-server is killed. During the
// outage each takes slots in its process up to its share, ceil(N / 4) = 2,
// counting the lease it held: the fleet holds 8, within docs/concurrency.md's bound
// N + instances - 1 plus what it held before. After a restart without
// persistence every live holder's renewal works (Redis lost the leases;
// the renewals put them back), no new lease is granted while 8 are held,
// and once every holder releases no slot stays taken.
func TestFaultLeasesFleetOutage(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	const instances, n = 4, 8
	srv := redistest.Start(t, redistest.Options{})
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(nil, &logs, nil)
	opts.KeyPrefix = "fleetleases:"
	opts.HeartbeatInterval = 100 * time.Millisecond
	var ls []*ratelimit.Limiter
	for range instances {
		ls = append(ls, testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts))
	}
	testkit.Eventually(t, "every limiter counts the fleet", func() bool {
		for _, l := range ls {
			if l.Stats().Instances != instances {
				return false
			}
		}
		return true
	})
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: n, Window: 20 * time.Second}}
	held := make([][]*ratelimit.Lease, instances)
	for i, l := range ls {
		le, res, err := l.Acquire(ctx, rule, "tenant")
		if err != nil || le == nil || res.Degraded {
			t.Fatalf("limiter %d: Acquire before the outage = %v, %+v, %v", i, le, res, err)
		}
		held[i] = append(held[i], le)
	}

	srv.Kill()
	total := 0
	for i, l := range ls {
		for {
			le, res, err := l.Acquire(ctx, rule, "tenant")
			if err != nil {
				t.Fatalf("limiter %d: Acquire during the outage = %v", i, err)
			}
			if le == nil {
				break
			}
			if !res.Degraded {
				t.Fatalf("limiter %d: a lease decided on a killed Redis: %+v", i, res)
			}
			held[i] = append(held[i], le)
		}
		total += len(held[i])
	}
	if bound := n + instances - 1 + instances; total > bound {
		t.Fatalf("the fleet holds %d leases during the outage, more than docs/concurrency.md's bound %d", total, bound)
	}
	t.Logf("during the outage the fleet holds %d leases (N = %d, %d instances)", total, n, instances)

	srv.Restart()
	log, _ := layoutKeys(opts.KeyPrefix, rule.Name, "tenant")
	for i, l := range ls {
		testkit.Eventually(t, "deciding on redis again", func() bool {
			r, err := l.Peek(ctx, rule, "tenant")
			return err == nil && !r.Degraded
		})
		// Every lease taken during the outage written back (not only cut
		// into a batch that may still be on its way).
		outage := uint64(len(held[i]) - 1)
		testkit.Eventually(t, "the write-back done", func() bool {
			s := l.Stats()
			return s.WriteBackPending == 0 && s.WrittenBack >= outage
		})
		for j, le := range held[i] {
			if err := le.Renew(ctx); err != nil {
				t.Fatalf("limiter %d lease %d: Renew after the restart = %v", i, j, err)
			}
		}
	}
	// A renewal made while a breaker was still half-open, or shed by
	// admission control, extended the lease in the process and is owed to
	// Redis: wait for every write-back.
	for _, l := range ls {
		testkit.Eventually(t, "the renewals written back", func() bool { return l.Stats().WriteBackPending == 0 })
	}
	if got := mustInt(t, srv, "ZCARD", log); got != total {
		t.Fatalf("ZCARD %s after the renewals = %d, want the %d leases held", log, got, total)
	}
	for i, l := range ls {
		if le, res, err := l.Acquire(ctx, rule, "tenant"); le != nil || err != nil || res.Allowed {
			t.Fatalf("limiter %d: Acquire after the recovery with %d held = %+v, %v; want refused", i, total, res, err)
		}
	}
	var all []*ratelimit.Lease
	for _, hs := range held {
		all = append(all, hs...)
	}
	releaseAll(t, srv, log, all...)
}

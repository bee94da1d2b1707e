package ratelimit_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// leaseBackends are the limiters the lease tests run on, in real time:
// Hold renews on the limiter's clock.
func leaseBackends(t *testing.T) map[string]func(opts ratelimit.Options) *ratelimit.Limiter {
	return map[string]func(opts ratelimit.Options) *ratelimit.Limiter{
		"local": func(opts ratelimit.Options) *ratelimit.Limiter { return testkit.NewLimiter(t, nil, opts) },
		"miniredis": func(opts ratelimit.Options) *ratelimit.Limiter {
			mr := miniredis.RunT(t)
			return testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
		},
	}
}

func slots(name string, n int, ttl time.Duration) ratelimit.Rule {
	return ratelimit.Rule{Name: name, Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: n, Window: ttl}}
}

// free returns the free slots of key under rule.
func free(t *testing.T, l *ratelimit.Limiter, rule ratelimit.Rule, key string) int {
	t.Helper()
	r, err := l.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

// TestHold: Hold runs fn holding a slot and gives it back when fn returns
// or panics; it refuses without running fn when no slot is free; a lease
// lost while fn runs cancels fn's context and Hold's error says so; and it
// leaves no goroutine behind.
func TestHold(t *testing.T) {
	for name, newLimiter := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			l := newLimiter(ratelimit.Options{Timeout: time.Second})
			ctx := context.Background()
			rule := slots("hold", 1, 150*time.Millisecond)

			ran := false
			res, err := l.Hold(ctx, rule, "k", func(ctx context.Context) error {
				ran = true
				if n := free(t, l, rule, "k"); n != 0 {
					t.Errorf("free slots while fn holds the only one = %d, want 0", n)
				}
				// Outlive several TTLs: the renewals keep the lease.
				time.Sleep(400 * time.Millisecond)
				if n := free(t, l, rule, "k"); n != 0 {
					t.Errorf("free slots after 400ms of a 150ms lease held by Hold = %d, want 0", n)
				}
				return ctx.Err()
			})
			if err != nil || !res.Allowed || !ran {
				t.Fatalf("Hold = %+v, %v (fn ran: %v)", res, err, ran)
			}
			if n := free(t, l, rule, "k"); n != 1 {
				t.Fatalf("free slots after Hold = %d, want 1", n)
			}

			// No slot: fn does not run.
			le, _, err := l.Acquire(ctx, rule, "k")
			if err != nil || le == nil {
				t.Fatalf("Acquire = %v, %v", le, err)
			}
			res, err = l.Hold(ctx, rule, "k", func(context.Context) error {
				t.Error("fn ran without a slot")
				return nil
			})
			if err != nil || res.Allowed || res.RetryAfter <= 0 {
				t.Fatalf("Hold without a free slot = %+v, %v; want the rejection", res, err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}

			// A panic in fn gives the slot back, and goes on.
			func() {
				defer func() {
					if recover() == nil {
						t.Error("the panic did not reach Hold's caller")
					}
				}()
				l.Hold(ctx, rule, "k", func(context.Context) error { panic("boom") })
			}()
			if n := free(t, l, rule, "k"); n != 1 {
				t.Fatalf("free slots after fn panicked = %d, want 1", n)
			}

			// A Reset frees the slot: the next renewal finds the lease lost,
			// and fn's context ends.
			res, err = l.Hold(ctx, rule, "k", func(ctx context.Context) error {
				if err := l.Reset(context.Background(), rule, "k"); err != nil {
					t.Error(err)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Second):
					return errors.New("fn's context did not end when the lease was lost")
				}
			})
			if !errors.Is(err, ratelimit.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Hold whose lease was lost = %+v, %v; want ErrLeaseLost joined with fn's context.Canceled", res, err)
			}

			testkit.Eventually(t, "Hold's goroutines gone", func() bool { return !holdRunning() })
			if s := l.Stats(); s.LeasesHeld != 0 || s.LeaseReleases < 3 || s.LeaseRenewals < 2 || s.LeasesLost != 1 {
				t.Errorf("Stats after the Holds: held %d, releases %d, renewals %d, lost %d; want 0, at least 3, at least 2, 1",
					s.LeasesHeld, s.LeaseReleases, s.LeaseRenewals, s.LeasesLost)
			}
		})
	}
}

// TestAcquireWait: a waiter gets the slot a release frees, at once, and
// gives up with ctx's error when none frees in time.
func TestAcquireWait(t *testing.T) {
	for name, newLimiter := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			l := newLimiter(ratelimit.Options{Timeout: time.Second})
			ctx := context.Background()
			rule := slots("wait", 1, time.Minute)
			held, _, err := l.Acquire(ctx, rule, "k")
			if err != nil || held == nil {
				t.Fatalf("Acquire = %v, %v", held, err)
			}
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if le, res, err := l.AcquireWait(short, rule, "k"); le != nil || !errors.Is(err, context.DeadlineExceeded) || res.Allowed {
				t.Fatalf("AcquireWait with no slot freed in time = %v, %+v, %v; want DeadlineExceeded", le, res, err)
			}
			got := make(chan *ratelimit.Lease)
			go func() {
				le, _, err := l.AcquireWait(ctx, rule, "k")
				if err != nil {
					t.Error(err)
				}
				got <- le
			}()
			time.Sleep(20 * time.Millisecond)
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case le := <-got:
				if le == nil {
					t.Fatal("AcquireWait returned no lease")
				}
				t.Logf("the waiter got the slot %v after the release", time.Since(released))
				le.Release(ctx)
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter did not get the freed slot")
			}
		})
	}
}

// TestLeaseDegradedAndDryRun: under DegradedAllow an acquire without Redis
// gets a lease that records nothing; a rule in dry run always gets a
// lease, recorded only when it fits; Close releases what the Limiter holds.
func TestLeaseDegradedAndDryRun(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), ratelimit.Options{Timeout: time.Second})

	dry := slots("dry", 1, time.Minute)
	dry.DryRun = true
	first, r1, err := l.Acquire(ctx, dry, "k")
	if err != nil || first == nil || r1.DryRun {
		t.Fatalf("first dry-run Acquire = %v, %+v, %v", first, r1, err)
	}
	second, r2, err := l.Acquire(ctx, dry, "k")
	if err != nil || second == nil || !r2.DryRun || !r2.Allowed {
		t.Fatalf("second dry-run Acquire = %v, %+v, %v; want a lease reported as dry run", second, r2, err)
	}
	// The lease over the limit is recorded: with two held, Peek reports
	// the rejection enforcing would answer.
	if r, err := l.Peek(ctx, dry, "k"); err != nil || r.Remaining != 0 || !r.DryRun {
		t.Fatalf("Peek with the dry run's two leases = %+v, %v; want full, in dry run", r, err)
	}
	inRedis := 0
	for _, k := range mr.Keys() {
		if m, err := mr.ZMembers(k); err == nil && strings.Contains(k, ":dry:") {
			inRedis += len(m)
		}
	}
	if inRedis != 2 {
		t.Fatalf("Redis holds %d leases of the dry-run rule, want 2: the one over the limit is recorded", inRedis)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := free(t, l, dry, "k"); n != 0 {
		t.Fatalf("free after releasing the dry run's extra lease = %d, want 0 (the first still holds)", n)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := free(t, l, dry, "k"); n != 1 {
		t.Fatalf("free after releasing both = %d, want 1", n)
	}

	// Close releases the first lease in Redis.
	held, _, err := l.Acquire(ctx, slots("closed", 2, time.Minute), "k")
	if err != nil || held == nil {
		t.Fatal(err)
	}
	l.Close()
	for _, k := range mr.Keys() {
		if m, err := mr.ZMembers(k); err == nil && len(m) > 0 {
			t.Errorf("after Close %s still holds %v", k, m)
		}
	}
	if err := held.Release(ctx); !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("Release after Close = %v, want ErrClosed", err)
	}

	// DegradedAllow: Redis gone, a lease that records nothing.
	open := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), ratelimit.Options{Timeout: 200 * time.Millisecond, Degraded: ratelimit.DegradedAllow})
	mr.Close()
	le, res, err := open.Acquire(ctx, slots("open", 1, time.Minute), "k")
	if err != nil || le == nil || !res.Degraded {
		t.Fatalf("Acquire under DegradedAllow without Redis = %v, %+v, %v", le, res, err)
	}
	if err := le.Renew(ctx); err != nil {
		t.Errorf("Renew of a lease that records nothing = %v", err)
	}
	if err := le.Release(ctx); err != nil {
		t.Errorf("Release of a lease that records nothing = %v", err)
	}
}

// holdRunning reports whether a goroutine of Hold's (its renewals, or the
// waits they sleep in) is still running.
func holdRunning() bool {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return strings.Contains(stacks, "ratelimit.(*Lease).keep") || strings.Contains(stacks, "ratelimit.(*Limiter).Hold")
}

// TestHoldLosesTheLeaseWhenItCannotRenew: under DegradedDeny a renewal
// without Redis fails (the fallback may not extend the lease); once the
// lease's TTL passes without one, Hold cancels fn's context and says the
// lease was lost.
func TestHoldLosesTheLeaseWhenItCannotRenew(t *testing.T) {
	mr := miniredis.RunT(t)
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), ratelimit.Options{Timeout: time.Second, TripAfter: 1, HeartbeatInterval: -1})
	rule := slots("deny", 1, 150*time.Millisecond)
	rule.Degraded = ratelimit.DegradedDeny
	started := time.Now()
	_, err := l.Hold(context.Background(), rule, "k", func(ctx context.Context) error {
		mr.Close() // Redis goes away while fn runs
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("fn's context did not end")
		}
	})
	if !errors.Is(err, ratelimit.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Hold whose lease could not be renewed = %v; want ErrLeaseLost joined with context.Canceled", err)
	}
	if took := time.Since(started); took < 150*time.Millisecond {
		t.Fatalf("fn was cancelled after %v, before the lease's TTL", took)
	}
	testkit.Eventually(t, "Hold's goroutines gone", func() bool { return !holdRunning() })
}

// TestAcquirePutsBackLeasesRedisLost: Redis loses its data (FLUSHALL, as a
// restart without persistence does) while an instance holds leases it took
// on Redis. Its next Acquire of the key puts back, in that same decision,
// the leases it still holds, not the one it released meanwhile, so that
// another instance is granted only the slots left; while Redis keeps its
// data, an Acquire puts back nothing (a lease released elsewhere in the
// meantime stays released).
func TestAcquirePutsBackLeasesRedisLost(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	clk := testkit.NewClock()
	opts := testkit.Isolated(testkit.Options(clk))
	a := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	b := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	rule := slots("exports", 3, time.Minute)
	acquire := func(l *ratelimit.Limiter, remaining int) *ratelimit.Lease {
		t.Helper()
		le, res, err := l.Acquire(ctx, rule, "tenant")
		if err != nil || le == nil || res.Degraded || res.Remaining != remaining {
			t.Fatalf("Acquire = %v, %+v, %v; want a lease decided on Redis, %d free after it", le, res, err, remaining)
		}
		return le
	}
	leases := func() []string { return leaseLog(t, mr) }

	x, y := acquire(a, 2), acquire(a, 1)
	mr.FlushAll()
	if err := y.Release(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	z := acquire(a, 1) // x and z held: x is back in Redis
	if got := leases(); len(got) != 2 {
		t.Fatalf("Redis holds leases %q after the Acquire that followed the loss; want x's and z's", got)
	}
	w := acquire(b, 0)
	if le, res, err := b.Acquire(ctx, rule, "tenant"); le != nil || err != nil || res.Allowed {
		t.Fatalf("another instance's Acquire with x, z and w held = %v, %+v, %v; want refused", le, res, err)
	}

	// b releases w; a, still holding x and z, sends them along: Redis kept
	// its data, so w stays released.
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	v := acquire(a, 0)
	if got := leases(); len(got) != 3 {
		t.Fatalf("Redis holds leases %q; want x's, z's and v's", got)
	}
	for _, le := range []*ratelimit.Lease{x, z, v} {
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := leases(); len(got) != 0 {
		t.Fatalf("Redis holds leases %q after every release; want none", got)
	}
}

// TestLeasesByRule: LeasesByRule counts the leases held under each rule,
// and forgets a rule once its leases are given back.
func TestLeasesByRule(t *testing.T) {
	ctx := context.Background()
	l := testkit.NewLimiter(t, nil, testkit.Options(testkit.NewClock()))
	if got := l.LeasesByRule(); got != nil {
		t.Fatalf("LeasesByRule of a fresh limiter = %v, want nil", got)
	}
	a, _, _ := l.Acquire(ctx, slots("exports", 3, time.Minute), "t1")
	b, _, _ := l.Acquire(ctx, slots("exports", 3, time.Minute), "t2")
	c, _, _ := l.Acquire(ctx, slots("partner", 3, time.Minute), "p")
	if got := l.LeasesByRule(); len(got) != 2 || got["exports"] != 2 || got["partner"] != 1 {
		t.Fatalf("LeasesByRule = %v, want exports 2, partner 1", got)
	}
	for _, le := range []*ratelimit.Lease{a, b, c} {
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.LeasesByRule(); got != nil {
		t.Fatalf("LeasesByRule after every release = %v, want nil", got)
	}
}

// TestAcquirePutsBackWrittenBackLeases: a lease taken while Redis could not
// be used is written back once it can; when Redis then loses its data, the
// holder's next Acquire puts that lease back too.
func TestAcquirePutsBackWrittenBackLeases(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	opts := testkit.Isolated(testkit.OutageOptions(nil, &logs, nil))
	opts.HeartbeatInterval = -1
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	rule := slots("exports", 3, time.Minute)
	log := func() []string { return leaseLog(t, mr) }

	mr.Close()
	c, res, err := l.Acquire(ctx, rule, "tenant")
	if err != nil || c == nil || !res.Degraded {
		t.Fatalf("Acquire while Redis is down = %v, %+v, %v; want a lease taken in the process", c, res, err)
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the lease written back", func() bool { return l.Stats().WriteBackPending == 0 && len(log()) == 1 })

	mr.FlushAll()
	testkit.Eventually(t, "an Acquire decided on Redis", func() bool {
		d, res, err := l.Acquire(ctx, rule, "tenant")
		if err != nil || d == nil {
			t.Fatalf("Acquire = %v, %+v, %v", d, res, err)
		}
		if res.Degraded {
			return false // a breaker still half-open; the lease is the process' own
		}
		if got := log(); len(got) < 2 {
			t.Fatalf("Redis holds %q after the Acquire that followed the loss; want the written-back lease back too", got)
		}
		return true
	})
}

// leaseLog returns the lease ids in mr's one concurrency log (the key
// ending in ":l"), or nil when there is none.
func leaseLog(t *testing.T, mr *miniredis.Miniredis) []string {
	t.Helper()
	for _, k := range mr.Keys() {
		if strings.HasSuffix(k, ":l") {
			m, err := mr.ZMembers(k)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	return nil
}

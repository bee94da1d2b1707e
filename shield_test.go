package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestShieldAnswersWithoutRedis: once Redis has rejected a full window or
// banned a key, the same call is answered exactly, and without Redis, until
// it could pass.
func TestShieldAnswersWithoutRedis(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := testkit.NewClock()
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.Options(clk))
	ctx := context.Background()
	plain := ratelimit.Rule{Name: "plain", Limit: ratelimit.PerMinute(2)}
	banning := ratelimit.Rule{Name: "banning", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{BanAfter: 1, BanFor: time.Hour, Memory: 30 * time.Minute}}
	testkit.Allow(t, l, plain, "k")
	clk.Advance(10 * time.Second)
	testkit.Allow(t, l, plain, "k")
	if r := testkit.Allow(t, l, plain, "k"); r.Allowed {
		t.Fatalf("third call = %+v, want rejected", r)
	}
	testkit.Allow(t, l, banning, "k")
	if r := testkit.Allow(t, l, banning, "k"); !r.Banned {
		t.Fatalf("second call = %+v, want banned", r)
	}
	testkit.Allow(t, l, plain, "free") // one event of two

	mr.Close() // from here on, only the shield can answer without degrading
	clk.Advance(20 * time.Second)
	if r := testkit.Allow(t, l, plain, "k"); r != (ratelimit.Result{Limit: 2, RetryAfter: 30 * time.Second, ResetAfter: 40 * time.Second}) {
		t.Fatalf("shielded rejection = %+v", r)
	}
	if r, err := l.Peek(ctx, plain, "k"); err != nil || r != (ratelimit.Result{Limit: 2, RetryAfter: 30 * time.Second, ResetAfter: 40 * time.Second}) {
		t.Fatalf("shielded peek = %+v, %v", r, err)
	}
	if r := testkit.Allow(t, l, banning, "k"); r != (ratelimit.Result{Limit: 1, RetryAfter: time.Hour - 20*time.Second, ResetAfter: 40 * time.Second, Violations: 1, Banned: true, BannedFor: time.Hour - 20*time.Second}) {
		t.Fatalf("shielded ban = %+v", r)
	}
	clk.Advance(30 * time.Minute) // the violation is forgotten during the ban
	if r := testkit.Allow(t, l, banning, "k"); r != (ratelimit.Result{Limit: 1, RetryAfter: 30*time.Minute - 20*time.Second, Banned: true, BannedFor: 30*time.Minute - 20*time.Second}) {
		t.Fatalf("shielded ban after its violation was forgotten = %+v", r)
	}
	// A key with room is not shielded: with Redis down it is degraded.
	if r := testkit.Allow(t, l, plain, "free"); !r.Degraded {
		t.Fatalf("a key with room = %+v, want a degraded decision", r)
	}
}

// TestShieldAndResets: this limiter's Reset clears its shield at once;
// another process' Reset is seen when the cached rejection ends or after
// ShieldMax.
func TestShieldAndResets(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := testkit.NewClock()
	opts := testkit.Options(clk)
	opts.ShieldMax = 5 * time.Second
	here := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	there := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.Options(clk))
	rule := ratelimit.Rule{Name: "reset", Limit: ratelimit.PerMinute(1)}
	ctx := context.Background()

	testkit.Allow(t, here, rule, "k")
	if r := testkit.Allow(t, here, rule, "k"); r.Allowed {
		t.Fatalf("want rejected, got %+v", r)
	}
	if err := here.Reset(ctx, rule, "k"); err != nil {
		t.Fatal(err)
	}
	if r := testkit.Allow(t, here, rule, "k"); !r.Allowed {
		t.Fatalf("after this limiter's Reset = %+v, want allowed", r)
	}
	if r := testkit.Allow(t, here, rule, "k"); r.Allowed {
		t.Fatalf("want rejected, got %+v", r)
	}
	if err := there.Reset(ctx, rule, "k"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5*time.Second - time.Microsecond)
	if r := testkit.Allow(t, here, rule, "k"); r.Allowed {
		t.Fatalf("within ShieldMax of another process' Reset = %+v, want the cached rejection", r)
	}
	clk.Advance(time.Microsecond)
	if r := testkit.Allow(t, here, rule, "k"); !r.Allowed {
		t.Fatalf("ShieldMax after another process' Reset = %+v, want allowed", r)
	}
}

// TestShieldOff: a negative ShieldMax sends every call to Redis.
func TestShieldOff(t *testing.T) {
	mr := miniredis.RunT(t)
	opts := testkit.Options(testkit.NewClock())
	opts.ShieldMax = -1
	opts.TripAfter = 100
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	rule := ratelimit.Rule{Name: "off", Limit: ratelimit.PerMinute(1)}
	testkit.Allow(t, l, rule, "k")
	testkit.Allow(t, l, rule, "k")
	mr.Close()
	if r := testkit.Allow(t, l, rule, "k"); !r.Degraded {
		t.Fatalf("with the shield off = %+v, want a degraded decision", r)
	}
}

// TestShieldHoldsKinds: a full GCRA bucket, a spent quota and a spent
// fixed window are answered exactly without Redis until the call could
// pass: the next token, the next period, the next window.
func TestShieldHoldsKinds(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := testkit.NewClock()
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.Options(clk))
	ctx := context.Background()
	bucket := ratelimit.Rule{Name: "s-g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Minute, Burst: 2}}
	daily := ratelimit.Rule{Name: "s-q", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1, Period: ratelimit.Day}}
	hourly := ratelimit.Rule{Name: "s-f", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 1, Window: time.Hour}}
	toHour := time.Hour - 123456*time.Microsecond // testkit.Epoch is noon and a fraction
	testkit.Allow(t, l, hourly, "k")
	if r := testkit.Allow(t, l, hourly, "k"); r != (ratelimit.Result{Limit: 1, RetryAfter: toHour, ResetAfter: toHour}) {
		t.Fatalf("spent window = %+v", r)
	}
	if r, err := l.AllowN(ctx, bucket, "k", 2); err != nil || !r.Allowed {
		t.Fatalf("bucket = %+v, %v", r, err)
	}
	if r := testkit.Allow(t, l, bucket, "k"); r != (ratelimit.Result{Limit: 2, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute}) {
		t.Fatalf("full bucket = %+v", r)
	}
	testkit.Allow(t, l, daily, "k")
	toMidnight := 12*time.Hour - 123456*time.Microsecond
	if r := testkit.Allow(t, l, daily, "k"); r != (ratelimit.Result{Limit: 1, RetryAfter: toMidnight, ResetAfter: toMidnight}) {
		t.Fatalf("spent quota = %+v", r)
	}

	mr.Close() // from here on, only the shield can answer without degrading
	clk.Advance(20 * time.Second)
	if r := testkit.Allow(t, l, bucket, "k"); r != (ratelimit.Result{Limit: 2, RetryAfter: 40 * time.Second, ResetAfter: 100 * time.Second}) {
		t.Fatalf("shielded bucket = %+v", r)
	}
	if r := testkit.Allow(t, l, daily, "k"); r != (ratelimit.Result{Limit: 1, RetryAfter: toMidnight - 20*time.Second, ResetAfter: toMidnight - 20*time.Second}) {
		t.Fatalf("shielded quota = %+v", r)
	}
	if r := testkit.Allow(t, l, hourly, "k"); r != (ratelimit.Result{Limit: 1, RetryAfter: toHour - 20*time.Second, ResetAfter: toHour - 20*time.Second}) {
		t.Fatalf("shielded window = %+v", r)
	}
	clk.Advance(40 * time.Second) // a token is back: Redis must decide
	if r := testkit.Allow(t, l, bucket, "k"); !r.Degraded || !r.Allowed {
		t.Fatalf("bucket with a token = %+v, want a degraded decision", r)
	}
	clk.Set(testkit.Epoch().Add(toHour)) // a new window: Redis must decide
	if r := testkit.Allow(t, l, hourly, "k"); !r.Degraded || !r.Allowed {
		t.Fatalf("a new window = %+v, want a degraded decision", r)
	}
	clk.Set(testkit.Epoch().Add(toMidnight)) // a new day: Redis must decide
	if r := testkit.Allow(t, l, daily, "k"); !r.Degraded || !r.Allowed {
		t.Fatalf("quota in a new day = %+v, want a degraded decision", r)
	}
}

// TestShieldAfterFillingCall: at a pair that has a crowd (a call its own
// count found full went to Redis), a call Redis allows that leaves the
// pair full caches the rejection the next call would get, as a probe that
// found the key full again would have: the next call is answered exactly,
// and without Redis, until a token is back.
func TestShieldAfterFillingCall(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := testkit.NewClock()
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.Options(clk))
	ctx := context.Background()
	bucket := ratelimit.Rule{Name: "fill-g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Minute, Burst: 2}}
	if r, err := l.AllowN(ctx, bucket, "k", 2); err != nil || !r.Allowed {
		t.Fatalf("bucket = %+v, %v", r, err)
	}
	if r := testkit.Allow(t, l, bucket, "k"); r.Allowed {
		t.Fatalf("full bucket = %+v, want rejected", r)
	}
	clk.Advance(time.Minute) // a token is back
	if r := testkit.Allow(t, l, bucket, "k"); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("the token = %+v, want allowed with none remaining", r)
	}

	mr.Close() // from here on, only the shield can answer without degrading
	clk.Advance(20 * time.Second)
	if r := testkit.Allow(t, l, bucket, "k"); r != (ratelimit.Result{Limit: 2, RetryAfter: 40 * time.Second, ResetAfter: 100 * time.Second}) {
		t.Fatalf("after the call that filled the bucket = %+v, want the shield's rejection", r)
	}
	clk.Advance(40 * time.Second) // a token is back: Redis must decide
	if r := testkit.Allow(t, l, bucket, "k"); !r.Degraded || !r.Allowed {
		t.Fatalf("bucket with a token = %+v, want a degraded decision", r)
	}
}

package policy_test

import (
	"context"
	"errors"
	"fmt"
	"time"
	_ "time/tzdata" // Europe/Berlin wherever the examples run

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/policy"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// A request limited per user and site-wide, with a new rule watched in dry
// run: the fields name only the enforced policies, and a request the
// per-user policy denies costs the site-wide one nothing.
func ExampleWalk() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()

	site := ratelimit.Rule{Name: "site", Limit: ratelimit.PerMinute(100)}
	perUser := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(2)}
	watched := ratelimit.Rule{Name: "burst", Limit: ratelimit.PerSecond(1), DryRun: true}
	entries := []policy.Entry{
		{Rule: site, Key: "shop"},
		{Rule: perUser, Key: "alice"},
		{Rule: watched, Key: "alice"},
	}
	for range 3 {
		out, err := policy.Walk(context.Background(), env.Limiter, entries, nil)
		if err != nil {
			panic(err)
		}
		_, denied := policy.Denial(out)
		f := policy.Format(out)
		fmt.Printf("denied=%v RateLimit: %s\n", denied, f.RateLimit)
		if f.DryRun != "" {
			fmt.Println("    RateLimit-Dry-Run:", f.DryRun)
		}
		env.Clock.Advance(100 * time.Millisecond)
	}
	// Output:
	// denied=false RateLimit: "site";r=99;t=60, "coupon";r=1;t=60
	// denied=false RateLimit: "site";r=98;t=60, "coupon";r=0;t=60
	//     RateLimit-Dry-Run: "burst";t=1
	// denied=true RateLimit: "site";r=98;t=60, "coupon";r=0;t=60
}

// A policy's name as a client reads it from the fields: bytes outside
// printable ASCII, and '%', are percent-encoded.
func ExampleEncode() {
	fmt.Println(policy.Encode("coupon"))
	fmt.Println(policy.Encode("50% off"))
	fmt.Println(policy.Encode("café"))
	// Output:
	// coupon
	// 50%25 off
	// caf%C3%A9
}

// The fields of a request the second of two policies denied.
func ExampleFormat() {
	rule := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	f := policy.Format([]policy.Outcome{
		{Entry: policy.Entry{Name: "site", Rule: rule, Key: "shop"},
			Result: ratelimit.Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: time.Minute}},
		{Entry: policy.Entry{Name: "coupon", Rule: rule, Key: "alice"},
			Result: ratelimit.Result{Limit: 3, RetryAfter: 1500 * time.Millisecond, ResetAfter: time.Minute}},
	})
	fmt.Println(policy.FieldPolicy+":", f.Policy)
	fmt.Println(policy.FieldRateLimit+":", f.RateLimit)
	// Output:
	// RateLimit-Policy: "site";q=3;w=60, "coupon";q=3;w=60
	// RateLimit: "site";r=2;t=60, "coupon";r=0;t=2
}

// A GCRA bucket and a calendar quota in the fields: q is the bucket's
// Burst and the quota's Rate, w the bucket's Window and the length of the
// quota's current period, here a Berlin day of 25 hours.
func ExampleWalk_kinds() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	clk := ratelimittest.NewClock(time.Date(2026, 10, 25, 9, 0, 0, 0, berlin)) // the day clocks go back
	env, err := ratelimittest.NewLimiter(ratelimit.Options{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	entries := []policy.Entry{
		{Rule: ratelimit.Rule{Name: "api", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: time.Second, Burst: 20}}, Key: "alice"},
		{Rule: ratelimit.Rule{Name: "daily", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 1000, Period: ratelimit.Day, Location: berlin}}, Key: "alice"},
	}
	out, err := policy.Walk(context.Background(), env.Limiter, entries, nil)
	if err != nil {
		panic(err)
	}
	f := policy.Format(out)
	fmt.Println(policy.FieldPolicy+":", f.Policy)
	fmt.Println(policy.FieldRateLimit+":", f.RateLimit)
	// Output:
	// RateLimit-Policy: "api";q=20;w=1, "daily";q=1000;w=90000
	// RateLimit: "api";r=19;t=1, "daily";r=999;t=54000
}

// A request that reserves an estimate of the tokens a language model will
// answer with, per user, and settles the real count once it is known: the
// tokens not used are free again for the next request.
func ExampleSettle() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()

	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	entries := []policy.Entry{{Rule: tokens, Key: "alice", Reserve: true, Cost: 400}}
	out, err := policy.Walk(ctx, env.Limiter, entries, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("RateLimit:", policy.Format(out).RateLimit)

	// The adapter hands the reservation to the handler in the request's
	// context; the handler settles it once the answer is written.
	req := policy.WithReservations(ctx, out)
	if err := policy.Settle(req, 120); err != nil {
		panic(err)
	}
	left, _ := env.Peek(ctx, tokens, "alice")
	fmt.Println("tokens left after settling at 120:", left.Remaining)
	fmt.Println(errors.Is(policy.Settle(req, 120), ratelimit.ErrSettled))
	// Output:
	// RateLimit: "tokens";r=600;t=60
	// tokens left after settling at 120: 880
	// true
}

package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"
	_ "time/tzdata" // Europe/Berlin wherever the examples run

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// A token bucket: bursts of up to Burst calls, then one call per Window/Rate
// (here 200ms).
func ExampleGCRA() {
	mr, client := exampleRedis()
	defer mr.Close()
	defer client.Close()
	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	limiter, err := ratelimit.New(client, ratelimit.Options{Clock: clock, Timeout: time.Second})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	api := ratelimit.Rule{Name: "api", Kind: ratelimit.GCRA,
		Limit: ratelimit.Limit{Rate: 5, Window: time.Second, Burst: 3}}
	fmt.Println(api.Limit)
	for i, wait := range []time.Duration{0, 0, 0, 0, 150 * time.Millisecond, 50 * time.Millisecond} {
		clock.Advance(wait)
		res, err := limiter.Allow(context.Background(), api, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("call %d: allowed=%v remaining=%d retry after %v, full after %v\n",
			i+1, res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter)
	}
	// Output:
	// 5 per 1s, burst 3
	// call 1: allowed=true remaining=2 retry after 0s, full after 200ms
	// call 2: allowed=true remaining=1 retry after 0s, full after 400ms
	// call 3: allowed=true remaining=0 retry after 0s, full after 600ms
	// call 4: allowed=false remaining=0 retry after 200ms, full after 600ms
	// call 5: allowed=false remaining=0 retry after 50ms, full after 450ms
	// call 6: allowed=true remaining=0 retry after 0s, full after 600ms
}

// A quota per calendar day in Berlin: the period ends at local midnight,
// and a day on which the clocks go back has 25 hours.
func ExampleCalendarQuota() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	clock := ratelimittest.NewClock(time.Date(2026, 10, 25, 22, 0, 0, 0, berlin))
	limiter, err := ratelimit.New(nil, ratelimit.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	plan := ratelimit.Rule{Name: "plan:free", Kind: ratelimit.CalendarQuota,
		Limit: ratelimit.Limit{Rate: 2, Period: ratelimit.Day, Location: berlin}}
	fmt.Println(plan.Limit)
	start, end := plan.Limit.PeriodAt(clock.Now())
	fmt.Println("today:", start.Format(time.DateTime), "to", end.Format(time.DateTime), end.Sub(start))
	for range 3 {
		res, err := limiter.Allow(context.Background(), plan, "team-7")
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry after %v\n", res.Allowed, res.Remaining, res.RetryAfter)
	}
	clock.Advance(2 * time.Hour) // past midnight: a new day
	res, _ := limiter.Allow(context.Background(), plan, "team-7")
	fmt.Printf("next day: allowed=%v remaining=%d\n", res.Allowed, res.Remaining)
	// Output:
	// 2 per day in Europe/Berlin
	// today: 2026-10-25 00:00:00 to 2026-10-26 00:00:00 25h0m0s
	// allowed=true remaining=1 retry after 0s
	// allowed=true remaining=0 retry after 0s
	// allowed=false remaining=0 retry after 2h0m0s
	// next day: allowed=true remaining=1
}

// Kind and Period print their names.
func ExampleKind() {
	fmt.Println(ratelimit.SlidingLog, ratelimit.GCRA, ratelimit.CalendarQuota)
	fmt.Println(ratelimit.Day, ratelimit.Week, ratelimit.Month)
	// Output:
	// sliding log gcra calendar quota
	// day week month
}

// At most two exports per user at once. A lease holds a slot until it is
// released, or until it expires: Window after it was taken or last renewed.
func ExampleConcurrency() {
	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	limiter, err := ratelimit.New(nil, ratelimit.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	ctx := context.Background()

	exports := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 2, Window: 30 * time.Second}}
	acquire := func() *ratelimit.Lease {
		lease, res, err := limiter.Acquire(ctx, exports, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("acquire: allowed=%v free=%d retry after %v\n", res.Allowed, res.Remaining, res.RetryAfter)
		return lease
	}
	first := acquire()
	clock.Advance(10 * time.Second)
	second := acquire()
	acquire() // both slots are held: the first expires in 20s

	if err := first.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("released twice:", first.Release(ctx)) // a second Release does nothing
	third := acquire()

	clock.Advance(30 * time.Second) // second and third were never renewed
	err = second.Renew(ctx)
	fmt.Println("renew after the TTL:", errors.Is(err, ratelimit.ErrLeaseLost))
	peek, _ := limiter.Peek(ctx, exports, "alice")
	fmt.Println("free slots:", peek.Remaining)
	_ = third
	// Output:
	// acquire: allowed=true free=1 retry after 0s
	// acquire: allowed=true free=0 retry after 0s
	// acquire: allowed=false free=0 retry after 20s
	// released twice: <nil>
	// acquire: allowed=true free=0 retry after 0s
	// renew after the TTL: true
	// free slots: 2
}

// Hold runs a function under a lease: it renews the lease while the
// function runs and gives the slot back when it returns, also on a panic.
// A request that finds no free slot does not run.
func ExampleLimiter_Hold() {
	limiter, err := ratelimit.New(nil, ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	ctx := context.Background()
	llm := ratelimit.Rule{Name: "llm", Kind: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 1, Window: 10 * time.Second}}

	res, err := limiter.Hold(ctx, llm, "alice", func(ctx context.Context) error {
		// While alice's generation runs, her next one must wait.
		inner, _ := limiter.Hold(ctx, llm, "alice", func(context.Context) error {
			fmt.Println("never runs")
			return nil
		})
		fmt.Println("second generation allowed:", inner.Allowed)
		fmt.Println("generating")
		return nil
	})
	fmt.Println("first generation allowed:", res.Allowed, "err:", err)
	lease, after, _ := limiter.Acquire(ctx, llm, "alice")
	fmt.Println("slot free again:", after.Allowed)
	lease.Release(ctx)
	// Output:
	// second generation allowed: false
	// generating
	// first generation allowed: true err: <nil>
	// slot free again: true
}

// AcquireWait waits for a slot until its context ends, woken by a release
// in this process (a release elsewhere is seen by a retry at most an
// eighth of the Window later) instead of asking Redis in a busy loop.
func ExampleLimiter_AcquireWait() {
	limiter, err := ratelimit.New(nil, ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	ctx := context.Background()
	partner := ratelimit.Rule{Name: "partner-api", Kind: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 1, Window: time.Minute}}

	held, _, _ := limiter.Acquire(ctx, partner, "acme")
	done := make(chan struct{})
	go func() {
		defer close(done)
		lease, res, err := limiter.AcquireWait(ctx, partner, "acme")
		fmt.Println("waiter got the slot:", res.Allowed, err)
		lease.Release(ctx)
	}()
	// Whenever the waiter asks, it cannot have the slot before this release.
	fmt.Println("releasing")
	held.Release(ctx)
	<-done

	// A wait ends with the caller's context, and an error that says why.
	held, _, _ = limiter.Acquire(ctx, partner, "acme")
	defer held.Release(ctx)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, _, err = limiter.AcquireWait(short, partner, "acme")
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// releasing
	// waiter got the slot: true <nil>
	// true
}

// A fixed window: Rate calls per Window-long window aligned to the Unix
// epoch (here each whole minute). A spent window comes back whole when the
// next one starts, so up to 2 × Rate calls pass around a boundary.
func ExampleFixedWindow() {
	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 50, 0, time.UTC))
	limiter, err := ratelimit.New(nil, ratelimit.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	api := ratelimit.Rule{Name: "api", Kind: ratelimit.FixedWindow, Limit: ratelimit.PerMinute(3)}
	for i, wait := range []time.Duration{0, 0, 0, 0, 10 * time.Second, 0, 0, 0} {
		clock.Advance(wait)
		res, err := limiter.Allow(context.Background(), api, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s call %d: allowed=%v remaining=%d retry after %v\n",
			clock.Now().Format("15:04:05"), i+1, res.Allowed, res.Remaining, res.RetryAfter)
	}
	// Output:
	// 12:00:50 call 1: allowed=true remaining=2 retry after 0s
	// 12:00:50 call 2: allowed=true remaining=1 retry after 0s
	// 12:00:50 call 3: allowed=true remaining=0 retry after 0s
	// 12:00:50 call 4: allowed=false remaining=0 retry after 10s
	// 12:01:00 call 5: allowed=true remaining=2 retry after 0s
	// 12:01:00 call 6: allowed=true remaining=1 retry after 0s
	// 12:01:00 call 7: allowed=true remaining=0 retry after 0s
	// 12:01:00 call 8: allowed=false remaining=0 retry after 1m0s
}

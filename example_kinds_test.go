package ratelimit_test

import (
	"context"
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

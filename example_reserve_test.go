package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// Tokens of a language model's answers, known only once each answer is
// written: reserve the most a call may use, settle what it used. What was
// not used is free again at once; an answer longer than reserved puts the
// key in debt until the extra leaves the window.
func ExampleLimiter_Reserve() {
	mr, client := exampleRedis()
	defer mr.Close()
	defer client.Close()
	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	limiter, err := ratelimit.New(client, ratelimit.Options{Clock: clock, Timeout: time.Second})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	ctx := context.Background()
	tokens := ratelimit.Rule{Name: "llm:tokens", Limit: ratelimit.Limit{Rate: 1000, Window: time.Minute}}

	show := func(what string) {
		res, err := limiter.Peek(ctx, tokens, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-28s %4d tokens left\n", what, res.Remaining)
	}
	r, _, err := limiter.Reserve(ctx, tokens, "alice", 600)
	if err != nil {
		panic(err)
	}
	show("reserved 600:")
	if _, res, _ := limiter.Reserve(ctx, tokens, "alice", 600); !res.Allowed {
		fmt.Println("another 600: rejected")
	}
	clock.Advance(2 * time.Second)
	if err := r.Settle(ctx, 250); err != nil { // the answer took 250
		panic(err)
	}
	show("settled at 250:")
	fmt.Println("settle again:", errors.Is(r.Settle(ctx, 250), ratelimit.ErrSettled))

	r, _, _ = limiter.Reserve(ctx, tokens, "alice", 700)
	clock.Advance(time.Second)
	r.Settle(ctx, 900) // 200 more than reserved: past the limit
	res, _ := limiter.Allow(ctx, tokens, "alice")
	fmt.Printf("in debt: allowed=%v, retry after %v\n", res.Allowed, res.RetryAfter)
	// Output:
	// reserved 600:                 400 tokens left
	// another 600: rejected
	// settled at 250:               750 tokens left
	// settle again: true
	// in debt: allowed=false, retry after 57s
}

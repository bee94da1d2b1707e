package ratelimit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
)

// exampleRedis starts an in-process Redis for the examples; a real program
// connects to its own Redis instead.
func exampleRedis() (*miniredis.Miniredis, rueidis.Client) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	return mr, client
}

func Example() {
	mr, client := exampleRedis()
	defer mr.Close()
	defer client.Close()

	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	limiter, err := ratelimit.New(client, ratelimit.Options{
		Clock:   clock,
		Timeout: time.Second, // a busy test machine; the default is 100ms
	})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	claim := ratelimit.Rule{Name: "coupon:claim", Limit: ratelimit.PerMinute(3)}
	for i := 1; i <= 4; i++ {
		res, err := limiter.Allow(context.Background(), claim, "user-42")
		if err != nil {
			panic(err)
		}
		fmt.Printf("call %d: allowed=%v remaining=%d retry after %v\n", i, res.Allowed, res.Remaining, res.RetryAfter)
		clock.Advance(10 * time.Second)
	}
	// Output:
	// call 1: allowed=true remaining=2 retry after 0s
	// call 2: allowed=true remaining=1 retry after 0s
	// call 3: allowed=true remaining=0 retry after 0s
	// call 4: allowed=false remaining=0 retry after 30s
}

func ExamplePenalty() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	limiter, clock := env.Limiter, env.Clock

	rule := ratelimit.Rule{
		Name:    "login",
		Limit:   ratelimit.PerMinute(5),
		Penalty: &ratelimit.Penalty{WarnAfter: 3, BanAfter: 5, BanFor: 30 * time.Minute},
	}
	for i := 1; i <= 11; i++ {
		res, _ := limiter.Allow(context.Background(), rule, "203.0.113.7")
		fmt.Printf("call %2d: allowed=%-5v violations=%d warned=%-5v banned=%-5v retry after %v\n",
			i, res.Allowed, res.Violations, res.Warned, res.Banned, res.RetryAfter)
		clock.Advance(time.Second)
	}
	// Output:
	// call  1: allowed=true  violations=0 warned=false banned=false retry after 0s
	// call  2: allowed=true  violations=0 warned=false banned=false retry after 0s
	// call  3: allowed=true  violations=0 warned=false banned=false retry after 0s
	// call  4: allowed=true  violations=0 warned=false banned=false retry after 0s
	// call  5: allowed=true  violations=0 warned=false banned=false retry after 0s
	// call  6: allowed=false violations=1 warned=false banned=false retry after 55s
	// call  7: allowed=false violations=2 warned=false banned=false retry after 54s
	// call  8: allowed=false violations=3 warned=true  banned=false retry after 53s
	// call  9: allowed=false violations=4 warned=true  banned=false retry after 52s
	// call 10: allowed=false violations=5 warned=false banned=true  retry after 30m0s
	// call 11: allowed=false violations=5 warned=false banned=true  retry after 29m59s
}

// When Redis cannot be used, decisions continue from the local fallback,
// which remembers what Redis allowed, and are marked Degraded.
func Example_fallback() {
	mr, client := exampleRedis()
	defer client.Close()

	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	limiter, err := ratelimit.New(client, ratelimit.Options{
		Clock:      clock,
		Timeout:    time.Second,
		TripAfter:  1,
		ProbeAfter: 10 * time.Millisecond,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	rule := ratelimit.Rule{Name: "search", Limit: ratelimit.PerMinute(3)}
	show := func(what string) ratelimit.Result {
		res, err := limiter.Allow(context.Background(), rule, "user-7")
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-14s allowed=%-5v remaining=%d degraded=%v\n", what, res.Allowed, res.Remaining, res.Degraded)
		return res
	}
	show("redis up:")
	mr.Close()
	show("redis down:")
	show("redis down:")
	show("redis down:")
	if err := mr.Restart(); err != nil {
		panic(err)
	}
	defer mr.Close()
	clock.Advance(time.Minute)
	for {
		if res, _ := limiter.Peek(context.Background(), rule, "user-7"); !res.Degraded {
			break
		}
		time.Sleep(5 * time.Millisecond) // the breaker probes Redis again
	}
	show("redis back:")
	// Output:
	// redis up:      allowed=true  remaining=2 degraded=false
	// redis down:    allowed=true  remaining=1 degraded=true
	// redis down:    allowed=true  remaining=0 degraded=true
	// redis down:    allowed=false remaining=0 degraded=true
	// redis back:    allowed=true  remaining=2 degraded=false
}

func ExampleLimiter_Ban() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	limiter, clock := env.Limiter, env.Clock
	login := ratelimit.Rule{Name: "login", Limit: ratelimit.PerMinute(5),
		Penalty: &ratelimit.Penalty{BanAfter: 5, BanFor: 30 * time.Minute}}

	ctx := context.Background()
	if err := limiter.Ban(ctx, login, "203.0.113.7", time.Hour); err != nil {
		panic(err)
	}
	res, _ := limiter.Peek(ctx, login, "203.0.113.7")
	fmt.Println("banned:", res.Banned, "for", res.BannedFor)
	clock.Advance(time.Hour)
	res, _ = limiter.Allow(ctx, login, "203.0.113.7")
	fmt.Println("an hour later allowed:", res.Allowed)
	// Output:
	// banned: true for 1h0m0s
	// an hour later allowed: true
}

func ExampleLimiter_AllowAll() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	limiter := env.Limiter
	global := ratelimit.Rule{Name: "search", Limit: ratelimit.PerSecond(100)}
	perUser := ratelimit.Rule{Name: "search:user", Limit: ratelimit.PerSecond(2)}

	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		results, err := limiter.AllowAll(ctx, []ratelimit.Check{
			{Rule: perUser, Key: "user-7"}, // the likeliest to deny goes first
			{Rule: global, Key: "all"},
		})
		if err != nil {
			panic(err)
		}
		last := results[len(results)-1]
		fmt.Printf("request %d: allowed=%v (asked %d rules)\n", i, last.Allowed, len(results))
	}
	res, _ := limiter.Peek(ctx, global, "all")
	fmt.Println("global events:", 100-res.Remaining)
	// Output:
	// request 1: allowed=true (asked 2 rules)
	// request 2: allowed=true (asked 2 rules)
	// request 3: allowed=false (asked 1 rules)
	// global events: 2
}

func ExampleRule_dryRun() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	limiter := env.Limiter
	candidate := ratelimit.Rule{Name: "export", Limit: ratelimit.PerHour(1), DryRun: true}

	for i := 1; i <= 2; i++ {
		res, _ := limiter.Allow(context.Background(), candidate, "tenant-3")
		fmt.Printf("export %d: allowed=%v, enforcing would reject: %v\n", i, res.Allowed, res.DryRun)
	}
	// Output:
	// export 1: allowed=true, enforcing would reject: false
	// export 2: allowed=true, enforcing would reject: true
}

// What a process decides while Redis cannot be used is written back to
// Redis once it can be used again: here 3 claims on Redis and 2 while Redis
// refused every command. Afterwards Redis counts all 5, and another process
// is refused for the rest of the minute too.
func ExampleOptions_writeBack() {
	mr, client := exampleRedis()
	defer mr.Close()
	defer client.Close()

	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	opts := ratelimit.Options{
		Clock:        clock,
		Timeout:      time.Second,
		TripAfter:    1,
		ProbeAfter:   10 * time.Millisecond,
		WriteBackMax: 10_000, // the default is 100,000 events
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	limiter, err := ratelimit.New(client, opts)
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	claim := ratelimit.Rule{Name: "coupon:claim", Limit: ratelimit.PerMinute(5)}
	ctx := context.Background()
	for range 3 {
		limiter.Allow(ctx, claim, "bob")
	}
	mr.SetError("NOPERM this user has no permissions") // Redis refuses everything
	for range 2 {
		res, _ := limiter.Allow(ctx, claim, "bob")
		fmt.Printf("without redis: allowed=%v degraded=%v\n", res.Allowed, res.Degraded)
	}
	fmt.Println("pending:", limiter.Stats().WriteBackPending)
	mr.SetError("") // Redis is back
	for limiter.Stats().WriteBackPending > 0 {
		time.Sleep(5 * time.Millisecond) // the breaker probes, closes, and the write-back runs
	}
	s := limiter.Stats()
	fmt.Printf("written back: %d, dropped: %d\n", s.WrittenBack, s.WriteBackDropped)

	other, err := ratelimit.New(client, opts) // another process
	if err != nil {
		panic(err)
	}
	defer other.Close()
	res, _ := other.Allow(ctx, claim, "bob")
	fmt.Printf("another process: allowed=%v remaining=%d degraded=%v\n", res.Allowed, res.Remaining, res.Degraded)
	// Output:
	// without redis: allowed=true degraded=true
	// without redis: allowed=true degraded=true
	// pending: 2
	// written back: 2, dropped: 0
	// another process: allowed=false remaining=0 degraded=false
}

// Two instances of a service share a Redis. While it is healthy each
// announces itself and counts the live instances; when it goes away, each
// enforces its share of a rule, ceil(Rate / instances), so that the two
// together admit about the rule's rate.
func ExampleOptions_heartbeat() {
	mr, first := exampleRedis()
	second, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer first.Close()
	defer second.Close()
	// Redis' clock stands still here, so that no announcement runs out
	// while the example waits on a busy machine.
	mr.SetTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))

	opts := ratelimit.Options{
		Clock:             ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)),
		Timeout:           time.Second,           // a busy test machine; the default is 100ms
		KeyPrefix:         "shop:",               // one KeyPrefix per service: one fleet
		HeartbeatInterval: 10 * time.Millisecond, // the default is 5s
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	a, err := ratelimit.New(first, opts)
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := ratelimit.New(second, opts)
	if err != nil {
		panic(err)
	}
	defer b.Close()
	for a.Stats().Instances < 2 || b.Stats().Instances < 2 {
		time.Sleep(time.Millisecond) // each counts both at its next heartbeat
	}
	fmt.Println("instances:", a.Stats().Instances, b.Stats().Instances)

	mr.Close() // Redis goes away; the last count stays
	sale := ratelimit.Rule{Name: "flash-sale", Limit: ratelimit.PerMinute(5)}
	for i := 1; i <= 4; i++ {
		res, _ := a.Allow(context.Background(), sale, "all")
		fmt.Printf("call %d: allowed=%-5v limit=%d degraded=%v\n", i, res.Allowed, res.Limit, res.Degraded)
	}
	// Output:
	// instances: 2 2
	// call 1: allowed=true  limit=3 degraded=true
	// call 2: allowed=true  limit=3 degraded=true
	// call 3: allowed=true  limit=3 degraded=true
	// call 4: allowed=false limit=3 degraded=true
}

package ratelimittest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

func ExampleNewLimiter() {
	lim, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	rule := ratelimit.Rule{Name: "search", Limit: ratelimit.PerMinute(1)}
	first, _ := lim.Allow(context.Background(), rule, "user-7")
	second, _ := lim.Allow(context.Background(), rule, "user-7")
	lim.Clock.Advance(time.Minute)
	third, _ := lim.Allow(context.Background(), rule, "user-7")
	fmt.Println(first.Allowed, second.Allowed, second.RetryAfter, third.Allowed)
	// Output: true false 1m0s true
}

func TestNewLimiterDecidesOnItsRedis(t *testing.T) {
	lim, err := ratelimittest.NewLimiter(ratelimit.Options{TripAfter: 1, ProbeAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(5)}
	if r, err := lim.Allow(context.Background(), rule, "k"); err != nil || r.Degraded || !lim.Redis.Exists("rl:v1:{1:r:=k}:l") {
		t.Fatalf("Allow = %+v, %v; want decided on the in-process Redis", r, err)
	}
	lim.Redis.Close()
	if r, err := lim.Allow(context.Background(), rule, "k"); err != nil || !r.Degraded {
		t.Fatalf("with its Redis closed: %+v, %v; want a degraded decision", r, err)
	}
	if start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC); !lim.Clock.Now().Equal(start) {
		t.Fatalf("the clock reads %v, want %v", lim.Clock.Now(), start)
	}
}

func TestNewLimiterRejectsInvalidOptions(t *testing.T) {
	if _, err := ratelimittest.NewLimiter(ratelimit.Options{KeyPrefix: "{x}"}); !errors.Is(err, ratelimit.ErrInvalidOptions) {
		t.Fatalf("NewLimiter with a braced prefix: %v", err)
	}
}

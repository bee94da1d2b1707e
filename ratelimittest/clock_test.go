package ratelimittest_test

import (
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

func ExampleClock() {
	clk := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	clk.Advance(90 * time.Second)
	fmt.Println(clk.Now().Format(time.TimeOnly))
	clk.Set(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	fmt.Println(clk.Now().Format(time.TimeOnly))
	// Output:
	// 00:01:30
	// 12:00:00
}

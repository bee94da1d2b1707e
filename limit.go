package ratelimit

import (
	"fmt"
	"time"
)

// Limit is a rate: at most Rate events in any Window-long interval. An event
// recorded at t0 counts at time t while t - t0 < Window, so the window slides
// with every call; it never resets at fixed boundaries.
//
// Windows are kept in whole microseconds: a Window that is not a multiple of
// a microsecond is truncated.
type Limit struct {
	// Rate is how many events any Window-long interval may hold (>= 1).
	Rate int
	// Window is the length of the sliding window (>= 1µs).
	Window time.Duration
}

// PerSecond returns a Limit of rate events in any one-second interval.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Window: time.Second} }

// PerMinute returns a Limit of rate events in any one-minute interval.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Window: time.Minute} }

// PerHour returns a Limit of rate events in any one-hour interval.
func PerHour(rate int) Limit { return Limit{Rate: rate, Window: time.Hour} }

// String returns the limit as "5 per 1m0s".
func (l Limit) String() string { return fmt.Sprintf("%d per %v", l.Rate, l.Window) }

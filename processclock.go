package ratelimit

import "time"

// processClock is the local path's time when Options.Clock is nil: the wall
// clock's reading when the Limiter was made, moved on by the monotonic
// clock. It reads one clock where time.Now reads two (about 28ns against
// 49ns here, on every local decision), and a step of the wall clock (NTP,
// an operator) does not move the windows of the local logs.
type processClock struct {
	start  time.Time // carries a monotonic reading
	wallUs int64     // start, µs since the epoch
}

func newProcessClock() processClock {
	t := time.Now()
	return processClock{start: t, wallUs: t.UnixMicro()}
}

// now returns the current time in µs since the epoch.
func (c *processClock) now() int64 {
	return c.wallUs + int64(time.Since(c.start)/time.Microsecond)
}

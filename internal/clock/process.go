package clock

import "time"

// Process is the limiter's time when Options.Clock is nil: the wall
// clock's reading when it was made, moved on by the monotonic clock. It
// reads one clock where time.Now reads two (about 28ns against 49ns here,
// on every local decision), and a step of the wall clock (NTP, an
// operator) does not move the windows of the local logs.
type Process struct {
	start  time.Time // carries a monotonic reading
	wallUs int64     // start, µs since the epoch
}

// NewProcess returns a Process that starts at the wall clock's time.
func NewProcess() Process {
	t := time.Now()
	return Process{start: t, wallUs: t.UnixMicro()}
}

// Now returns the current time in µs since the epoch.
func (c *Process) Now() int64 {
	return c.wallUs + int64(time.Since(c.start)/time.Microsecond)
}

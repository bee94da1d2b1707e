package testkit

import (
	"sync/atomic"
	"time"
)

// WatchScheduling measures how late the process runs a goroutine that is
// due, until stop: a sleeper among the test's goroutines sleeps 1ms at a
// time and keeps the most it woke up past its time. The returned func
// waits for stop and returns that lateness. A call's latency holds such
// delays too (its waits end on timers, its reply wakes it), which are the
// machine's and the scheduler's, not the library's: a bound on a call's
// time under a crowd of goroutines adds them (docs/admission.md, "How long
// a call can take": "plus the time the process needs to schedule it").
func WatchScheduling(stop time.Time) func() time.Duration {
	var late atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			before := time.Now()
			if !before.Before(stop) {
				return
			}
			time.Sleep(time.Millisecond)
			if l := int64(time.Since(before) - time.Millisecond); l > late.Load() {
				late.Store(l)
			}
		}
	}()
	return func() time.Duration {
		<-done
		return time.Duration(late.Load())
	}
}

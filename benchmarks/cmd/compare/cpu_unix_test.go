//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used so far, user and
// system, over all its threads, and how many times so far one of its
// threads was preempted (involuntary context switches: the kernel gave
// the core to another thread or process while it could run).
func processCPU() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), int64(ru.Nivcsw)
}

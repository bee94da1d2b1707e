package ratelimit

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// logKind names a kind of log line that is throttled on its own.
type logKind int

const (
	logOutage logKind = iota
	logAuth
	logMisuse
	logConnect
	logOpen
	logHalfOpen
	logClosed
	logWriteBack
	logHeartbeat
	logWatch
	logKinds
)

// throttledLog writes each kind of line at most once per interval.
type throttledLog struct {
	logger   *slog.Logger
	interval int64 // ns
	last     [logKinds]atomic.Int64
}

func newThrottledLog(logger *slog.Logger, interval time.Duration) *throttledLog {
	return &throttledLog{logger: logger, interval: int64(interval)}
}

// log writes the line unless a line of its kind was written less than the
// interval ago, and reports whether it wrote it.
func (t *throttledLog) log(kind logKind, level slog.Level, msg string, args ...any) bool {
	now := time.Now().UnixNano()
	last := t.last[kind].Load()
	if last != 0 && now-last < t.interval {
		return false
	}
	if !t.last[kind].CompareAndSwap(last, now) {
		return false
	}
	t.logger.Log(context.Background(), level, msg, args...)
	return true
}

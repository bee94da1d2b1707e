// Package logthrottle writes log lines at most once per interval for each
// kind of line, so that a failure met by every call (an outage, a refused
// command) logs a line now and then instead of one per call, while a line
// of another kind is not held back by it.
package logthrottle

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Log writes lines to a slog.Logger, each kind K (0 up to the count given
// to New) at most once per interval. It is safe for concurrent use: of
// the calls that meet when a kind's interval has passed, one writes.
type Log[K ~int] struct {
	logger   *slog.Logger
	interval int64          // ns
	last     []atomic.Int64 // by kind: when its last line was written, in ns of the wall clock; 0 never
}

// New returns a Log to logger of kinds kinds of lines (K from 0 to
// kinds-1), each written at most once per interval.
func New[K ~int](logger *slog.Logger, interval time.Duration, kinds K) *Log[K] {
	return &Log[K]{logger: logger, interval: int64(interval), last: make([]atomic.Int64, kinds)}
}

// Log writes the line unless a line of its kind was written less than the
// interval ago, and reports whether it wrote it.
func (t *Log[K]) Log(kind K, level slog.Level, msg string, args ...any) bool {
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

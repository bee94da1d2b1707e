package ratelimit

import (
	"cmp"
	"fmt"
	"time"
)

// MaxRuleNameLength is the longest Rule.Name accepted, in bytes.
const MaxRuleNameLength = 256

// maxMicros bounds every duration a rule holds (about 35 years), so that
// sums of times stay exact as float64 inside Lua.
const maxMicros = 1 << 50

// maxRate bounds Limit.Rate: the exact log keeps one entry per event.
const maxRate = 1<<31 - 1

// Rule names one limit and, optionally, the penalty for breaking it. State is
// kept per (Name, key): changing a rule's Limit or Penalty under the same Name
// applies at once to the existing log.
type Rule struct {
	// Name is the rule's namespace, e.g. "coupon:claim": non-empty, at most
	// MaxRuleNameLength bytes, any bytes allowed.
	Name string
	// Limit is the rate the rule enforces.
	Limit Limit
	// Penalty, when not nil, escalates repeat offenders from rejections to
	// warnings to bans.
	Penalty *Penalty
	// Degraded says how this rule is decided while Redis is unavailable.
	// The zero value uses Options.Degraded.
	Degraded DegradedPolicy
	// Approximate trades the exact log for a sliding-window counter: two
	// fixed windows, the previous one weighted by how much of it the
	// sliding window still covers. It keeps O(1) memory per key instead of
	// one entry per event, for rules with a large Rate, under the same
	// penalties, fallback and shield. Its error: it assumes the previous
	// window's events were spread evenly, so it may reject a call that the
	// exact log would allow, and it may allow up to 2 × Rate - 1 events in
	// one Window-long interval when the previous window's events all came at
	// its end (the exact log: Rate). An approximate rule keeps its state
	// apart from an exact rule of the same name.
	Approximate bool
	// Kind is the algorithm the rule enforces: SlidingLog (the zero value),
	// GCRA or CalendarQuota. Each kind keeps its state apart from the
	// others' under the same name. Approximate applies to SlidingLog only.
	Kind Kind
	// DryRun lets every call through while deciding, recording and
	// reporting as usual: a call the rule would reject is allowed, with
	// Result.DryRun set and the other fields saying what enforcing would
	// have answered. Turn a new rule on in dry run, watch, then enforce.
	DryRun bool
}

// Validate reports whether the Limiter can enforce r: nil, or an error
// wrapping ErrInvalidRule that says what is wrong. Every call validates its
// rule anyway; Validate lets a program find a bad rule when it starts.
func (r Rule) Validate() error {
	_, err := r.compile()
	return err
}

// plan is a validated Rule in the units both paths work in.
type plan struct {
	rate     int64 // the capacity decide compares count + n with: Rate, or GCRA's Burst
	window   int64 // µs: Window (0 for a CalendarQuota)
	penalty  penaltyPlan
	penalize bool
	approx   bool // Rule.Approximate
	kind     Kind

	// GCRA: Rate, and Window/Rate normalised (see bucket).
	emit, wq, rq int64
	// CalendarQuota: the period, its location, and the bounds of the
	// period that holds the call's time (µs), set by setPeriod.
	period     Period
	loc        *time.Location
	start, end int64
}

// maxBucket bounds GCRA's Burst × Window/gcd: the ticks a full bucket
// holds, with room for a clock gone backwards, stay exact as float64.
const maxBucket = 1 << 52

// logged reports whether the plan keeps an exact sliding log.
func (p *plan) logged() bool { return p.kind == SlidingLog && !p.approx }

// setGCRA sets the bucket's numbers for rate tokens per window and a
// bucket of burst.
func (p *plan) setGCRA(rate, burst int64) {
	g := gcd(p.window, rate)
	p.emit, p.rate, p.wq, p.rq = rate, burst, p.window/g, rate/g
}

// exact reports whether a GCRA plan's full bucket stays exact as float64
// ticks in Lua (see maxBucket) and within maxMicros.
func (p *plan) exact() bool { return p.wq <= maxBucket/p.rate && p.rate*p.wq/p.rq <= maxMicros }

// setPeriod sets the bounds of the quota's period that holds now.
func (p *plan) setPeriod(now int64) {
	if p.kind == CalendarQuota {
		p.start, p.end = periodBounds(p.period, p.loc, now)
	}
}

// compile checks r and converts it into a plan; it does not allocate unless
// r is invalid.
func (r *Rule) compile() (plan, error) {
	if r.Penalty == nil && r.Name != "" && len(r.Name) <= MaxRuleNameLength &&
		r.Limit.Rate >= 1 && r.Limit.Rate <= maxRate &&
		r.Limit.Window >= time.Microsecond && r.Limit.Window < (maxMicros+1)*time.Microsecond &&
		uint(r.Degraded) <= uint(DegradedDeny) && r.Limit.Period == 0 && r.Limit.Location == nil &&
		(r.Kind == SlidingLog && r.Limit.Burst == 0 || r.Kind == GCRA && !r.Approximate && uint(r.Limit.Burst) <= maxRate) {
		// The common cases, checked in one pass: the same checks as below.
		p := plan{rate: int64(r.Limit.Rate), window: r.Limit.Window.Microseconds(), approx: r.Approximate, kind: r.Kind}
		if r.Kind == SlidingLog {
			return p, nil
		}
		if p.setGCRA(p.rate, int64(cmp.Or(r.Limit.Burst, r.Limit.Rate))); p.exact() {
			return p, nil
		}
	}
	switch {
	case r.Name == "":
		return plan{}, fmt.Errorf("%w: empty name", ErrInvalidRule)
	case len(r.Name) > MaxRuleNameLength:
		return plan{}, fmt.Errorf("%w: name is %d bytes, longer than %d", ErrInvalidRule, len(r.Name), MaxRuleNameLength)
	case r.Limit.Rate < 1:
		return plan{}, fmt.Errorf("%w: rule %q: Rate %d is below 1", ErrInvalidRule, r.Name, r.Limit.Rate)
	case r.Limit.Rate > maxRate:
		return plan{}, fmt.Errorf("%w: rule %q: Rate %d is above %d", ErrInvalidRule, r.Name, r.Limit.Rate, maxRate)
	case r.Kind != CalendarQuota && r.Limit.Window < time.Microsecond:
		return plan{}, fmt.Errorf("%w: rule %q: Window %v is shorter than 1µs", ErrInvalidRule, r.Name, r.Limit.Window)
	case r.Limit.Window.Microseconds() > maxMicros:
		return plan{}, fmt.Errorf("%w: rule %q: Window %v is too long", ErrInvalidRule, r.Name, r.Limit.Window)
	case r.Degraded < DegradedDefault || r.Degraded > DegradedDeny:
		return plan{}, fmt.Errorf("%w: rule %q: unknown Degraded policy %d", ErrInvalidRule, r.Name, r.Degraded)
	}
	if err := r.checkKind(); err != nil {
		return plan{}, err
	}
	p := plan{rate: int64(r.Limit.Rate), window: r.Limit.Window.Microseconds(), approx: r.Approximate, kind: r.Kind}
	switch r.Kind {
	case GCRA:
		burst := int64(r.Limit.Burst)
		if burst == 0 {
			burst = p.rate
		}
		p.setGCRA(p.rate, burst)
		if !p.exact() {
			return plan{}, fmt.Errorf("%w: rule %q: a bucket of Burst %d at %d per %v is too large to keep exactly; lower Burst, or pick a Window and a Rate with a larger common divisor",
				ErrInvalidRule, r.Name, burst, r.Limit.Rate, r.Limit.Window)
		}
	case CalendarQuota:
		p.period, p.loc = r.Limit.Period, r.Limit.Location
		if p.loc == nil {
			p.loc = time.UTC
		}
	}
	if r.Penalty != nil {
		pp, err := r.Penalty.compile()
		if err != nil {
			return plan{}, fmt.Errorf("%w: rule %q: %s", ErrInvalidRule, r.Name, err)
		}
		p.penalty, p.penalize = pp, true
	}
	return p, nil
}

// checkKind checks the fields that depend on the rule's Kind: each field
// once, against the kind it belongs to.
func (r *Rule) checkKind() error {
	l := &r.Limit
	quota := r.Kind == CalendarQuota
	var bad string
	switch {
	case r.Kind < SlidingLog || r.Kind > CalendarQuota:
		bad = fmt.Sprintf("unknown Kind %d", int(r.Kind))
	case r.Approximate && r.Kind != SlidingLog:
		bad = fmt.Sprintf("Approximate is for the sliding log only, not for %v", r.Kind)
	case l.Burst != 0 && r.Kind != GCRA:
		bad = fmt.Sprintf("Burst %d is for GCRA only", l.Burst)
	case l.Burst < 0:
		bad = fmt.Sprintf("Burst %d is negative", l.Burst)
	case l.Burst > maxRate:
		bad = fmt.Sprintf("Burst %d is above %d", l.Burst, maxRate)
	case !quota && l.Period != 0:
		bad = fmt.Sprintf("Period %v is for CalendarQuota only", l.Period)
	case !quota && l.Location != nil:
		bad = "Location is for CalendarQuota only"
	case quota && (l.Period < Day || l.Period > Month):
		bad = fmt.Sprintf("unknown Period %d (Day, Week or Month)", int(l.Period))
	case quota && l.Window != 0:
		bad = fmt.Sprintf("Window %v must be 0 for a calendar quota (its Period is the window)", l.Window)
	}
	if bad != "" {
		return fmt.Errorf("%w: rule %q: %s", ErrInvalidRule, r.Name, bad)
	}
	return nil
}

// DegradedPolicy says how a rule is decided while Redis cannot be used.
type DegradedPolicy int

const (
	// DegradedDefault, in a Rule, defers to Options.Degraded; in Options it
	// means DegradedLocal.
	DegradedDefault DegradedPolicy = iota
	// DegradedLocal decides with the in-process sliding log, under the same
	// rule and penalty, at the degraded share of the rate.
	DegradedLocal
	// DegradedAllow lets every call through and records nothing (fail open,
	// on purpose).
	DegradedAllow
	// DegradedDeny rejects every call until Redis is back (fail closed).
	DegradedDeny
)

// String returns the policy's name.
func (p DegradedPolicy) String() string {
	switch p {
	case DegradedDefault:
		return "default"
	case DegradedLocal:
		return "local"
	case DegradedAllow:
		return "allow"
	case DegradedDeny:
		return "deny"
	}
	return fmt.Sprintf("DegradedPolicy(%d)", int(p))
}

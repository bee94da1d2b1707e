package ratelimit

import (
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/ladder"
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
	// Kind is the algorithm the rule enforces: SlidingLog (the zero value)
	// or another of Kind's constants (docs/semantics.md compares them).
	// Each kind keeps its state apart from the others' under the same
	// name. Approximate applies to SlidingLog only.
	Kind Kind
	// DryRun lets every call through while deciding, recording and
	// reporting as usual: a call the rule would reject is allowed, with
	// Result.DryRun set and the other fields saying what enforcing would
	// have answered. Turn a new rule on in dry run, watch, then enforce.
	DryRun bool
	// Prefetch, when positive, lets a process decide a hot key's calls
	// in-process from slots it took from Redis ahead of them, enough for
	// at most Prefetch of its recent rate of allowed calls, each slot
	// usable until Prefetch after the process asked for it, never over the
	// limit (see docs/prefetch.md). Zero: every call is decided on Redis.
	// At most min(Window / 10, 500ms) (500ms for a CalendarQuota); every
	// kind but Concurrency takes it.
	Prefetch time.Duration
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
	// meterFit holds the rate, the window, GCRA's wq and rq and the
	// quota's period: what a kind's local meter is fitted to, passed to
	// it as one value read straight from the plan (see localKind.meter).
	meterFit
	penalty  ladder.Plan
	penalize bool
	alg      *algorithm // the kind's (see kind.go)
	ruleHash uint64     // the hash of the rule's name in its pairs' hashes (see localStore.atPlan)

	// GCRA: Rate (see setGCRA).
	emit int64
	// prefetch is Rule.Prefetch in µs (see prefetch.go).
	prefetch int64
	// CalendarQuota: the period and its location.
	period Period
	loc    *time.Location
}

// compile checks r and converts it into a plan; it does not allocate unless
// r is invalid.
func (r *Rule) compile() (plan, error) {
	switch {
	case r.Name == "":
		return plan{}, fmt.Errorf("%w: empty name", ErrInvalidRule)
	case len(r.Name) > MaxRuleNameLength:
		return plan{}, fmt.Errorf("%w: name is %d bytes, longer than %d", ErrInvalidRule, len(r.Name), MaxRuleNameLength)
	case r.Limit.Rate < 1:
		return plan{}, fmt.Errorf("%w: rule %q: Rate %d is below 1", ErrInvalidRule, r.Name, r.Limit.Rate)
	case r.Limit.Rate > maxRate:
		return plan{}, fmt.Errorf("%w: rule %q: Rate %d is above %d", ErrInvalidRule, r.Name, r.Limit.Rate, maxRate)
	case r.Degraded < DegradedDefault || r.Degraded > DegradedDeny:
		return plan{}, fmt.Errorf("%w: rule %q: unknown Degraded policy %d", ErrInvalidRule, r.Name, r.Degraded)
	}
	alg, bad := algorithmOf(r)
	p := plan{meterFit: meterFit{rate: int64(r.Limit.Rate), window: r.Limit.Window.Microseconds()}, alg: alg, ruleHash: ruleHash(r.Name)}
	if bad == "" {
		p, bad = alg.rules.compile(*r, p)
	}
	if bad != "" {
		return plan{}, fmt.Errorf("%w: rule %q: %s", ErrInvalidRule, r.Name, bad)
	}
	if bad := p.setPrefetch(r); bad != "" {
		return plan{}, fmt.Errorf("%w: rule %q: %s", ErrInvalidRule, r.Name, bad)
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

package ratelimit

import "sync/atomic"

// compiled is a Rule compiled once: the rule as it was, the contents of its
// Penalty when it had one, and its plan. It is never changed once published.
type compiled struct {
	rule    Rule
	penalty Penalty
	plan    plan
}

// matches reports whether c was compiled from a rule equal to r, field by
// field, the contents of *r.Penalty included: a rule changed in any way, or
// a Penalty changed in place, misses and is compiled again.
//
// It compares the fields one by one, the cheap ones first and the name
// last, rather than with c.rule == *r, which compares most of the rule as
// one block of memory (a call to memequal of about 60 bytes, a tenth of a
// local decision's instructions). TestMatchesComparesEveryField fails when
// Rule or Limit gains a field this does not compare.
func (c *compiled) matches(r *Rule) bool {
	a, al, rl := &c.rule, &c.rule.Limit, &r.Limit
	return al.Rate == rl.Rate && al.Window == rl.Window && a.Kind == r.Kind && a.Penalty == r.Penalty &&
		al.Burst == rl.Burst && al.Period == rl.Period && al.Location == rl.Location &&
		a.Degraded == r.Degraded && a.Approximate == r.Approximate && a.DryRun == r.DryRun && a.Prefetch == r.Prefetch &&
		a.Name == r.Name && (r.Penalty == nil || c.penalty == *r.Penalty)
}

// planSlot is one slot of the plan cache.
type planSlot struct {
	c      atomic.Pointer[compiled]
	misses atomic.Uint32
}

// plans caches compiled rules, so that a call with a rule seen before does
// not validate and normalise it again (GCRA's gcd, a Penalty's checks). It
// is direct-mapped by a cheap digest of the rule (see planIndex), shared by
// every Limiter, since a plan depends on the rule alone. A miss compiles the
// rule and publishes it; rules that keep evicting each other from one slot
// publish on one miss in eight, so that they cost about one allocation per
// eight calls rather than one per call.
var plans [1 << planBits]planSlot

// planBits is the number of bits of a slot's index.
const planBits = 8

// planIndex picks r's slot from fields that are cheap to read; equality is
// checked in full (see compiled.matches). The fields are gathered side by
// side and mixed by one multiplication, whose top bits depend on every bit
// below them, rather than folded one after the other (a chain of as many
// dependent multiplications).
func planIndex(r *Rule) uint {
	n := len(r.Name)
	h := uint64(n)
	if n > 0 {
		h |= uint64(r.Name[0])<<8 | uint64(r.Name[n-1])<<16 | uint64(r.Name[n/2])<<24
	}
	h ^= uint64(r.Limit.Rate)<<32 ^ uint64(r.Kind)<<29 ^ uint64(r.Limit.Window>>10)*0xff51afd7ed558ccd
	return uint((h * 0x9e3779b97f4a7c15) >> (64 - planBits))
}

// hit returns r's plan from the cache, or nil when r was not compiled
// before (see cachedPlan). The plan may be shared: the caller must not
// change it.
func (r *Rule) hit() *plan {
	if c := plans[planIndex(r)].c.Load(); c != nil && c.matches(r) {
		return &c.plan
	}
	return nil
}

// cachedPlan returns r's plan: from the cache when r was compiled before,
// otherwise compiled into buf. The plan it returns may be shared: the caller
// must not change it.
func (r *Rule) cachedPlan(buf *plan) (*plan, error) {
	s := &plans[planIndex(r)]
	if c := s.c.Load(); c != nil && c.matches(r) {
		return &c.plan, nil
	}
	p, err := r.compile()
	if err != nil {
		return nil, err
	}
	if s.c.Load() != nil && s.misses.Add(1)%8 != 1 {
		*buf = p
		return buf, nil
	}
	c := &compiled{rule: *r, plan: p}
	if r.Penalty != nil {
		c.penalty = *r.Penalty
	}
	s.c.Store(c)
	return &c.plan, nil
}

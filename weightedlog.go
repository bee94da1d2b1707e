package ratelimit

// weightedKind is the exact sliding log of a rule with Prefetch (Kind
// SlidingLog, not Approximate, Prefetch > 0): the sliding log in every way
// but its Redis log (lua/weighted.lua), where a grant of g slots is one
// member of weight g, so that a grant costs Redis the same whatever its
// size (sliding.lua's takes g members). Its rule checks and its local
// meter (the eventlog.Log kept where the sliding log keeps it) are
// slidingKind's, and Kind.String names it "sliding log".
//
// Its Redis key ends in its own letter, 'e': a plain log's scripts (an
// older Limiter's included) never read a weighted log, nor the weighted
// scripts a plain one. So changing Prefetch on a live exact-log rule, from
// zero or to zero, starts a new log in Redis, as changing its Kind does:
// for a Window, the events of the old log no longer count.
type weightedKind struct{ slidingKind }

func (weightedKind) letter() byte          { return 'e' }
func (weightedKind) scripts() *kindScripts { return weightedScripts }

// weightedScripts are the entries composed with lua/weighted.lua's pieces
// (see composeKind).
var weightedScripts = composeKind("weighted")

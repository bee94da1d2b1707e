package ratelimit

// The exact sliding log's Redis log is weighted (lua/weighted.lua): a call's
// events are members of weight 1, as in sliding.lua, and a Prefetch
// grant of g slots is ONE member of weight g, so that a grant costs Redis
// the same whatever its size (sliding.lua's grant pieces took g members).
// Every exact-log rule, with or without Prefetch, reads and writes the
// same log under the same key: a fleet may mix prefetching and
// non-prefetching callers of a rule (the same rule with Prefetch 0, a
// rules file reloaded on one instance before another), and every one
// counts every grant at its weight. What a log without grants costs more
// than sliding.lua's: one ZSCORE, for the weights' sum.
//
// A Limiter older than this format counts a grant as one event: a fleet
// that prefetches an exact log upgrades every instance before it turns
// Prefetch on (docs/operations.md, "Upgrading a fleet").

// exactLogScripts are the entries of the exact log, composed with
// lua/weighted.lua's pieces (see composeKind).
var exactLogScripts = composeKind("weighted")

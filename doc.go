// Package ratelimit decides, per request, whether a caller may proceed. It
// keeps an exact sliding-window log in Redis, escalates repeat offenders from
// warnings to bans, and keeps limiting from a per-process log when Redis
// cannot be used.
//
// # Deciding
//
// A [Limiter] enforces [Rule] values: a name, a [Limit] (Rate events in any
// Window-long interval) and an optional [Penalty]. [Limiter.Allow] answers
// for one event of a key (a user id, a client IP, a route) and records it if
// allowed; [Limiter.AllowN] for several at once; [Limiter.Peek] answers
// without recording; [Limiter.Reset] forgets a key. A rejection is a
// [Result] with Allowed == false and a nil error; errors are reserved for
// invalid input and misuse, and match the package's sentinels with
// errors.Is.
//
// # The sliding log
//
// An event recorded at t0 counts at time t while t - t0 < Window. A call for
// n events at t is allowed when count + n <= Rate; then exactly n events are
// recorded at t, and a rejected call records nothing. Unlike a fixed window,
// the log never lets 2 × Rate through around a boundary; unlike a token
// bucket, it never lets a saved-up burst exceed Rate in any window.
//
// In Redis the log of a (rule, key) pair is a sorted set of events scored by
// their time in microseconds, trimmed, counted and appended by one Lua script
// run with EVALSHA; every event is a distinct member, named by a random id
// per Limiter and a counter, so that calls from many processes in the same
// microsecond never collide.
//
// # Other kinds of limit
//
// A Rule's [Kind] chooses the algorithm; everything else (penalties, bans,
// dry run, the fallback, the shield, AllowAll and AllowGroup, the clock)
// applies to each kind alike, and each decides identically on both paths.
// [GCRA] is a token bucket of Limit.Burst tokens refilled at Rate per
// Window, kept as one theoretical arrival time per key, exact in integers:
// it allows at most Burst + Rate·t/Window events in any interval of length
// t. [CalendarQuota] allows Rate events per calendar [Period] (a day, a week
// from Monday, a month) in Limit.Location, aligned to local midnight and
// correct across daylight-saving changes; its period is computed in Go from
// the call's time, so a quota follows the process clock (or Options.Clock)
// even when the other kinds read Redis' TIME. Both keep O(1) state per key.
//
// # Penalties
//
// With a Penalty every rejection is a violation. From WarnAfter violations
// on rejections carry Warned; at BanAfter the key is banned for BanFor, and a
// banned key is rejected at once with the ban's remaining time. Violations
// are forgotten Memory after the last one; a ban does not clear them.
//
// # Time
//
// Every decision depends only on the time it is made at, never on key TTLs
// (TTLs only reclaim idle keys). With [Options].Clock set, that clock is the
// only time source, on Redis and locally, which makes tests deterministic
// (see package ratelimittest). Without it, the Redis path reads Redis' TIME
// inside the script, so every application instance shares one clock and
// skew between app servers cannot open gaps in the limit; the local path then
// reads the process clock.
//
// # When Redis cannot be used
//
// Every Redis call runs under [Options].Timeout and through a circuit
// breaker. Timeouts, network errors and replies such as LOADING, BUSY,
// READONLY or CLUSTERDOWN count as failures; after TripAfter of them in a
// row the breaker opens and calls stop touching Redis until ProbeAfter has
// passed, when one call probes it. A failed call, and every call while the
// breaker is open, is decided by the degraded policy ([DegradedLocal] by
// default: the same rule and penalty on a per-process log, at the degraded
// share of the rate) and its Result is Degraded. While Redis is healthy its
// decisions are mirrored into the local log, so an outage does not start
// from an empty one. The other way round, what was decided without Redis
// (events, violations, bans, Resets) is written back to Redis once it can be
// used again, by a goroutine of the Limiter's, in idempotent batches and
// only with admission slots to spare, so that Redis counts every event
// allowed in every process (see [Options].WriteBackMax and docs/fallback.md,
// "Write-back").
//
// The degraded share is sized to the fleet: while Redis is healthy every
// Limiter announces itself there every [Options].HeartbeatInterval, and
// learns how many Limiters under its KeyPrefix are live ([Stats].Instances); while it
// falls back it enforces ceil(Rate / instances), so that the fleet as a
// whole admits at most about the rate, after a scale-up or a scale-down
// alike. [Options].DegradedShare, when set, overrides the count.
//
// A load spike is not an outage: admission control bounds the calls in
// flight to each Redis master by the latency it measures (see
// docs/admission.md); a call that finds the bound full waits at most a
// fifth of Timeout for a slot, and is then decided by the degraded policy
// ([PathShed]) instead of queueing until it times out. Only admitted calls that Redis failed (a network error, an
// unavailable reply, no reply within the budget) move the breaker.
//
// A call that timed out has an unknown outcome: Redis may still run the
// script after the caller gave up, and so record an event for a call that
// the fallback decided. The count in Redis never exceeds the Rate because of
// it; the effect is that such a call may use up one event both in Redis and
// locally.
//
// # Concurrency
//
// A Limiter is safe for concurrent use by any number of goroutines, and
// every method may be called while others run. Close is idempotent.
package ratelimit

// Package ratelimitotel records the decisions and the state of a
// [ratelimit.Limiter] as OpenTelemetry metrics.
//
// It lives in its own module, github.com/ratelimit-go/ratelimit/otel, so
// that package ratelimit itself depends on no OpenTelemetry package. It
// plugs into the limiter's hooks: [Metrics.OnDecision] is an
// [ratelimit.Options].OnDecision, [Metrics.OnBreakerChange] an
// OnBreakerChange, and [Metrics.Observe] makes gauges read
// [ratelimit.Limiter.Stats] when the metrics are collected.
//
//	m, err := ratelimitotel.New(ratelimitotel.Options{MeterProvider: provider})
//	...
//	lim, err := ratelimit.New(client, m.Instrument(ratelimit.Options{}))
//	...
//	stop := m.Observe(lim)
//	defer stop()
//
// [Metrics.Instrument] sets both hooks and keeps any hooks already set,
// which still run after the metrics'. For a Prometheus endpoint, give New the
// MeterProvider of the SDK with the exporter
// go.opentelemetry.io/otel/exporters/prometheus as its reader (see the
// example).
//
// # Metrics
//
// Names follow the OpenTelemetry conventions; an exporter may rewrite them
// (Prometheus adds the unit and _total: ratelimit_decisions_total,
// ratelimit_decision_duration_seconds).
//
//	name                         kind       unit        attributes
//	ratelimit.decisions          counter    {decision}  rule, outcome, degraded, dry_run
//	ratelimit.errors             counter    {error}     rule, error.type
//	ratelimit.decision.duration  histogram  s           path
//	ratelimit.breaker.changes    counter    {change}    state
//	ratelimit.breaker.open       gauge      {breaker}   -
//	ratelimit.local.entries      gauge      {entry}     kind
//	ratelimit.shield.entries     gauge      {entry}     -
//	ratelimit.connected          gauge      {limiter}   -
//	ratelimit.redis.in_use       gauge      {limiter}   -
//	ratelimit.fleet.instances    gauge      {instance}  -
//	ratelimit.leases.held        gauge      {lease}     rule
//	ratelimit.leases.events      counter    {lease}     op (released, renewed, lost)
//
// ratelimit.decisions counts the calls of Allow and AllowN that returned no
// error, one per call whatever its n. A Peek records nothing and counts no
// violation, so it is not counted here (its duration is). The attributes:
//
//   - rule: the [ratelimit.Rule] Name. The key is never an attribute: keys are
//     unbounded, rule names are fixed by the program. Past Options.MaxRules
//     distinct names, further ones are counted as [OtherRule].
//   - outcome: what the rule decided. "allowed"; "rejected"; "warned", a
//     rejection with [ratelimit.Result].Warned; "banned", a rejection with
//     Banned (the call that started a ban, or one made during it).
//   - degraded: true for a decision made without Redis because Redis could
//     not be used (Result.Degraded): the local fallback, or the rule's
//     DegradedAllow or DegradedDeny policy.
//   - dry_run: true when the rule is in dry run and enforcing it would have
//     rejected the call (Result.DryRun). The call was let through; outcome
//     says what enforcing would have answered. So the calls actually
//     rejected are those with outcome != "allowed" and dry_run = false, and
//     a dry-run rule's would-be rejections those with dry_run = true.
//
// ratelimit.errors counts the calls of Allow, AllowN and Peek that returned
// an error. Its error.type is "invalid_rule", "invalid_key", "invalid_n",
// "closed", "redis" (an error reply that means misuse, [ratelimit.ErrRedis]),
// "canceled" or "deadline_exceeded" (the caller's context ended first), or
// "_OTHER". An unreachable Redis is no error: those calls are decisions
// with degraded = true.
//
// ratelimit.decision.duration is how long each call of Allow, AllowN or
// Peek that returned no error took, with the path that decided it: "redis",
// "shield" (the hot-key shield answered without a Redis round trip) or
// "local" (a limiter without Redis, or the fallback). Its advised bucket
// boundaries span 10µs (the shield, the local limiter) to 1s (ten times the
// default Redis timeout): 10µs, 25µs, 50µs, 100µs, 250µs, 500µs, 1ms,
// 2.5ms, 5ms, 10ms, 25ms, 50ms, 100ms, 250ms, 500ms, 1s. A View of the SDK's
// MeterProvider can replace them.
//
// ratelimit.breaker.changes counts the state changes of the circuit
// breakers in front of Redis, by the state entered: "open", "half-open" or
// "closed". The breaker's name is left out, since a Redis Cluster has 256
// breakers; ratelimit.breaker.open says how many are open or half-open now.
//
// The gauges report, at each collection, the sum over the limiters being
// observed of their [ratelimit.Stats]: ratelimit.breaker.open
// (BreakersOpen); ratelimit.local.entries by kind: each kind of meter
// [ratelimit.Limiter.LocalMeters] reports ("log", "counter", "bucket",
// "quota", "fixed_window", and any later kind's), "strike" and "ban" (LocalStrikes,
// LocalBans);
// ratelimit.shield.entries (Shielded); ratelimit.connected, the number of
// limiters that have a Redis client (Connected), whether it answers or not;
// ratelimit.redis.in_use, the number of limiters deciding on Redis now
// (RedisInUse): for one limiter, 1 while its Redis answers and 0 from the
// first failed call of an outage until Redis decides again, the gauge to
// alert on. ratelimit.fleet.instances
// is not a sum but the most [ratelimit.Stats].Instances of the observed
// limiters: the live limiters under a key prefix as a limiter's last
// heartbeat counted, the N of the share ceil(Rate / N) each enforces while
// Redis cannot be used (0 before a heartbeat succeeded). Limiters of one
// fleet count the same instances, so adding them up would count each
// several times. ratelimit.leases.held is the leases in flight under each
// Concurrency rule ([ratelimit.Limiter.LeasesByRule]), its rule attribute as
// ratelimit.decisions' (bounded by Options.MaxRules), from the first
// collection that saw the rule hold a lease on: 0 once all are given back.
// ratelimit.leases.events counts the leases released, renewed and found
// lost (LeaseReleases, LeaseRenewals, LeasesLost); an Acquire is a
// decision. ratelimit.reservations counts the reservations Reserve made,
// those settled (or cancelled) and those settled for more than reserved
// (op made, settled, debt: Reservations, ReservationsSettled,
// ReservationDebts), and ratelimit.reservations.events the events they
// gave back and charged extra (op given_back, charged: ReservedGivenBack,
// ReservedCharged); a Reserve is a decision, a settle is not.
// ratelimit.prefetch.grants counts the grants of slots for rules with
// Prefetch (PrefetchGrants), and ratelimit.prefetch.slots their slots
// granted, used and given back (op granted, used, returned); a call
// allowed from them is a decision on path prefetch. The gauges report
// nothing while no limiter is observed.
//
// # Cost
//
// Every attribute set is made once, when a rule is first seen, so the hook
// adds no allocation to a decision. What remains is the SDK's own work for
// one counter and one histogram. On one core of the project's machine, with
// the SDK of go.opentelemetry.io/otel/sdk/metric v1.46: OnDecision alone
// takes about 0.5µs, or about 30ns with a no-op MeterProvider
// (BenchmarkOnDecision); a local-only Allow, the cheapest decision there is,
// goes from about 0.3µs to about 1.1µs with Metrics (BenchmarkAllow). A
// decision on Redis takes a round trip, a hundred microseconds or more. The
// gauges call Stats, which locks each shard of the local limiter in turn,
// only when the metrics are collected.
//
// A [ratelimit.Decision] carries no context, so measurements are recorded
// with context.Background: the SDK links no exemplar to a trace.
//
// # Concurrency
//
// Metrics is safe for concurrent use, and one Metrics may serve several
// limiters: their decisions and their gauges add up.
package ratelimitotel

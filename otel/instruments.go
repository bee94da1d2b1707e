package ratelimitotel

import (
	"errors"

	"github.com/ratelimit-go/ratelimit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instrument names one of Metrics' instruments: its name, unit and
// description as the meter is given them.
type instrument struct {
	name, unit, desc string
}

// made is an instrument of type T to make, and the field of Metrics it
// goes into.
type made[T any] struct {
	to *T
	instrument
}

// makeEach makes every instrument of list with make, into its field, and
// returns what the meter refused, appended to errs.
func makeEach[T any](list []made[T], make func(name string, opts ...metric.InstrumentOption) (T, error), errs []error) []error {
	for _, i := range list {
		var err error
		*i.to, err = make(i.name, metric.WithUnit(i.unit), metric.WithDescription(i.desc))
		errs = append(errs, err)
	}
	return errs
}

// makeInstruments makes every instrument of m with meter, and registers
// m.observe as the callback of the observable ones. It returns every
// instrument the meter refused, joined.
func (m *Metrics) makeInstruments(meter metric.Meter) error {
	errs := makeEach(m.counters(), func(name string, opts ...metric.InstrumentOption) (metric.Int64Counter, error) {
		return meter.Int64Counter(name, asOptions[metric.Int64CounterOption](opts)...)
	}, nil)
	var err error
	m.duration, err = meter.Float64Histogram("ratelimit.decision.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long Allow, AllowN and Peek took to decide, by the path that decided."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	errs = append(errs, err)
	gauges, sums := m.gauges(), m.sums()
	errs = makeEach(gauges, func(name string, opts ...metric.InstrumentOption) (metric.Int64ObservableGauge, error) {
		return meter.Int64ObservableGauge(name, asOptions[metric.Int64ObservableGaugeOption](opts)...)
	}, errs)
	errs = makeEach(sums, func(name string, opts ...metric.InstrumentOption) (metric.Int64ObservableCounter, error) {
		return meter.Int64ObservableCounter(name, asOptions[metric.Int64ObservableCounterOption](opts)...)
	}, errs)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	observables := make([]metric.Observable, 0, len(gauges)+len(sums))
	for _, g := range gauges {
		observables = append(observables, *g.to)
	}
	for _, s := range sums {
		observables = append(observables, *s.to)
	}
	_, err = meter.RegisterCallback(m.observe, observables...)
	return err
}

// asOptions returns opts as options of one kind of instrument, O, which
// every metric.InstrumentOption is.
func asOptions[O any](opts []metric.InstrumentOption) []O {
	out := make([]O, len(opts))
	for i, o := range opts {
		out[i] = any(o).(O)
	}
	return out
}

// counters are the counters a decision or a breaker change adds to.
func (m *Metrics) counters() []made[metric.Int64Counter] {
	return []made[metric.Int64Counter]{
		{&m.decisions, instrument{"ratelimit.decisions", "{decision}",
			"Decisions of Allow and AllowN calls, by rule, outcome, degraded and dry_run."}},
		{&m.errs, instrument{"ratelimit.errors", "{error}",
			"Allow, AllowN and Peek calls that returned an error, by rule and error.type."}},
		{&m.changes, instrument{"ratelimit.breaker.changes", "{change}",
			"State changes of the circuit breakers in front of Redis, by the state entered."}},
	}
}

// gauges are the gauges m.observe reports to.
func (m *Metrics) gauges() []made[metric.Int64ObservableGauge] {
	return []made[metric.Int64ObservableGauge]{
		{&m.breakersOpen, instrument{"ratelimit.breaker.open", "{breaker}",
			"Circuit breakers in front of Redis that are open or half-open."}},
		{&m.localEntries, instrument{"ratelimit.local.entries", "{entry}",
			"Entries the local limiter keeps, by kind."}},
		{&m.shielded, instrument{"ratelimit.shield.entries", "{entry}",
			"Rejections the hot-key shield holds."}},
		{&m.connected, instrument{"ratelimit.connected", "{limiter}",
			"Observed limiters that have a Redis client."}},
		{&m.redisInUse, instrument{"ratelimit.redis.in_use", "{limiter}",
			"Observed limiters deciding on Redis now (ratelimit.Stats.RedisInUse): 1 for one limiter whose Redis answers, 0 during an outage."}},
		{&m.wbPending, instrument{"ratelimit.writeback.pending", "{event}",
			"Events decided without Redis that wait to be written back to it."}},
		{&m.instances, instrument{"ratelimit.fleet.instances", "{instance}",
			"Live limiters under an observed limiter's key prefix, as its last heartbeat counted (the most over the observed limiters): the N of the degraded share Rate / N."}},
		{&m.leasesHeld, instrument{"ratelimit.leases.held", "{lease}",
			"Leases of a Concurrency rule (rule) the observed limiters hold now, in flight (ratelimit.Limiter.LeasesByRule)."}},
	}
}

// sums are the counters m.observe reports to.
func (m *Metrics) sums() []made[metric.Int64ObservableCounter] {
	return []made[metric.Int64ObservableCounter]{
		{&m.writeBack, instrument{"ratelimit.writeback.events", "{event}",
			"Events decided without Redis that were written back to it (outcome written) or never will be (outcome dropped)."}},
		{&m.leaseEvents, instrument{"ratelimit.leases.events", "{lease}",
			"Leases released, renewed or found lost (op released, renewed, lost); acquires are decisions (ratelimit.decisions)."}},
		{&m.reservations, instrument{"ratelimit.reservations", "{reservation}",
			"Reservations made by Reserve, settled (or cancelled), and settled for more than reserved, each leaving its key in debt past the limit (op made, settled, debt); a Reserve is also a decision (ratelimit.decisions)."}},
		{&m.resEvents, instrument{"ratelimit.reservations.events", "{event}",
			"Events reservations gave back (settled for less, or cancelled) and charged extra (settled for more) (op given_back, charged)."}},
		{&m.pfGrants, instrument{"ratelimit.prefetch.grants", "{grant}",
			"Grants of slots Redis made to the observed limiters for rules with Prefetch."}},
		{&m.pfSlots, instrument{"ratelimit.prefetch.slots", "{slot}",
			"Slots of rules with Prefetch granted, used by calls decided in-process (path prefetch), and given back unused (op granted, used, returned)."}},
	}
}

// prepareOptions makes the attribute sets of the paths, breaker states and
// ops, once, so that recording allocates nothing.
func (m *Metrics) prepareOptions() {
	for p := range m.pathOpts {
		m.pathOpts[p] = []metric.RecordOption{metric.WithAttributeSet(
			attribute.NewSet(attribute.String("path", ratelimit.Path(p).String())))}
	}
	for s := range m.changeOpts {
		m.changeOpts[s] = []metric.AddOption{metric.WithAttributeSet(
			attribute.NewSet(attribute.String("state", ratelimit.BreakerState(s).String())))}
	}
	observeOpts(m.leaseOpts[:], "op", "released", "renewed", "lost")
	observeOpts(m.resOpts[:], "op", "made", "settled", "debt")
	observeOpts(m.pfOpts[:], "op", "granted", "used", "returned")
	observeOpts(m.resEvOpts[:], "op", "given_back", "charged")
	observeOpts(m.wbOpts[:], "outcome", "written", "dropped")
}

// observeOpts sets to[i] to the attribute set {key: values[i]}.
func observeOpts(to [][]metric.ObserveOption, key string, values ...string) {
	for i, v := range values {
		to[i] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(key, v)))}
	}
}

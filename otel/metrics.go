package ratelimitotel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ratelimit-go/ratelimit"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the name of the instrumentation scope (the meter) that
// Metrics creates its instruments in.
const ScopeName = "github.com/ratelimit-go/ratelimit/otel"

// DefaultMaxRules is the number of distinct rule names measured under their
// own name when Options.MaxRules is 0.
const DefaultMaxRules = 1000

// OtherRule is the rule attribute of measurements of the rules seen after
// Options.MaxRules distinct ones.
const OtherRule = "_other"

// durationBuckets are the bucket boundaries, in seconds, that Metrics
// advises for ratelimit.decision.duration: from 10µs (the shield and the
// local limiter) to 1s (far past the default Redis timeout of 100ms).
var durationBuckets = []float64{
	0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
}

// Options configure Metrics. The zero value is a sensible configuration:
// each field documents its default.
type Options struct {
	// MeterProvider provides the meter of every instrument. The default,
	// nil, is otel.GetMeterProvider() at the time of New: the global
	// provider, which delegates to one set later with otel.SetMeterProvider.
	MeterProvider metric.MeterProvider
	// MaxRules bounds the number of distinct rule names that Metrics
	// measures under their own name; the rule attribute of later ones is
	// OtherRule. Rule names come from the program, so the bound only
	// matters for programs that make rule names from input (which they
	// should not). It also bounds the memory Metrics keeps for rules: about
	// 7 kB of prepared attribute sets per rule. The default is
	// DefaultMaxRules (1000).
	MaxRules int
}

// Metrics records a Limiter's decisions, errors, circuit breaker changes
// and local state as OpenTelemetry metrics. Connect it with
// Metrics.Instrument (or by setting its methods as the hooks of
// ratelimit.Options yourself) and Metrics.Observe. One Metrics may serve
// any number of Limiters; their measurements add up. Every method is safe
// for concurrent use.
type Metrics struct {
	decisions metric.Int64Counter
	errs      metric.Int64Counter
	duration  metric.Float64Histogram
	changes   metric.Int64Counter

	breakersOpen metric.Int64ObservableGauge
	localEntries metric.Int64ObservableGauge
	shielded     metric.Int64ObservableGauge
	connected    metric.Int64ObservableGauge
	redisInUse   metric.Int64ObservableGauge
	writeBack    metric.Int64ObservableCounter
	wbPending    metric.Int64ObservableGauge
	instances    metric.Int64ObservableGauge
	leasesHeld   metric.Int64ObservableGauge
	leaseEvents  metric.Int64ObservableCounter
	reservations metric.Int64ObservableCounter
	resEvents    metric.Int64ObservableCounter
	pfGrants     metric.Int64ObservableCounter
	pfSlots      metric.Int64ObservableCounter

	// Prepared measurement options, so that the hot path allocates nothing.
	pathOpts   [numPaths][]metric.RecordOption
	changeOpts [numStates][]metric.AddOption
	kindOpts   map[string][]metric.ObserveOption // by local entry kind, made on first use
	wbOpts     [2][]metric.ObserveOption         // written, dropped
	leaseOpts  [3][]metric.ObserveOption         // released, renewed, lost
	resOpts    [3][]metric.ObserveOption         // made, settled, debt
	resEvOpts  [2][]metric.ObserveOption         // given_back, charged
	pfOpts     [3][]metric.ObserveOption         // granted, used, returned

	maxRules int
	rules    atomic.Pointer[map[string]*ruleAttrs] // copied on write under rulesMu
	full     atomic.Bool                           // len(*rules) == maxRules
	other    *ruleAttrs                            // for rules past maxRules

	rulesMu  sync.Mutex                 // serializes writes to rules
	obsMu    sync.Mutex                 // guards limiters and leased
	limiters map[*ratelimit.Limiter]int // observed limiters, with how often each
	leased   map[*ruleAttrs]struct{}    // rules that held leases while observed
}

// New returns Metrics whose instruments are made by the meter named
// ScopeName of opts.MeterProvider. It fails when opts.MaxRules is negative
// or the provider refuses to make an instrument.
func New(opts Options) (*Metrics, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if opts.MaxRules < 0 {
		return nil, fmt.Errorf("ratelimitotel: MaxRules = %d is negative", opts.MaxRules)
	}
	m := &Metrics{maxRules: opts.MaxRules, limiters: make(map[*ratelimit.Limiter]int)}
	if m.maxRules == 0 {
		m.maxRules = DefaultMaxRules
	}
	if err := m.makeInstruments(mp.Meter(ScopeName)); err != nil {
		return nil, fmt.Errorf("ratelimitotel: %w", err)
	}
	m.prepareOptions()
	m.other = newRuleAttrs(OtherRule)
	m.rules.Store(&map[string]*ruleAttrs{})
	return m, nil
}

// Instrument returns opts with OnDecision and OnBreakerChange set to
// record into m. Hooks already set in opts still run, after m's.
//
//	lim, err := ratelimit.New(client, m.Instrument(ratelimit.Options{...}))
//	stop := m.Observe(lim)
func (m *Metrics) Instrument(opts ratelimit.Options) ratelimit.Options {
	if prev := opts.OnDecision; prev != nil {
		opts.OnDecision = func(d ratelimit.Decision) { m.OnDecision(d); prev(d) }
	} else {
		opts.OnDecision = m.OnDecision
	}
	if prev := opts.OnBreakerChange; prev != nil {
		opts.OnBreakerChange = func(c ratelimit.BreakerChange) { m.OnBreakerChange(c); prev(c) }
	} else {
		opts.OnBreakerChange = m.OnBreakerChange
	}
	return opts
}

// OnDecision records one decision; it has the type of
// ratelimit.Options.OnDecision. A call that returned an error adds one to
// ratelimit.errors; any other adds its duration to
// ratelimit.decision.duration and, unless it was a Peek, one to
// ratelimit.decisions. A Reservation's settle is no decision: the
// reservations' counters count it (see Observe). It allocates nothing once
// it has seen the rule.
func (m *Metrics) OnDecision(d ratelimit.Decision) {
	if d.Settle {
		return
	}
	ctx := context.Background()
	r := m.rule(d.Rule.Name)
	if d.Err != nil {
		m.errs.Add(ctx, 1, r.errs[errorIndex(d.Err)]...)
		return
	}
	if p := int(d.Path); p >= 0 && p < numPaths {
		m.duration.Record(ctx, d.Took.Seconds(), m.pathOpts[p]...)
	}
	if !d.Peek {
		m.decisions.Add(ctx, 1, r.decisions[decisionIndex(&d.Result)]...)
	}
}

// OnBreakerChange records one state change of a circuit breaker; it has the
// type of ratelimit.Options.OnBreakerChange. It adds one to
// ratelimit.breaker.changes with the state entered (the breaker's name is
// left out: a Redis Cluster has 256 of them).
func (m *Metrics) OnBreakerChange(c ratelimit.BreakerChange) {
	if s := int(c.To); s >= 0 && s < numStates {
		m.changes.Add(context.Background(), 1, m.changeOpts[s]...)
	}
}

// Observe makes the gauges (ratelimit.breaker.open, ratelimit.local.entries,
// ratelimit.shield.entries, ratelimit.connected, ratelimit.fleet.instances,
// ratelimit.writeback.pending) and the counters ratelimit.writeback.events,
// ratelimit.reservations, ratelimit.reservations.events,
// ratelimit.prefetch.grants and ratelimit.prefetch.slots
// report l.Stats() at each
// collection, added to those of the other limiters observed, until stop is
// called (the counter counts only the limiters observed at the time, so it
// falls when one stops being observed). Call stop when you close l. Observing a limiter twice counts it
// once; it stays observed until both stops are called. The gauges report
// nothing while no limiter is observed.
func (m *Metrics) Observe(l *ratelimit.Limiter) (stop func()) {
	m.obsMu.Lock()
	m.limiters[l]++
	m.obsMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.obsMu.Lock()
			defer m.obsMu.Unlock()
			if m.limiters[l]--; m.limiters[l] <= 0 {
				delete(m.limiters, l)
			}
		})
	}
}

// Paths, breaker states and local entry kinds, as attribute values.
const (
	numPaths  = int(ratelimit.PathPrefetch) + 1
	numStates = int(ratelimit.BreakerOpen) + 1
)

// Outcomes of a decision: the first four values of the outcome attribute.
const (
	outcomeAllowed = iota
	outcomeRejected
	outcomeWarned
	outcomeBanned
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"allowed", "rejected", "warned", "banned"}

// decisionIndex returns the index in ruleAttrs.decisions of a result:
// its outcome, whether it was degraded, whether it was a dry run.
func decisionIndex(r *ratelimit.Result) int {
	o := outcomeAllowed
	if !r.Allowed || r.DryRun {
		switch {
		case r.Banned:
			o = outcomeBanned
		case r.Warned:
			o = outcomeWarned
		default:
			o = outcomeRejected
		}
	}
	i := o * 4
	if r.Degraded {
		i += 2
	}
	if r.DryRun {
		i++
	}
	return i
}

// errorTypes are the values of the error.type attribute, in the order
// errors are matched; an error that matches none is "_OTHER".
var errorTypes = [...]struct {
	err  error
	name string
}{
	{ratelimit.ErrInvalidRule, "invalid_rule"},
	{ratelimit.ErrInvalidKey, "invalid_key"},
	{ratelimit.ErrInvalidN, "invalid_n"},
	{ratelimit.ErrClosed, "closed"},
	{ratelimit.ErrRedis, "redis"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

const numErrorTypes = len(errorTypes) + 1

func errorIndex(err error) int {
	for i, t := range errorTypes {
		if errors.Is(err, t.err) {
			return i
		}
	}
	return len(errorTypes)
}

func errorTypeName(i int) string {
	if i < len(errorTypes) {
		return errorTypes[i].name
	}
	return "_OTHER"
}

// ruleAttrs are the prepared measurement options of one rule.
type ruleAttrs struct {
	decisions [numOutcomes * 4][]metric.AddOption
	errs      [numErrorTypes][]metric.AddOption
	held      []metric.ObserveOption // the leases held under the rule
}

func newRuleAttrs(name string) *ruleAttrs {
	r := new(ruleAttrs)
	rule := attribute.String("rule", name)
	r.held = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(rule))}
	for o := range numOutcomes {
		for _, degraded := range []bool{false, true} {
			for _, dry := range []bool{false, true} {
				i := o * 4
				if degraded {
					i += 2
				}
				if dry {
					i++
				}
				r.decisions[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
					rule,
					attribute.String("outcome", outcomeNames[o]),
					attribute.Bool("degraded", degraded),
					attribute.Bool("dry_run", dry)))}
			}
		}
	}
	for i := range numErrorTypes {
		r.errs[i] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			rule, attribute.String("error.type", errorTypeName(i))))}
	}
	return r
}

// rule returns the prepared options of the rule named name: without a lock
// or an allocation once the rule has been seen.
func (m *Metrics) rule(name string) *ruleAttrs {
	if r, ok := (*m.rules.Load())[name]; ok {
		return r
	}
	if m.full.Load() {
		return m.other
	}
	m.rulesMu.Lock()
	defer m.rulesMu.Unlock()
	old := *m.rules.Load()
	if r, ok := old[name]; ok {
		return r
	}
	if len(old) >= m.maxRules {
		m.full.Store(true)
		return m.other
	}
	next := make(map[string]*ruleAttrs, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	name = strings.Clone(name)
	r := newRuleAttrs(name)
	next[name] = r
	m.rules.Store(&next)
	return r
}

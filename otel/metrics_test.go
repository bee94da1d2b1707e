package ratelimitotel_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	ratelimitotel "github.com/ratelimit-go/ratelimit/otel"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// durationBuckets are the bucket boundaries the package documents.
var durationBuckets = []float64{
	0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
}

var epoch = time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC)

// newMetrics returns Metrics on an SDK MeterProvider whose manual reader
// the test collects from.
func newMetrics(t testing.TB, opts ratelimitotel.Options) (*ratelimitotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	opts.MeterProvider = provider
	m, err := ratelimitotel.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, reader
}

func newLimiter(t testing.TB, c rueidis.Client, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(c, opts)
	if err != nil {
		t.Fatalf("ratelimit.New: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

func newClient(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// collect returns every data point the reader has, one line each: the
// metric's name and unit, its attributes, and its value (for a histogram,
// its count), e.g. `ratelimit.decisions {decision} outcome=allowed,rule=a 3`.
func collect(t testing.TB, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	points := map[string]float64{}
	put := func(m metricdata.Metrics, attrs attribute.Set, v float64) {
		k := m.Name + " " + m.Unit + " " + attrs.Encoded(attribute.DefaultEncoder())
		if _, dup := points[k]; dup {
			t.Errorf("two data points %s", k)
		}
		points[k] = v
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != ratelimitotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: a sum that is not a cumulative counter", m.Name)
				}
				for _, p := range d.DataPoints {
					put(m, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					put(m, p.Attributes, float64(p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					put(m, p.Attributes, float64(p.Count))
					if p.Sum < 0 {
						t.Errorf("%s: negative sum %v", m.Name, p.Sum)
					}
					if want := durationBuckets; !slices.Equal(p.Bounds, want) {
						t.Errorf("%s: bounds %v, want %v", m.Name, p.Bounds, want)
					}
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return points
}

// assertPoints compares the collected points with want, exactly.
func assertPoints(t *testing.T, got, want map[string]float64) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(got)) {
		w, ok := want[k]
		switch {
		case !ok:
			fmt.Fprintf(&b, "  unexpected %s = %v\n", k, got[k])
		case w != got[k]:
			fmt.Fprintf(&b, "  %s = %v, want %v\n", k, got[k], w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			fmt.Fprintf(&b, "  missing %s = %v\n", k, want[k])
		}
	}
	t.Errorf("collected points differ:\n%s", &b)
}

// decision is the key of a point of ratelimit.decisions.
func decision(rule, outcome string, degraded, dryRun bool) string {
	return fmt.Sprintf("ratelimit.decisions {decision} degraded=%v,dry_run=%v,outcome=%s,rule=%s", degraded, dryRun, outcome, rule)
}

// TestDecisions drives a limiter on miniredis through every outcome, on
// every path, then through an outage, and checks every data point.
func TestDecisions(t *testing.T) {
	mr := miniredis.RunT(t)
	m, reader := newMetrics(t, ratelimitotel.Options{})
	clk := ratelimittest.NewClock(epoch)
	opened := make(chan ratelimit.BreakerChange, 10)
	l := newLimiter(t, newClient(t, mr.Addr()), m.Instrument(ratelimit.Options{
		Clock:           clk,
		Timeout:         10 * time.Second, // a slow machine never degrades a decision
		TripAfter:       1,
		ProbeAfter:      time.Hour, // the breaker stays open for the rest of the test
		Logger:          discard,
		OnBreakerChange: func(c ratelimit.BreakerChange) { opened <- c },
	}))
	// Its first heartbeat, at once, counts itself; the count then stays
	// through the outage (the default HeartbeatInterval is 5s).
	for deadline := time.Now().Add(10 * time.Second); l.Stats().Instances != 1; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first heartbeat never succeeded")
		}
	}
	stop := m.Observe(l)
	ctx := context.Background()
	allow := func(rule ratelimit.Rule, key string) ratelimit.Result {
		t.Helper()
		res, err := l.Allow(ctx, rule, key)
		if err != nil {
			t.Fatalf("Allow(%s, %s): %v", rule.Name, key, err)
		}
		return res
	}

	plain := ratelimit.Rule{Name: "plain", Limit: ratelimit.PerMinute(2)}
	allow(plain, "k")                      // redis: allowed
	allow(plain, "k")                      // redis: allowed
	if r := allow(plain, "k"); r.Allowed { // redis: rejected, now shielded
		t.Fatalf("third call allowed: %+v", r)
	}
	allow(plain, "k")                                      // shield: rejected
	if _, err := l.Peek(ctx, plain, "other"); err != nil { // redis: not counted
		t.Fatal(err)
	}

	login := ratelimit.Rule{Name: "login", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{WarnAfter: 2, BanAfter: 3, BanFor: time.Hour}}
	allow(login, "ip")                      // redis: allowed
	allow(login, "ip")                      // redis: rejected (violation 1), now shielded
	if r := allow(login, "ip"); !r.Warned { // shield: warned (2), the violation owed to Redis
		t.Fatalf("want a warning: %+v", r)
	}
	if r := allow(login, "ip"); !r.Banned { // redis: banned (3, the owed one delivered), now shielded
		t.Fatalf("want a ban: %+v", r)
	}
	allow(login, "ip") // shield: banned

	dry := ratelimit.Rule{Name: "dry", Limit: ratelimit.PerMinute(1), DryRun: true}
	allow(dry, "k")                                    // redis: allowed
	if r := allow(dry, "k"); !r.Allowed || !r.DryRun { // redis: rejected in dry run
		t.Fatalf("want a dry-run rejection: %+v", r)
	}

	// Errors: no decision, no duration.
	l.Allow(ctx, ratelimit.Rule{}, "k")
	l.Allow(ctx, plain, "")
	l.AllowN(ctx, plain, "k", 3)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	l.Allow(canceled, plain, "fresh")

	// An outage: the first call fails, opens the breaker and is decided
	// locally; the next ones find the breaker open.
	mr.Close()
	for i, want := range []bool{true, true, false} {
		if r := allow(plain, "down"); !r.Degraded || r.Allowed != want {
			t.Fatalf("call %d during the outage: %+v", i, r)
		}
	}
	select {
	case c := <-opened:
		// miniredis answers CLUSTER SLOTS, so rueidis makes a cluster client
		// and the breaker is one of a slot range.
		if c.From != ratelimit.BreakerClosed || c.To != ratelimit.BreakerOpen {
			t.Fatalf("breaker change %+v", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the breaker did not open")
	}

	want := map[string]float64{
		decision("plain", "allowed", false, false):  2,
		decision("plain", "rejected", false, false): 2,
		decision("plain", "allowed", true, false):   2,
		decision("plain", "rejected", true, false):  1,
		decision("login", "allowed", false, false):  1,
		decision("login", "rejected", false, false): 1,
		decision("login", "warned", false, false):   1,
		decision("login", "banned", false, false):   2,
		decision("dry", "allowed", false, false):    1,
		decision("dry", "rejected", false, true):    1,

		"ratelimit.errors {error} error.type=invalid_rule,rule=":     1,
		"ratelimit.errors {error} error.type=invalid_key,rule=plain": 1,
		"ratelimit.errors {error} error.type=invalid_n,rule=plain":   1,
		"ratelimit.errors {error} error.type=canceled,rule=plain":    1,

		"ratelimit.decision.duration s path=redis":  9, // 8 calls and the Peek
		"ratelimit.decision.duration s path=shield": 3,
		"ratelimit.decision.duration s path=local":  3,

		"ratelimit.breaker.changes {change} state=open": 1,

		"ratelimit.breaker.open {breaker} ":     1,
		"ratelimit.connected {limiter} ":        1,
		"ratelimit.redis.in_use {limiter} ":     0, // the outage
		"ratelimit.fleet.instances {instance} ": 1,
		// The local limiter mirrors what Redis allowed (the logs of plain/k,
		// login/ip and dry/k) and the ban of login/ip, and decided
		// plain/down itself; the shield holds the rejections of plain/k,
		// login/ip (banned) and dry/k (a full window without penalty).
		"ratelimit.local.entries {entry} kind=log":          4,
		"ratelimit.local.entries {entry} kind=counter":      0,
		"ratelimit.local.entries {entry} kind=bucket":       0,
		"ratelimit.local.entries {entry} kind=quota":        0,
		"ratelimit.local.entries {entry} kind=fixed_window": 0,
		"ratelimit.local.entries {entry} kind=strike":       0,
		"ratelimit.local.entries {entry} kind=ban":          1,
		"ratelimit.shield.entries {entry} ":                 3,
		// The 2 events allowed without Redis wait to be written back.
		"ratelimit.writeback.events {event} outcome=written": 0,
		"ratelimit.writeback.events {event} outcome=dropped": 0,
		"ratelimit.writeback.pending {event} ":               2,
		// No Concurrency rule.
		"ratelimit.leases.events {lease} op=released": 0,
		"ratelimit.leases.events {lease} op=renewed":  0,
		"ratelimit.leases.events {lease} op=lost":     0,
		// No reservation.
		"ratelimit.reservations {reservation} op=made":        0,
		"ratelimit.reservations {reservation} op=settled":     0,
		"ratelimit.reservations {reservation} op=debt":        0,
		"ratelimit.reservations.events {event} op=given_back": 0,
		"ratelimit.reservations.events {event} op=charged":    0,
		// No rule with Prefetch.
		"ratelimit.prefetch.grants {grant} ":          0,
		"ratelimit.prefetch.slots {slot} op=granted":  0,
		"ratelimit.prefetch.slots {slot} op=used":     0,
		"ratelimit.prefetch.slots {slot} op=returned": 0,
	}
	assertPoints(t, collect(t, reader), want)

	// Once the limiter is no longer observed the gauges report nothing;
	// the counters keep their totals.
	stop()
	stop() // idempotent
	l.Close()
	l.Allow(ctx, plain, "k")
	want["ratelimit.errors {error} error.type=closed,rule=plain"] = 1
	for k := range want {
		if strings.HasPrefix(k, "ratelimit.breaker.open ") || strings.HasPrefix(k, "ratelimit.connected ") || strings.HasPrefix(k, "ratelimit.redis.in_use ") || strings.HasPrefix(k, "ratelimit.fleet.instances ") ||
			strings.HasPrefix(k, "ratelimit.local.entries ") || strings.HasPrefix(k, "ratelimit.shield.entries ") ||
			strings.HasPrefix(k, "ratelimit.writeback.") || strings.HasPrefix(k, "ratelimit.leases.") || strings.HasPrefix(k, "ratelimit.reservations") || strings.HasPrefix(k, "ratelimit.prefetch.") {
			delete(want, k)
		}
	}
	assertPoints(t, collect(t, reader), want)
}

// TestInstrumentKeepsHooks: hooks set before Instrument still run, after
// the metrics have recorded.
func TestInstrumentKeepsHooks(t *testing.T) {
	m, reader := newMetrics(t, ratelimitotel.Options{})
	var seen []string
	opts := m.Instrument(ratelimit.Options{
		Clock: ratelimittest.NewClock(epoch),
		OnDecision: func(d ratelimit.Decision) {
			seen = append(seen, fmt.Sprintf("%s %v", d.Rule.Name, d.Result.Allowed))
		},
	})
	if opts.OnBreakerChange == nil {
		t.Fatal("Instrument left OnBreakerChange unset")
	}
	l := newLimiter(t, nil, opts)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1)}
	l.Allow(context.Background(), rule, "k")
	l.Allow(context.Background(), rule, "k")
	if want := []string{"r true", "r false"}; !slices.Equal(seen, want) {
		t.Errorf("the user's hook saw %q, want %q", seen, want)
	}
	assertPoints(t, collect(t, reader), map[string]float64{
		decision("r", "allowed", false, false):     1,
		decision("r", "rejected", false, false):    1,
		"ratelimit.decision.duration s path=local": 2,
	})

	// OnBreakerChange chains the same way.
	var changes []ratelimit.BreakerChange
	opts = m.Instrument(ratelimit.Options{OnBreakerChange: func(c ratelimit.BreakerChange) { changes = append(changes, c) }})
	c := ratelimit.BreakerChange{Breaker: "redis", From: ratelimit.BreakerOpen, To: ratelimit.BreakerHalfOpen}
	opts.OnBreakerChange(c)
	if len(changes) != 1 || changes[0] != c {
		t.Errorf("the user's hook saw %+v", changes)
	}
	if got := collect(t, reader)["ratelimit.breaker.changes {change} state=half-open"]; got != 1 {
		t.Errorf("half-open changes = %v, want 1", got)
	}
}

// TestObserveAddsUpLimiters: the gauges report the sum over the observed
// limiters, and each stop removes one.
func TestObserveAddsUpLimiters(t *testing.T) {
	m, reader := newMetrics(t, ratelimitotel.Options{})
	if got := collect(t, reader); len(got) != 0 {
		t.Fatalf("nothing observed, yet %v", got)
	}
	clk := ratelimittest.NewClock(epoch)
	a := newLimiter(t, nil, ratelimit.Options{Clock: clk})
	mr := miniredis.RunT(t)
	// No heartbeat: Instances stays 0 (TestDecisions counts one).
	b := newLimiter(t, newClient(t, mr.Addr()), ratelimit.Options{Clock: clk, Timeout: 10 * time.Second, HeartbeatInterval: -1})
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1), Approximate: true}
	for _, key := range []string{"1", "2"} {
		a.Allow(context.Background(), rule, key)
	}
	b.Allow(context.Background(), rule, "3")

	gauges := func(counters, connected float64) map[string]float64 {
		return map[string]float64{
			"ratelimit.breaker.open {breaker} ":                 0,
			"ratelimit.connected {limiter} ":                    connected,
			"ratelimit.redis.in_use {limiter} ":                 connected, // b decided on Redis
			"ratelimit.local.entries {entry} kind=log":          0,
			"ratelimit.local.entries {entry} kind=counter":      counters,
			"ratelimit.local.entries {entry} kind=bucket":       0,
			"ratelimit.local.entries {entry} kind=quota":        0,
			"ratelimit.local.entries {entry} kind=fixed_window": 0,
			"ratelimit.local.entries {entry} kind=strike":       0,
			"ratelimit.local.entries {entry} kind=ban":          0,
			"ratelimit.shield.entries {entry} ":                 0,

			"ratelimit.writeback.events {event} outcome=written": 0,
			"ratelimit.writeback.events {event} outcome=dropped": 0,
			"ratelimit.writeback.pending {event} ":               0,
			"ratelimit.fleet.instances {instance} ":              0,
			"ratelimit.leases.events {lease} op=released":        0,
			"ratelimit.leases.events {lease} op=renewed":         0,
			"ratelimit.leases.events {lease} op=lost":            0,

			"ratelimit.reservations {reservation} op=made":        0,
			"ratelimit.reservations {reservation} op=settled":     0,
			"ratelimit.reservations {reservation} op=debt":        0,
			"ratelimit.reservations.events {event} op=given_back": 0,
			"ratelimit.reservations.events {event} op=charged":    0,

			"ratelimit.prefetch.grants {grant} ":          0,
			"ratelimit.prefetch.slots {slot} op=granted":  0,
			"ratelimit.prefetch.slots {slot} op=used":     0,
			"ratelimit.prefetch.slots {slot} op=returned": 0,
		}
	}
	stopA := m.Observe(a)
	stopB := m.Observe(b)
	stopB2 := m.Observe(b) // observed twice, counted once
	assertPoints(t, collect(t, reader), gauges(3, 1))
	stopB()
	assertPoints(t, collect(t, reader), gauges(3, 1))
	stopB2()
	assertPoints(t, collect(t, reader), gauges(2, 0))
	stopA()
	if got := collect(t, reader); len(got) != 0 {
		t.Fatalf("nothing observed any more, yet %v", got)
	}
}

// TestMaxRules: rules past MaxRules are counted as OtherRule.
func TestMaxRules(t *testing.T) {
	m, reader := newMetrics(t, ratelimitotel.Options{MaxRules: 2})
	l := newLimiter(t, nil, m.Instrument(ratelimit.Options{Clock: ratelimittest.NewClock(epoch)}))
	for _, name := range []string{"a", "b", "c", "d", "a", "c"} {
		l.Allow(context.Background(), ratelimit.Rule{Name: name, Limit: ratelimit.PerMinute(10)}, "k")
	}
	l.Allow(context.Background(), ratelimit.Rule{Name: "e"}, "k") // invalid
	assertPoints(t, collect(t, reader), map[string]float64{
		decision("a", "allowed", false, false):                         2,
		decision("b", "allowed", false, false):                         1,
		decision(ratelimitotel.OtherRule, "allowed", false, false):     3,
		"ratelimit.errors {error} error.type=invalid_rule,rule=_other": 1,
		"ratelimit.decision.duration s path=local":                     6,
	})
	if _, err := ratelimitotel.New(ratelimitotel.Options{MaxRules: -1}); err == nil {
		t.Error("New accepted a negative MaxRules")
	}
}

// TestGlobalMeterProvider: without a MeterProvider, Metrics uses the
// global one.
func TestGlobalMeterProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	otel.SetMeterProvider(provider)
	m, err := ratelimitotel.New(ratelimitotel.Options{})
	if err != nil {
		t.Fatal(err)
	}

	m.OnDecision(ratelimit.Decision{Rule: ratelimit.Rule{Name: "g"}, N: 1, Path: ratelimit.PathRedis,
		Result: ratelimit.Result{Allowed: true}, Took: time.Millisecond})
	assertPoints(t, collect(t, reader), map[string]float64{
		decision("g", "allowed", false, false):     1,
		"ratelimit.decision.duration s path=redis": 1,
	})
}

// TestOutcomes: every combination of the Result flags maps to the
// documented attributes.
func TestOutcomes(t *testing.T) {
	m, reader := newMetrics(t, ratelimitotel.Options{})
	for _, r := range []ratelimit.Result{
		{Allowed: true},
		{Allowed: true, Degraded: true},
		{},
		{Degraded: true},
		{Warned: true, Violations: 2},
		{Banned: true, Violations: 3},
		{Banned: true, Degraded: true},
		{Allowed: true, DryRun: true},
		{Allowed: true, DryRun: true, Warned: true},
		{Allowed: true, DryRun: true, Banned: true, Degraded: true},
	} {
		m.OnDecision(ratelimit.Decision{Rule: ratelimit.Rule{Name: "o"}, Result: r, Path: ratelimit.PathLocal})
	}
	m.OnDecision(ratelimit.Decision{Rule: ratelimit.Rule{Name: "o"}, Peek: true, Path: ratelimit.PathShield})
	m.OnDecision(ratelimit.Decision{Rule: ratelimit.Rule{Name: "o"}, Err: context.DeadlineExceeded})
	m.OnDecision(ratelimit.Decision{Rule: ratelimit.Rule{Name: "o"}, Err: fmt.Errorf("%w: WRONGTYPE", ratelimit.ErrRedis), Path: ratelimit.PathRedis})
	m.OnDecision(ratelimit.Decision{Rule: ratelimit.Rule{Name: "o"}, Err: io.EOF})
	assertPoints(t, collect(t, reader), map[string]float64{
		decision("o", "allowed", false, false):  1,
		decision("o", "allowed", true, false):   1,
		decision("o", "rejected", false, false): 1,
		decision("o", "rejected", true, false):  1,
		decision("o", "warned", false, false):   1,
		decision("o", "banned", false, false):   1,
		decision("o", "banned", true, false):    1,
		decision("o", "rejected", false, true):  1,
		decision("o", "warned", false, true):    1,
		decision("o", "banned", true, true):     1,

		"ratelimit.errors {error} error.type=deadline_exceeded,rule=o": 1,
		"ratelimit.errors {error} error.type=redis,rule=o":             1,
		"ratelimit.errors {error} error.type=_OTHER,rule=o":            1,

		"ratelimit.decision.duration s path=local":  10,
		"ratelimit.decision.duration s path=shield": 1,
	})
}

// TestOnDecisionAllocs: once a rule has been seen, recording a decision
// allocates nothing.
func TestOnDecisionAllocs(t *testing.T) {
	m, _ := newMetrics(t, ratelimitotel.Options{})
	d := ratelimit.Decision{Rule: ratelimit.Rule{Name: "hot"}, N: 1, Path: ratelimit.PathRedis,
		Result: ratelimit.Result{Allowed: true}, Took: 300 * time.Microsecond}
	m.OnDecision(d)
	if n := testing.AllocsPerRun(1000, func() { m.OnDecision(d) }); n != 0 {
		t.Errorf("OnDecision allocates %v times per call", n)
	}
}

// TestConcurrentUse: decisions of new and known rules, observing, stopping
// and collecting all at once; the totals come out exact.
func TestConcurrentUse(t *testing.T) {
	m, reader := newMetrics(t, ratelimitotel.Options{MaxRules: 8})
	l := newLimiter(t, nil, ratelimit.Options{})
	const workers, calls = 4, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				rule := ratelimit.Rule{Name: fmt.Sprintf("r%d", (w+i)%16)}
				m.OnDecision(ratelimit.Decision{Rule: rule, Path: ratelimit.PathLocal, Result: ratelimit.Result{Allowed: true}})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			stop := m.Observe(l)
			collect(t, reader)
			stop()
		}
	}()
	wg.Wait()
	var decisions float64
	named := map[string]bool{}
	for k, v := range collect(t, reader) {
		if strings.HasPrefix(k, "ratelimit.decisions ") {
			decisions += v
			named[k[strings.LastIndex(k, "rule=")+len("rule="):]] = true
		}
	}
	if decisions != workers*calls || len(named) != 9 || !named[ratelimitotel.OtherRule] {
		t.Errorf("%v decisions of rules %v; want %d, of 8 rules and %s", decisions, named, workers*calls, ratelimitotel.OtherRule)
	}
}

// TestLeasesHeldByRule: ratelimit.leases.held counts the leases in flight
// under each Concurrency rule, over the observed limiters, and reports 0
// for a rule once its leases are all given back.
func TestLeasesHeldByRule(t *testing.T) {
	m, reader := newMetrics(t, ratelimitotel.Options{})
	clk := ratelimittest.NewClock(epoch)
	a := newLimiter(t, nil, ratelimit.Options{Clock: clk})
	b := newLimiter(t, nil, ratelimit.Options{Clock: clk})
	defer m.Observe(a)()
	defer m.Observe(b)()
	ctx := context.Background()
	exports := ratelimit.Rule{Name: "exports", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 5, Window: time.Minute}}
	partner := ratelimit.Rule{Name: "partner", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 5, Window: time.Minute}}
	var held []*ratelimit.Lease
	for _, take := range []struct {
		l    *ratelimit.Limiter
		rule ratelimit.Rule
		key  string
	}{{a, exports, "t1"}, {a, exports, "t2"}, {b, exports, "t1"}, {b, partner, "p"}} {
		le, _, err := take.l.Acquire(ctx, take.rule, take.key)
		if err != nil || le == nil {
			t.Fatalf("Acquire = %v, %v", le, err)
		}
		held = append(held, le)
	}
	points := func() map[string]float64 {
		got := map[string]float64{}
		for k, v := range collect(t, reader) {
			if strings.HasPrefix(k, "ratelimit.leases.held ") {
				got[k] = v
			}
		}
		return got
	}
	assertPoints(t, points(), map[string]float64{
		"ratelimit.leases.held {lease} rule=exports": 3,
		"ratelimit.leases.held {lease} rule=partner": 1,
	})
	for _, le := range held[2:] {
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	assertPoints(t, points(), map[string]float64{
		"ratelimit.leases.held {lease} rule=exports": 2,
		"ratelimit.leases.held {lease} rule=partner": 0,
	})
}

// TestReservations: ratelimit.reservations and ratelimit.reservations.events
// count what Stats counts of reservations; a Reserve is a decision, a
// settle is not.
func TestReservations(t *testing.T) {
	m, reader := newMetrics(t, ratelimitotel.Options{})
	l := newLimiter(t, nil, m.Instrument(ratelimit.Options{Clock: ratelimittest.NewClock(epoch)}))
	defer m.Observe(l)()
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(10)}
	a, _, err := l.Reserve(ctx, rule, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := l.Reserve(ctx, rule, "k", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Reserve(ctx, rule, "k", 1); err != nil { // stands
		t.Fatal(err)
	}
	if err := a.Settle(ctx, 1); err != nil { // 2 given back
		t.Fatal(err)
	}
	if err := b.Settle(ctx, 5); err != nil { // 3 charged
		t.Fatal(err)
	}
	got := collect(t, reader)
	want := map[string]float64{
		"ratelimit.reservations {reservation} op=made":        3,
		"ratelimit.reservations {reservation} op=settled":     2,
		"ratelimit.reservations {reservation} op=debt":        1,
		"ratelimit.reservations.events {event} op=given_back": 2,
		"ratelimit.reservations.events {event} op=charged":    3,
		decision("tokens", "allowed", false, false):           3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

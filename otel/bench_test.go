package ratelimitotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	ratelimitotel "github.com/ratelimit-go/ratelimit/otel"
	"go.opentelemetry.io/otel/metric/noop"
)

// BenchmarkOnDecision measures the hook alone, from many goroutines at once:
// with the SDK (the cost of its aggregation, shared between the goroutines)
// and with a no-op MeterProvider (the cost of the hook itself).
func BenchmarkOnDecision(b *testing.B) {
	sdk, _ := newMetrics(b, ratelimitotel.Options{})
	off, err := ratelimitotel.New(ratelimitotel.Options{MeterProvider: noop.NewMeterProvider()})
	if err != nil {
		b.Fatal(err)
	}
	d := ratelimit.Decision{Rule: ratelimit.Rule{Name: "hot"}, N: 1, Path: ratelimit.PathRedis,
		Result: ratelimit.Result{Allowed: true, Limit: 10, Remaining: 9}, Took: 300 * time.Microsecond}
	for _, c := range []struct {
		name string
		m    *ratelimitotel.Metrics
	}{{"sdk", sdk}, {"noop", off}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.m.OnDecision(d)
				}
			})
		})
	}
}

// BenchmarkAllow puts the hook's cost beside a decision's: Allow on a
// local-only limiter (the cheapest decision there is) without hooks and
// with Metrics on the SDK.
func BenchmarkAllow(b *testing.B) {
	rule := ratelimit.Rule{Name: "bench", Limit: ratelimit.PerSecond(1 << 30)}
	m, _ := newMetrics(b, ratelimitotel.Options{})
	for _, c := range []struct {
		name string
		opts ratelimit.Options
	}{{"bare", ratelimit.Options{}}, {"metrics", m.Instrument(ratelimit.Options{})}} {
		b.Run(c.name, func(b *testing.B) {
			l := newLimiter(b, nil, c.opts)
			keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := l.Allow(context.Background(), rule, keys[i%len(keys)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}

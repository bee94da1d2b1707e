package ratelimitotel_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/ratelimit-go/ratelimit"
	ratelimitotel "github.com/ratelimit-go/ratelimit/otel"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"github.com/redis/rueidis"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// A limiter's metrics on a Prometheus /metrics endpoint: the SDK's
// MeterProvider with the Prometheus exporter as its reader, Metrics on
// that provider, and the limiter's options instrumented.
func Example_prometheus() {
	// The exporter registers with a Prometheus registry, which promhttp
	// serves (prometheus.DefaultRegisterer works too). WithoutScopeInfo
	// leaves out the otel_scope_* labels that every series has otherwise.
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo())
	if err != nil {
		panic(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())

	metrics, err := ratelimitotel.New(ratelimitotel.Options{MeterProvider: provider})
	if err != nil {
		panic(err)
	}

	// An in-process Redis and a fake clock keep the example's output
	// stable; a real program connects to its own Redis.
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	opened := make(chan struct{}, 1)
	limiter, err := ratelimit.New(client, metrics.Instrument(ratelimit.Options{
		Clock: ratelimittest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)),
		// Far above the default (100ms), so that a busy test machine does
		// not turn the first call, which connects, into a degraded one.
		Timeout:    10 * time.Second,
		TripAfter:  1,
		ProbeAfter: time.Hour,
		// One process alone: no fleet to announce itself to, so
		// ratelimit_fleet_instances stays 0 (see Options.HeartbeatInterval).
		HeartbeatInterval: -1,
		Logger:            discard,
		// Hooks of your own still run: Instrument chains them.
		OnBreakerChange: func(c ratelimit.BreakerChange) {
			if c.To == ratelimit.BreakerOpen {
				opened <- struct{}{}
			}
		},
	}))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	stop := metrics.Observe(limiter)
	defer stop()

	ctx := context.Background()
	claim := ratelimit.Rule{Name: "coupon:claim", Limit: ratelimit.PerMinute(2)}
	login := ratelimit.Rule{Name: "login", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: time.Hour}}
	for range 3 {
		limiter.Allow(ctx, claim, "user-42") // allowed, allowed, rejected
	}
	for range 3 {
		limiter.Allow(ctx, login, "203.0.113.7") // allowed, warned, banned
	}
	limiter.Allow(ctx, claim, "") // an error: the key is empty
	mr.Close()                    // Redis goes away: decisions are degraded
	limiter.Allow(ctx, claim, "user-7")
	<-opened

	// Scrape the endpoint as Prometheus would, and print the limiter's
	// series but for the histogram's buckets and sums (they are timings).
	server := httptest.NewServer(promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	defer server.Close()
	resp, err := http.Get(server.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var lines []string
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "ratelimit_") && !strings.Contains(line, "_bucket{") && !strings.Contains(line, "_sum{") {
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	for _, line := range lines {
		fmt.Println(line)
	}
	// Output:
	// ratelimit_breaker_changes_total{state="open"} 1
	// ratelimit_breaker_open 1
	// ratelimit_connected 1
	// ratelimit_decision_duration_seconds_count{path="local"} 1
	// ratelimit_decision_duration_seconds_count{path="redis"} 6
	// ratelimit_decisions_total{degraded="false",dry_run="false",outcome="allowed",rule="coupon:claim"} 2
	// ratelimit_decisions_total{degraded="false",dry_run="false",outcome="allowed",rule="login"} 1
	// ratelimit_decisions_total{degraded="false",dry_run="false",outcome="banned",rule="login"} 1
	// ratelimit_decisions_total{degraded="false",dry_run="false",outcome="rejected",rule="coupon:claim"} 1
	// ratelimit_decisions_total{degraded="false",dry_run="false",outcome="warned",rule="login"} 1
	// ratelimit_decisions_total{degraded="true",dry_run="false",outcome="allowed",rule="coupon:claim"} 1
	// ratelimit_errors_total{error_type="invalid_key",rule="coupon:claim"} 1
	// ratelimit_fleet_instances 0
	// ratelimit_leases_events_total{op="lost"} 0
	// ratelimit_leases_events_total{op="released"} 0
	// ratelimit_leases_events_total{op="renewed"} 0
	// ratelimit_local_entries{kind="ban"} 1
	// ratelimit_local_entries{kind="bucket"} 0
	// ratelimit_local_entries{kind="counter"} 0
	// ratelimit_local_entries{kind="fixed_window"} 0
	// ratelimit_local_entries{kind="log"} 3
	// ratelimit_local_entries{kind="quota"} 0
	// ratelimit_local_entries{kind="strike"} 0
	// ratelimit_prefetch_grants_total 0
	// ratelimit_prefetch_slots_total{op="granted"} 0
	// ratelimit_prefetch_slots_total{op="returned"} 0
	// ratelimit_prefetch_slots_total{op="used"} 0
	// ratelimit_redis_in_use 0
	// ratelimit_reservations_events_total{op="charged"} 0
	// ratelimit_reservations_events_total{op="given_back"} 0
	// ratelimit_reservations_total{op="debt"} 0
	// ratelimit_reservations_total{op="made"} 0
	// ratelimit_reservations_total{op="settled"} 0
	// ratelimit_shield_entries 2
	// ratelimit_writeback_events_total{outcome="dropped"} 0
	// ratelimit_writeback_events_total{outcome="written"} 0
	// ratelimit_writeback_pending 1
}

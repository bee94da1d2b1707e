module github.com/ratelimit-go/ratelimit/otel

// The core's go line. OpenTelemetry v1.47 (and the Prometheus exporter
// v0.69, client_golang v1.25) need Go 1.26: stay below them while the core
// supports Go 1.25.
go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/prometheus/client_golang v1.24.1
	github.com/ratelimit-go/ratelimit v0.1.0
	github.com/redis/rueidis v1.0.79
	go.opentelemetry.io/otel v1.46.0
	go.opentelemetry.io/otel/exporters/prometheus v0.68.0
	go.opentelemetry.io/otel/metric v1.46.0
	go.opentelemetry.io/otel/sdk/metric v1.46.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.71.0 // indirect
	github.com/prometheus/otlptranslator v1.0.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/sdk v1.46.0 // indirect
	go.opentelemetry.io/otel/trace v1.46.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The core is required at the version this module is released against.
// Until that version is on the module proxy, and for `go mod tidy` and
// GOWORK=off builds (which ignore ../go.work), the copy in this repository
// stands in for it. A replace directive applies only when this module is
// the main module: it never reaches a program that depends on it.
replace github.com/ratelimit-go/ratelimit => ../

module github.com/ratelimit-go/ratelimit/rules

go 1.25.0

require (
	github.com/ratelimit-go/ratelimit v0.1.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

// The core is required at the version this module is released against.
// Until that version is on the module proxy, and for `go mod tidy` and
// GOWORK=off builds (which ignore ../go.work), the copy in this repository
// stands in for it. A replace directive applies only when this module is
// the main module: it never reaches a program that depends on it.
replace github.com/ratelimit-go/ratelimit => ../

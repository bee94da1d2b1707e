module github.com/ratelimit-go/ratelimit/grpclimit

go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/ratelimit-go/ratelimit v0.1.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260706201446-f0a921348800
	google.golang.org/grpc v1.84.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

// The core is required at the version this module is released against.
// Until that version is on the module proxy, and for `go mod tidy` and
// GOWORK=off builds (which ignore ../go.work), the copy in this repository
// stands in for it. A replace directive applies only when this module is
// the main module: it never reaches a program that depends on it.
replace github.com/ratelimit-go/ratelimit => ../

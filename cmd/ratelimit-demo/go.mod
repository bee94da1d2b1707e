module github.com/ratelimit-go/ratelimit/cmd/ratelimit-demo

go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/ratelimit-go/ratelimit v0.1.0
	github.com/ratelimit-go/ratelimit/rules v0.1.0
	github.com/redis/rueidis v1.0.79
)

require (
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

// The demo is a module of its own so that the core never requires the
// rules module or YAML. It builds against the copies in this repository,
// through ../../go.work and, for `go mod tidy` and GOWORK=off, these
// replace directives.
replace (
	github.com/ratelimit-go/ratelimit => ../../
	github.com/ratelimit-go/ratelimit/rules => ../../rules
)

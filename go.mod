module github.com/ratelimit-go/ratelimit

go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/redis/rueidis v1.0.79
	github.com/sony/gobreaker/v2 v2.4.0
	// Test only: the differential test of the GCRA kind
	// (reliability/xtime_test.go). No package of the library imports it.
	golang.org/x/time v0.15.0
)

require (
	github.com/yuin/gopher-lua v1.1.1 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

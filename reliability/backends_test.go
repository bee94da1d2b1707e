package reliability_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/conformance"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// realBackends starts one redis-server and one 3-master Redis Cluster for
// the calling test, stopped when it ends; each limiter gets a key space of
// its own. Without the binaries (or under -short) it returns none.
func realBackends(t testing.TB) []conformance.Backend {
	if !testkit.HaveRedis(t) {
		return nil
	}
	server := redistest.Start(t, redistest.Options{})
	cluster := redistest.StartCluster(t)
	return []conformance.Backend{
		{Name: "redis", New: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
			return testkit.NewLimiter(t, testkit.NewClient(t, server.Addr()), testkit.Isolated(opts))
		}, Two: func(t testing.TB, opts, other ratelimit.Options) (*ratelimit.Limiter, *ratelimit.Limiter) {
			opts = testkit.Isolated(opts)
			other.KeyPrefix = opts.KeyPrefix
			return testkit.NewLimiter(t, testkit.NewClient(t, server.Addr()), opts), testkit.NewLimiter(t, testkit.NewClient(t, server.Addr()), other)
		}},
		{Name: "cluster", New: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
			return testkit.NewLimiter(t, testkit.NewClient(t, cluster.Addrs()...), testkit.Isolated(opts))
		}, Two: func(t testing.TB, opts, other ratelimit.Options) (*ratelimit.Limiter, *ratelimit.Limiter) {
			opts = testkit.Isolated(opts)
			other.KeyPrefix = opts.KeyPrefix
			return testkit.NewLimiter(t, testkit.NewClient(t, cluster.Addrs()...), opts), testkit.NewLimiter(t, testkit.NewClient(t, cluster.Addrs()...), other)
		}},
	}
}

// TestConformance runs the behaviour suite (internal/conformance), which
// the root package runs on the local limiter and miniredis, on a real
// redis-server and a real Redis Cluster: the same tables, the same results.
func TestConformance(t *testing.T) {
	backends := realBackends(t)
	if len(backends) == 0 {
		t.Skip("no real Redis: the root package runs the suite on the local limiter and miniredis")
	}
	conformance.Run(t, backends...)
}

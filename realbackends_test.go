package ratelimit_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
)

// haveRedis reports whether redis-server and redis-cli are installed. When
// they are not, tests that need them skip (and say how to install them),
// unless RATELIMIT_REQUIRE_REDIS=1 makes that a failure.
func haveRedis(t testing.TB) bool {
	t.Helper()
	_, errServer := exec.LookPath("redis-server")
	_, errCLI := exec.LookPath("redis-cli")
	if errServer == nil && errCLI == nil {
		return true
	}
	if os.Getenv(redistest.RequireEnv) == "1" {
		redistest.Binary(t)
		redistest.CLIBinary(t)
	}
	t.Log("real-Redis backends skipped: redis-server or redis-cli not found; install them with `apt-get install redis-server redis-tools`")
	return false
}

// prefixes hands each limiter on a shared real server its own key space, so
// that every case starts from an empty store.
var prefixes atomic.Int64

func isolated(opts ratelimit.Options) ratelimit.Options {
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = fmt.Sprintf("t%d:", prefixes.Add(1))
	}
	return opts
}

// realBackends starts one redis-server and one 3-master Redis Cluster for
// the calling test, stopped when it ends.
func realBackends(t testing.TB) []backend {
	if !haveRedis(t) {
		return nil
	}
	server := redistest.Start(t, redistest.Options{})
	cluster := redistest.StartCluster(t)
	return []backend{
		{name: "redis", new: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
			return newLimiter(t, newClient(t, server.Addr()), isolated(opts))
		}},
		{name: "cluster", new: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
			return newLimiter(t, newClient(t, cluster.Addrs()...), isolated(opts))
		}},
	}
}

func dialer() net.Dialer { return net.Dialer{Timeout: time.Second} }

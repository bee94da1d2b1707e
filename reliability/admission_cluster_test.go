package reliability_test

import (
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestClusterAdmissionPerMaster: on a Redis Cluster every master gets an
// admission gate of its own, shared by the breakers of its slot ranges: a
// 3-master cluster shows three gates' bounds in Stats, where a single Redis
// shows one.
func TestClusterAdmissionPerMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	if !testkit.HaveRedis(t) {
		t.Skip("no redis-server")
	}
	cluster := redistest.StartCluster(t)
	l := testkit.NewLimiter(t, testkit.NewClient(t, cluster.Addrs()...), testkit.Options(testkit.NewClock()))
	const one = 64 // a gate's bound before it has measured anything
	testkit.Eventually(t, "three gates, one per master", func() bool { return l.Stats().AdmissionLimit == 3*one })
	if s := l.Stats(); s.InFlight != 0 {
		t.Fatalf("Stats = %+v, want nothing in flight", s)
	}

	single := redistest.Start(t, redistest.Options{})
	ls := testkit.NewLimiter(t, testkit.NewClient(t, single.Addr()), ratelimit.Options{Timeout: time.Second})
	if s := ls.Stats(); s.AdmissionLimit != one {
		t.Fatalf("a single Redis: Stats = %+v, want one gate of %d", s, one)
	}
}

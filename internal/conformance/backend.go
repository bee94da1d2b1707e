// Package conformance is the behaviour suite every backend of a Limiter
// must pass, like testing/fstest's TestFS: tables of calls at exact fake
// instants, and hammers with exact counts, run unchanged on the local
// limiter, miniredis, a real redis-server and a Redis Cluster. The root
// package's tests run it on the backends that need no server; reliability/
// runs it on real servers. Both paths must give exactly the same results.
package conformance

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// Backend makes limiters that keep their state in one kind of store.
type Backend struct {
	Name string
	// New returns a limiter on a fresh, empty store (or a key space of
	// its own), closed at cleanup.
	New func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter
	// Two, when not nil, returns two limiters on one fresh store (or key
	// space), made with opts and other (whose KeyPrefix it ignores), as two
	// processes of one fleet: what one records, the other's calls count.
	// The local limiter has none.
	Two func(t testing.TB, opts, other ratelimit.Options) (*ratelimit.Limiter, *ratelimit.Limiter)
}

// Local is the local-only limiter (no Redis).
func Local() Backend {
	return Backend{Name: "local", New: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
		return testkit.NewLimiter(t, nil, opts)
	}}
}

// Miniredis keeps state in an in-process miniredis, one per limiter.
func Miniredis() Backend {
	return Backend{Name: "miniredis", New: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
		mr := miniredis.RunT(t)
		return testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	}, Two: func(t testing.TB, opts, other ratelimit.Options) (*ratelimit.Limiter, *ratelimit.Limiter) {
		mr := miniredis.RunT(t)
		return testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts), testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), other)
	}}
}

// Run runs every suite of the package on each of backends, as subtests
// named after the suite, then the backend:
//
//	TestConformance/Behaviour/local/<case>
func Run(t *testing.T, backends ...Backend) {
	for _, s := range []struct {
		name string
		run  func(*testing.T, []Backend)
	}{
		{"Behaviour", Behaviour},
		{"EscalatingBans", EscalatingBans},
		{"Ban", Ban},
		{"DryRun", DryRun},
		{"InvalidInput", InvalidInput},
		{"AllowAll", AllowAll},
		{"AllowGroup", AllowGroup},
		{"KindsTogether", KindsTogether},
		{"FixedTogether", FixedTogether},
		{"Concurrency", Concurrency},
		{"AllowGroupHammer", AllowGroupHammer},
		{"HammerOneKey", HammerOneKey},
		{"HammerAllowN", HammerAllowN},
		{"Reserve", Reserve},
		{"ReserveHammer", ReserveHammer},
		{"Prefetch", Prefetch},
		{"PrefetchGCRA", PrefetchGCRA},
		{"ReserveAgainstModel", ReserveAgainstModel},
		{"ReserveAgainstModelOnTwo", ReserveAgainstModelOnTwo},
		{"ReserveAtExactnessBound", ReserveAtExactnessBound},
		{"ReserveFreesForEveryInstance", ReserveFreesForEveryInstance},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, backends) })
	}
}

// onTwo runs suite on each backend that makes two Limiters on one store
// (Backend.Two), as a subtest named for it, and skips the others.
func onTwo(t *testing.T, backends []Backend, suite func(t *testing.T, b Backend)) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			if b.Two == nil {
				t.Skip("needs two limiters on one store (Backend.Two)")
			}
			suite(t, b)
		})
	}
}

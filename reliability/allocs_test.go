package reliability_test

import (
	"context"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestAllocations pins the allocation targets of the Redis path, which
// unlike speed are exact: a remote Allow of every kind allocates at most
// twice (the one string that holds its keys and arguments, and rueidis'
// reply); a sliding log's allowing call once, in at most 250 bytes (its
// reply is one integer, which rueidis reads without allocating); a
// shielded one nothing (on a real redis-server: an in-process miniredis
// would count its own allocations too). The root package pins the local
// path's.
func TestAllocations(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	if !testkit.HaveRedis(t) {
		t.Skip("no real redis-server")
	}
	server := redistest.Start(t, redistest.Options{})
	remote := testkit.NewLimiter(t, testkit.NewClient(t, server.Addr()), testkit.Options(nil))
	for _, r := range []ratelimit.Rule{testkit.AllocsPlain, testkit.AllocsPenalized, testkit.AllocsGCRA, testkit.AllocsQuota} {
		if got := testkit.AllocsPerAllow(remote, r); got > 2 {
			t.Errorf("remote Allow of rule %q: %v allocations, want at most 2", r.Name, got)
		}
		t.Logf("remote Allow of rule %q: %.0f bytes a call", r.Name, testkit.BytesPerAllow(remote, r))
	}
	// A sliding log's allowing call is answered with one integer, which
	// rueidis reads without allocating: the call's one string is all.
	for _, r := range []ratelimit.Rule{testkit.AllocsPlain, testkit.AllocsPenalized} {
		if got := testkit.AllocsPerAllow(remote, r); got > 1 {
			t.Errorf("remote allowing Allow of sliding-log rule %q: %v allocations, want at most 1", r.Name, got)
		}
		if got := testkit.BytesPerAllow(remote, r); got > 250 {
			t.Errorf("remote allowing Allow of sliding-log rule %q: %.0f bytes allocated, want at most 250", r.Name, got)
		}
	}
	remote.Allow(context.Background(), testkit.AllocsFull, "k")
	if got := testkit.AllocsPerAllow(remote, testkit.AllocsFull); got != 0 {
		t.Errorf("shielded Allow: %v allocations, want 0", got)
	}
}

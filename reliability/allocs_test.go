package reliability_test

import (
	"context"
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestAllocations pins the allocation targets of the Redis path, which
// unlike speed are exact: an allowing remote Allow allocates once, the
// string that holds its keys and arguments, for a sliding log and a
// calendar quota (their reply is one integer), and twice for GCRA (and
// rueidis' reply array), in at most 250 bytes; a shielded one nothing (on
// a real redis-server: an in-process miniredis would count its own
// allocations too). The root package pins the local path's.
func TestAllocations(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	if !testkit.HaveRedis(t) {
		t.Skip("no real redis-server")
	}
	server := redistest.Start(t, redistest.Options{})
	remote := testkit.NewLimiter(t, testkit.NewClient(t, server.Addr()), testkit.Options(nil))
	// An allowing call of a sliding log or a calendar quota is answered
	// with one integer, which rueidis reads without allocating: the
	// call's one string is all (GCRA's reply is still an array).
	for _, c := range []struct {
		r      ratelimit.Rule
		allocs float64
	}{{testkit.AllocsPlain, 1}, {testkit.AllocsPenalized, 1}, {testkit.AllocsGCRA, 2}, {testkit.AllocsQuota, 1}} {
		if got := testkit.AllocsPerAllow(remote, c.r); got > c.allocs {
			t.Errorf("remote Allow of rule %q: %v allocations, want at most %v", c.r.Name, got, c.allocs)
		}
		got := testkit.BytesPerAllow(remote, c.r)
		t.Logf("remote Allow of rule %q: %.0f bytes a call", c.r.Name, got)
		if got > 250 {
			t.Errorf("remote Allow of rule %q: %.0f bytes allocated, want at most 250", c.r.Name, got)
		}
	}
	remote.Allow(context.Background(), testkit.AllocsFull, "k")
	if got := testkit.AllocsPerAllow(remote, testkit.AllocsFull); got != 0 {
		t.Errorf("shielded Allow: %v allocations, want 0", got)
	}
}

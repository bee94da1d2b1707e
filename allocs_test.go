package ratelimit_test

import (
	"testing"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestAllocations pins the allocation targets of the local path, which
// unlike speed are exact: a local Allow on a known key allocates nothing.
// reliability/ pins those of the Redis path on a real redis-server.
func TestAllocations(t *testing.T) {
	testkit.SkipAllocsUnderRace(t)
	local := testkit.NewLimiter(t, nil, ratelimit.Options{})
	for _, r := range []ratelimit.Rule{testkit.AllocsPlain, testkit.AllocsPenalized, testkit.AllocsFull, testkit.AllocsGCRA, testkit.AllocsQuota} {
		if got := testkit.AllocsPerAllow(local, r); got != 0 {
			t.Errorf("local Allow of rule %q: %v allocations, want 0", r.Name, got)
		}
	}
}

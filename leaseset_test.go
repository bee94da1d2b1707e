package ratelimit

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLeaseSetLinks adds and removes leases of a few pairs in random order,
// twice over the same leases, and checks after every step that the set
// holds exactly the leases a plain model holds: by pair (of), in all, in
// its count and by rule.
func TestLeaseSetLinks(t *testing.T) {
	pairs := []lkey{{Rule: "a", Key: "x"}, {Rule: "a", Key: "y"}, {Rule: "b", Key: "x"}}
	var leases []*Lease
	for i := range 12 {
		leases = append(leases, &Lease{u: undo{k: pairs[i%len(pairs)]}})
	}
	var s leaseSet
	model := map[*Lease]bool{}
	rnd := rand.New(rand.NewPCG(1, 2))
	for step := range 2000 {
		le := leases[rnd.IntN(len(leases))]
		if rnd.IntN(2) == 0 {
			s.add(le)
			model[le] = true
		} else {
			s.remove(le)
			delete(model, le)
		}
		n, byRule := s.len(), s.byRule()
		wantByRule := map[string]int{}
		for le := range model {
			wantByRule[le.u.k.Rule]++
		}
		if n != len(model) || len(s.all()) != len(model) {
			t.Fatalf("step %d: %d leases counted, %d listed, want %d", step, n, len(s.all()), len(model))
		}
		for _, r := range []string{"a", "b"} {
			if byRule[r] != wantByRule[r] {
				t.Fatalf("step %d: rule %q holds %d, want %d", step, r, byRule[r], wantByRule[r])
			}
		}
		for _, k := range pairs {
			var want []*Lease
			for le := range model {
				if le.u.k == k {
					want = append(want, le)
				}
			}
			got := s.of(k)
			less := func(a, b *Lease) int { return slices.Index(leases, a) - slices.Index(leases, b) }
			slices.SortFunc(got, less)
			slices.SortFunc(want, less)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: pair %v holds %d leases, want %d", step, k, len(got), len(want))
			}
		}
	}
	for _, le := range leases {
		s.remove(le)
	}
	if n, by := s.len(), s.byRule(); n != 0 || by != nil || len(s.held) != 0 {
		t.Fatalf("after removing every lease: %d held, by rule %v, %d pairs", n, by, len(s.held))
	}
}

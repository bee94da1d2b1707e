package ratelimit

import "testing"

// TestDebtCollision: a debt that gives way to another pair under the same
// hash has its events counted as dropped, as an eviction would.
func TestDebtCollision(t *testing.T) {
	s := newLocalStore(64)
	p := plan{meterFit: meterFit{rate: 10, window: 1_000_000}, alg: algSliding}
	a, b := lkey{rule: "r", key: "a"}, lkey{rule: "r", key: "b"}
	sh, h := s.at(&a)
	sh.mu.Lock()
	sh.oweEvents(&a, h, &p, nil, 100, 3, "")
	sh.oweEvents(&b, h, &p, nil, 100, 2, "") // b under a's hash
	sh.mu.Unlock()
	if got := s.owing.events.Load(); got != 2 {
		t.Fatalf("events owed %d, want 2 (b's)", got)
	}
	if got := s.owing.dropped.Load(); got != 3 {
		t.Fatalf("events dropped %d, want 3 (a's)", got)
	}
	if got := s.owing.debts.Load(); got != 1 {
		t.Fatalf("debts %d, want 1", got)
	}
}

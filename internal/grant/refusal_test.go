package grant

import (
	"testing"
	"time"
)

// TestRefused: after Redis had no slot for a request, the next waits for
// Prefetch from its sending, and with Shield until the slot frees too,
// within MaxWait from the reply; calls meanwhile are rejected only with
// Shield, told to retry at the next request and when the meter is empty.
func TestRefused(t *testing.T) {
	const sent, at = 1_000, 1_500 // the request left at 1ms, its reply came at 1.5ms
	for _, c := range []struct {
		name      string
		r         Refusal
		pausedTil int64 // Paused until then (µs)
		reject    bool
	}{
		{"no shield: Prefetch", Refusal{Sent: sent, Want: 9, Prefetch: 20_000, RetryAt: 90_000, ResetAt: 900_000}, 21_000, false},
		{"shield, a slot frees before Prefetch ends", Refusal{Sent: sent, Want: 9, Prefetch: 20_000, Shield: true, RetryAt: 5_000, ResetAt: 900_000}, 21_000, true},
		{"shield, a slot frees later", Refusal{Sent: sent, Want: 9, Prefetch: 20_000, Shield: true, RetryAt: 90_000, ResetAt: 900_000}, 90_000, true},
		{"shield, MaxWait bounds it", Refusal{Sent: sent, Want: 9, Prefetch: 20_000, Shield: true, RetryAt: 90_000, ResetAt: 900_000, MaxWait: 50_000}, 51_500, true},
		{"shield, MaxWait under Prefetch", Refusal{Sent: sent, Want: 9, Prefetch: 20_000, Shield: true, RetryAt: 90_000, ResetAt: 900_000, MaxWait: 5_000}, 21_000, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _ := newPair(terms)
			g.Refused(c.r, at)
			if !g.Paused(c.pausedTil-1) || g.Paused(c.pausedTil) {
				t.Errorf("Paused(%d) = %v, Paused(%d) = %v; want true, false", c.pausedTil-1, g.Paused(c.pausedTil-1), c.pausedTil, g.Paused(c.pausedTil))
			}
			rj, ok := g.Reject(10_000)
			if ok != c.reject {
				t.Fatalf("Reject(10ms) rejects: %v, want %v", ok, c.reject)
			}
			if !ok {
				return
			}
			want := Rejection{RetryAfter: time.Duration(max(c.pausedTil, c.r.RetryAt)-10_000) * time.Microsecond, ResetAfter: 890 * time.Millisecond}
			if rj != want {
				t.Errorf("Reject(10ms) = %+v, want %+v", rj, want)
			}
		})
	}
}

// TestPaced: a meter that frees room continuously granted fewer slots than
// asked: the next request waits until RetryAt, within MaxWait from the
// sending and Prefetch at least.
func TestPaced(t *testing.T) {
	const sent = 1_000
	for _, c := range []struct {
		name      string
		retryAt   int64
		maxWait   int64
		pausedTil int64
	}{
		{"until RetryAt", 61_000, 0, 61_000},
		{"MaxWait bounds it", 61_000, 30_000, 31_000},
		{"Prefetch at least", 61_000, 5_000, 21_000},
		{"RetryAt before the bound", 11_000, 30_000, 11_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _ := newPair(terms)
			g.Paced(Refusal{Sent: sent, Want: 40, Prefetch: 20_000, Shield: true, RetryAt: c.retryAt, ResetAt: 500_000, MaxWait: c.maxWait})
			if !g.Paused(c.pausedTil-1) || g.Paused(c.pausedTil) {
				t.Errorf("Paused(%d) = %v, Paused(%d) = %v; want true, false", c.pausedTil-1, g.Paused(c.pausedTil-1), c.pausedTil, g.Paused(c.pausedTil))
			}
			rj, ok := g.Reject(2_000)
			want := Rejection{RetryAfter: time.Duration(max(c.pausedTil, c.retryAt)-2_000) * time.Microsecond, ResetAfter: 498 * time.Millisecond}
			if !ok || rj != want {
				t.Errorf("Reject(2ms) = %+v, %v; want %+v, true", rj, ok, want)
			}
		})
	}
}

// TestWanted: a cold pair wants nothing; after a refusal with Shield, a
// pair whose calls keep coming (one rejected in the last Prefetch) asks
// again for what it wanted; a grant, or a Void, forgets it.
func TestWanted(t *testing.T) {
	r := Refusal{Sent: 0, Want: 30, Prefetch: 20_000, Shield: true, RetryAt: 40_000, ResetAt: 900_000}
	for _, c := range []struct {
		name   string
		setup  func(g *Pair[string, string])
		at     int64
		wanted int64
	}{
		{"cold", func(g *Pair[string, string]) {}, 50_000, 1},
		{"rejected 10ms ago", func(g *Pair[string, string]) { g.Refused(r, 100); g.Reject(40_000) }, 50_000, 30},
		{"rejected a Prefetch ago", func(g *Pair[string, string]) { g.Refused(r, 100); g.Reject(30_000) }, 50_000, 1},
		{"never rejected", func(g *Pair[string, string]) { g.Refused(r, 100) }, 50_000, 1},
		{"no shield", func(g *Pair[string, string]) { r := r; r.Shield = false; g.Refused(r, 100); g.Reject(40_000) }, 50_000, 1},
		{"granted since", func(g *Pair[string, string]) { g.Refused(r, 100); g.Reject(40_000); g.Granted() }, 50_000, 1},
		{"wanted 1: 2 at least", func(g *Pair[string, string]) { r := r; r.Want = 1; g.Refused(r, 100); g.Reject(40_000) }, 50_000, 2},
		{"voided", func(g *Pair[string, string]) { g.Refused(r, 100); g.Reject(40_000); g.Void() }, 50_000, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _ := newPair(terms)
			g.Roll(c.at)
			g.Allowed(1)
			c.setup(g)
			if got := g.Wanted(c.at, 20_000); got != c.wanted {
				t.Errorf("Wanted(%d) = %d, want %d", c.at, got, c.wanted)
			}
		})
	}
	g, _ := newPair(terms)
	g.Refused(r, 100)
	g.Void()
	if g.Paused(0) {
		t.Error("paused after Void: the meter is empty")
	}
	if _, ok := g.Reject(0); ok {
		t.Error("Reject after Void rejected")
	}
}

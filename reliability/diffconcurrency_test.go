package reliability_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/conformance"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// leaseModel is the reference model of a Concurrency rule, written from
// docs/concurrency.md: a lease lives TTL from when it was taken
// or last renewed; at most N live at once.
type leaseModel struct {
	n, ttl  int64
	expires map[int]int64 // live or expired leases not released, by number
}

// live returns the leases alive at now, the earliest and the latest expiry.
func (m *leaseModel) live(now int64) (count, first, last int64) {
	first = -1
	for _, e := range m.expires {
		if e > now {
			count++
			if first < 0 || e < first {
				first = e
			}
			last = max(last, e)
		}
	}
	return count, first, last
}

// result is what Acquire (peek: Peek) answers at now.
func (m *leaseModel) result(now int64, peek bool) ratelimit.Result {
	count, first, last := m.live(now)
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	r := ratelimit.Result{Limit: int(m.n)}
	switch {
	case count < m.n && peek:
		r.Allowed, r.Remaining = true, int(m.n-count)
		if count > 0 {
			r.ResetAfter = us(last - now)
		}
	case count < m.n:
		r.Allowed, r.Remaining, r.ResetAfter = true, int(m.n-count-1), us(m.ttl)
	default:
		r.RetryAfter, r.ResetAfter = us(first-now), us(last-now)
	}
	return r
}

// TestConcurrencyDifferential runs random sequences of Acquire, Release,
// Renew, Peek and time steps at exact fake-clock instants on every backend
// and compares every answer with the model.
func TestConcurrencyDifferential(t *testing.T) {
	backends := append([]conformance.Backend{conformance.Local(), conformance.Miniredis()}, realBackends(t)...)
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			for seed := uint64(1); seed <= 8; seed++ {
				rng := rand.New(rand.NewPCG(seed, 20))
				clk := testkit.NewClock()
				l := b.New(t, testkit.Options(clk))
				n := int64(1 + rng.IntN(4))
				ttl := int64(100_000 + rng.IntN(900_000)) // µs
				rule := ratelimit.Rule{Name: "diff", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: int(n), Window: time.Duration(ttl) * time.Microsecond}}
				m := &leaseModel{n: n, ttl: ttl, expires: map[int]int64{}}
				var leases []*ratelimit.Lease
				now := testkit.Epoch().UnixMicro()
				ctx := context.Background()
				for step := 0; step < 300; step++ {
					clk.Set(time.UnixMicro(now))
					switch op := rng.IntN(10); {
					case op < 4:
						le, got, err := l.Acquire(ctx, rule, "k")
						want := m.result(now, false)
						if err != nil || got != want || (le != nil) != want.Allowed {
							t.Fatalf("seed %d step %d: Acquire = %v, %+v, %v; want %+v", seed, step, le, got, err, want)
						}
						if le != nil {
							m.expires[len(leases)] = now + ttl
							leases = append(leases, le)
						}
					case op < 6 && len(leases) > 0:
						i := rng.IntN(len(leases))
						if err := leases[i].Release(ctx); err != nil {
							t.Fatalf("seed %d step %d: Release = %v", seed, step, err)
						}
						delete(m.expires, i)
					case op < 8 && len(leases) > 0:
						i := rng.IntN(len(leases))
						err := leases[i].Renew(ctx)
						e, held := m.expires[i]
						switch {
						case held && e > now:
							if err != nil {
								t.Fatalf("seed %d step %d: Renew of a live lease = %v", seed, step, err)
							}
							m.expires[i] = now + ttl
						default:
							if !errors.Is(err, ratelimit.ErrLeaseLost) {
								t.Fatalf("seed %d step %d: Renew of a lease expired or released = %v, want ErrLeaseLost", seed, step, err)
							}
							delete(m.expires, i)
						}
					case op < 9:
						got, err := l.Peek(ctx, rule, "k")
						if want := m.result(now, true); err != nil || got != want {
							t.Fatalf("seed %d step %d: Peek = %+v, %v; want %+v", seed, step, got, err, want)
						}
					default:
						now += rng.Int64N(ttl * 3 / 5)
					}
				}
			}
		})
	}
}

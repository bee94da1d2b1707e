package conformance

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// gcraModel is the exact GCRA of a sequence of events, for
// ReserveAgainstModel: the TAT over the events in arrival order, each
// reservation at what it settled for (or reserved, while it stands), TAT =
// max(TAT, t) + m·T, in exact rationals. It knows nothing of how the
// library keeps reservations.
type gcraModel struct {
	t      *big.Rat // the emission interval, in µs
	burst  int64
	events []modelEvent
}

type modelEvent struct {
	at int64 // µs since testkit.Epoch
	m  int64
}

func (g *gcraModel) tat() *big.Rat {
	var tat *big.Rat
	for _, e := range g.events {
		at := new(big.Rat).SetInt64(e.at)
		if tat == nil || tat.Cmp(at) < 0 {
			tat = at
		}
		tat = new(big.Rat).Add(tat, new(big.Rat).Mul(g.t, new(big.Rat).SetInt64(e.m)))
	}
	return tat
}

// ceil returns ceil(x) for x >= 0.
func ceil(x *big.Rat) int64 {
	q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// decide is what a call for n events (peek: one, recording nothing) at now
// answers, and records it when it is allowed and not a peek.
func (g *gcraModel) decide(now, n int64, peek bool) ratelimit.Result {
	tat := g.tat()
	ahead := new(big.Rat)
	if tat != nil && tat.Cmp(new(big.Rat).SetInt64(now)) > 0 {
		ahead.Sub(tat, new(big.Rat).SetInt64(now))
	}
	used := ceil(new(big.Rat).Quo(ahead, g.t))
	asked := n
	if peek {
		asked = 1
	}
	res := ratelimit.Result{Limit: int(g.burst), Remaining: int(max(0, g.burst-used))}
	if used+asked > g.burst {
		retry := new(big.Rat).Add(ahead, new(big.Rat).Mul(g.t, new(big.Rat).SetInt64(asked-g.burst)))
		res.RetryAfter = time.Duration(max(1, ceil(retry))) * time.Microsecond
		res.ResetAfter = time.Duration(ceil(ahead)) * time.Microsecond
		return res
	}
	res.Allowed = true
	if !peek {
		g.events = append(g.events, modelEvent{at: now, m: n})
		ahead.Add(ahead, new(big.Rat).Mul(g.t, new(big.Rat).SetInt64(n)))
		res.Remaining -= int(n)
	}
	res.ResetAfter = time.Duration(ceil(ahead)) * time.Microsecond
	return res
}

// ReserveAgainstModel runs random sequences of AllowN, Peek, Reserve,
// Settle (for less, as much and more) and Cancel on GCRA buckets of
// random sizes and emission intervals (whole µs and not), at random times,
// and compares every Result with the exact model (gcraModel): exactly the
// same, on every backend. Where the backend has Two, a second limiter on
// the same store, which makes no call of its own (its own count is empty),
// peeks after every step: the store's state alone must be the model's. A
// failure prints the seed and the steps.
func ReserveAgainstModel(t *testing.T, backends []Backend) {
	const sequences, steps = 40, 60
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			for seed := uint64(1); seed <= sequences; seed++ {
				rng := rand.New(rand.NewPCG(seed, 29))
				rate := 1 + rng.IntN(12)
				window := []time.Duration{time.Second, 7 * time.Second, 1000003 * time.Microsecond, time.Minute}[rng.IntN(4)]
				burst := 1 + rng.IntN(16)
				rule := gcra(fmt.Sprintf("model-%d", seed), rate, window, burst)
				g := &gcraModel{t: big.NewRat(window.Microseconds(), int64(rate)), burst: int64(burst)}
				emit := float64(window.Microseconds()) / float64(rate)
				clk := testkit.NewClock()
				var l, other *ratelimit.Limiter
				if b.Two != nil {
					// The other's shield is off: it would answer from a
					// rejection it cached before a give-back it cannot see
					// (see Reservation.Settle).
					peeker := testkit.Options(clk)
					peeker.ShieldMax = -1
					l, other = b.Two(t, testkit.Options(clk), peeker)
				} else {
					l = b.New(t, testkit.Options(clk))
				}
				type held struct {
					r     *ratelimit.Reservation
					event int // its index among the model's events
				}
				var open []held
				var log []string
				now := int64(0)
				fail := func(format string, args ...any) {
					t.Helper()
					t.Fatalf("seed %d (%d per %v, burst %d): %s; steps:\n%s", seed, rate, window, burst, fmt.Sprintf(format, args...), strings.Join(log, "\n"))
				}
				for range steps {
					switch rng.IntN(3) {
					case 0:
						now += int64(rng.Float64() * emit * float64(1+rng.IntN(burst+2)))
					case 1:
						now += int64(emit) * int64(rng.IntN(3))
					}
					clk.Set(testkit.Epoch().Add(time.Duration(now) * time.Microsecond))
					n := 1 + rng.IntN(burst)
					switch op := rng.IntN(10); {
					case op < 3 || op < 7 && len(open) == 0:
						want := g.decide(now, int64(n), false)
						r, res, err := l.Reserve(ctx, rule, "k", n)
						log = append(log, fmt.Sprintf("%dµs: Reserve(%d) = %+v, %v", now, n, res, err))
						if err != nil || res != want || (r != nil) != want.Allowed {
							fail("Reserve(%d) at %dµs = %+v, %v; model %+v", n, now, res, err, want)
						}
						if r != nil {
							open = append(open, held{r: r, event: len(g.events) - 1})
						}
					case op < 7:
						i := rng.IntN(len(open))
						h := open[i]
						open = append(open[:i], open[i+1:]...)
						reserved := int64(h.r.Reserved())
						var actual int64
						switch rng.IntN(4) {
						case 0:
							actual = 0
						case 1:
							actual = rng.Int64N(reserved + 1)
						case 2:
							actual = reserved
						default:
							actual = reserved + rng.Int64N(int64(burst)*2+1)
						}
						err := h.r.Settle(ctx, int(actual))
						log = append(log, fmt.Sprintf("%dµs: Settle(%d of %d, event %d) = %v", now, actual, reserved, h.event, err))
						if err != nil {
							fail("Settle(%d) = %v", actual, err)
						}
						if actual <= reserved {
							g.events[h.event].m = actual
						} else {
							g.events = append(g.events, modelEvent{at: now, m: actual - reserved})
						}
					case op < 9:
						want := g.decide(now, int64(n), false)
						res, err := l.AllowN(ctx, rule, "k", n)
						log = append(log, fmt.Sprintf("%dµs: AllowN(%d) = %+v, %v", now, n, res, err))
						if err != nil || res != want {
							fail("AllowN(%d) at %dµs = %+v, %v; model %+v", n, now, res, err, want)
						}
					default:
						want := g.decide(now, 1, true)
						res, err := l.Peek(ctx, rule, "k")
						log = append(log, fmt.Sprintf("%dµs: Peek = %+v, %v", now, res, err))
						if err != nil || res != want {
							fail("Peek at %dµs = %+v, %v; model %+v", now, res, err, want)
						}
					}
					if other != nil {
						want := g.decide(now, 1, true)
						if res, err := other.Peek(ctx, rule, "k"); err != nil || res != want {
							fail("the other limiter's Peek at %dµs = %+v, %v; model %+v", now, res, err, want)
						}
					}
				}
			}
		})
	}
}

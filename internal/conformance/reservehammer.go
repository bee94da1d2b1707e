package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// reserveHammerKinds are the rules of every kind that takes reservations,
// each allowing exactly capacity events at one instant.
func reserveHammerKinds(capacity int) []struct {
	name string
	rule ratelimit.Rule
} {
	return []struct {
		name string
		rule ratelimit.Rule
	}{
		{"log/", ratelimit.Rule{Limit: ratelimit.PerMinute(capacity)}},
		{"approximate/", ratelimit.Rule{Limit: ratelimit.PerMinute(capacity), Approximate: true}},
		{"quota/", ratelimit.Rule{Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: capacity, Period: ratelimit.Day}}},
		{"fixed/", ratelimit.Rule{Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: capacity, Window: time.Hour}}},
		{"gcra/", ratelimit.Rule{Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Hour, Burst: capacity}}},
	}
}

// measuring returns r with a capacity 1000 times r's, under r's name and
// otherwise the same: it counts the events r's pair holds at an instant,
// however far past r's limit (Remaining is its capacity less them; a
// bucket's Burst grows, its emission interval stays).
func measuring(r ratelimit.Rule) ratelimit.Rule {
	if r.Kind == ratelimit.GCRA {
		r.Limit.Burst *= 1000
	} else {
		r.Limit.Rate *= 1000
	}
	return r
}

// reserveOp is one call of the reserve hammer, ordered by a counter read
// before it started and after it returned: it took effect in between.
type reserveOp struct {
	start, end int64
	settle     bool  // a Settle or Cancel that returned nil; otherwise an allowed Reserve
	n          int64 // a Reserve's events
	back, more int64 // what a settle gave back, or charged
}

// ReserveHammer sends goroutines at one key at one fake instant, for every
// kind that takes reservations: each reserves 1 to 4 events, and settles
// what it got for less, as much or more (up to 2n + 2), cancels it, settles
// it twice or never. Afterwards the pair counts exactly what the
// reservations kept: the actual of those settled, the n of the others (a
// rule of the same name with a far larger Rate reads the count, debts
// included). Every allowed Reserve fitted under the Rate given what had
// surely happened before it: the events of the reserves and the extras of
// the settles that had returned before it started, less what the settles
// that had started before it returned gave back (so that at the end the
// events kept are at most Rate plus the extras charged). Stats counts
// every reservation, settle, event given back and charged.
func ReserveHammer(t *testing.T, backends []Backend) {
	const goroutines, perGoroutine, rate = 48, 5, 60
	for _, b := range backends {
		for _, kind := range reserveHammerKinds(rate) {
			t.Run(b.Name+"/"+kind.name, func(t *testing.T) {
				l := b.New(t, testkit.Options(testkit.NewClock()))
				rule := kind.rule
				rule.Name = "reserve-hammer"
				ctx := context.Background()
				var (
					clock                                     atomic.Int64
					mu                                        sync.Mutex
					ops                                       []reserveOp
					kept, unsettled, rejected, settled, debts atomic.Int64
					givenBack, charged                        atomic.Int64
				)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(g), 29))
						var mine []reserveOp
						defer func() {
							mu.Lock()
							ops = append(ops, mine...)
							mu.Unlock()
						}()
						<-start
						for range perGoroutine {
							n := 1 + rng.IntN(4)
							op := reserveOp{start: clock.Add(1), n: int64(n)}
							r, res, err := l.Reserve(ctx, rule, "hot", n)
							op.end = clock.Add(1)
							if err != nil || res.Degraded || (r != nil) != res.Allowed {
								t.Errorf("Reserve(%d) = %v, %+v, %v", n, r, res, err)
								return
							}
							if r == nil {
								rejected.Add(1)
								continue
							}
							mine = append(mine, op)
							var actual int
							switch x := rng.IntN(20); {
							case x < 3: // never settled
								kept.Add(int64(n))
								unsettled.Add(1)
								continue
							case x < 7:
								actual = 0
							case x < 12:
								actual = rng.IntN(n)
							case x < 15:
								actual = n
							default:
								actual = n + 1 + rng.IntN(n+2)
							}
							s := reserveOp{settle: true, start: clock.Add(1)}
							if actual == 0 && rng.IntN(2) == 0 {
								err = r.Cancel(ctx)
							} else {
								err = r.Settle(ctx, actual)
							}
							s.end = clock.Add(1)
							if err != nil {
								t.Errorf("Settle(%d) of a reservation of %d = %v", actual, n, err)
								return
							}
							s.back, s.more = max(0, int64(n-actual)), max(0, int64(actual-n))
							mine = append(mine, s)
							kept.Add(int64(actual))
							settled.Add(1)
							givenBack.Add(s.back)
							charged.Add(s.more)
							if s.more > 0 {
								debts.Add(1)
							}
							if rng.IntN(5) == 0 { // settled twice
								if err := r.Settle(ctx, actual); !errors.Is(err, ratelimit.ErrSettled) {
									t.Errorf("a second Settle = %v, want ErrSettled", err)
								}
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				if t.Failed() {
					return
				}
				m := measuring(rule)
				r, err := l.Peek(ctx, m, "hot")
				if err != nil {
					t.Fatal(err)
				}
				if got := int64(r.Limit - r.Remaining); got != kept.Load() {
					t.Errorf("the pair counts %d events; the reservations kept %d (%d unsettled)", got, kept.Load(), unsettled.Load())
				}
				if err := fitted(ops, rate); err != nil {
					t.Error(err)
				}
				if rejected.Load() == 0 {
					t.Errorf("no Reserve was rejected: the hammer never met the limit")
				}
				allowed := int64(goroutines*perGoroutine) - rejected.Load()
				s := l.Stats()
				want := ratelimit.Stats{Reservations: uint64(allowed), ReservationsSettled: uint64(settled.Load()),
					ReservedGivenBack: uint64(givenBack.Load()), ReservedCharged: uint64(charged.Load()), ReservationDebts: uint64(debts.Load())}
				got := ratelimit.Stats{Reservations: s.Reservations, ReservationsSettled: s.ReservationsSettled,
					ReservedGivenBack: s.ReservedGivenBack, ReservedCharged: s.ReservedCharged, ReservationDebts: s.ReservationDebts}
				if got != want {
					t.Errorf("Stats' reservations:\n got %+v\nwant %+v", got, want)
				}
				t.Logf("%d reserves allowed, %d rejected; %d settled (%d events given back, %d charged), %d unsettled; the pair counts %d",
					allowed, rejected.Load(), settled.Load(), givenBack.Load(), charged.Load(), unsettled.Load(), kept.Load())
			})
		}
	}
}

// fitted checks that every allowed Reserve among ops fitted under rate
// given what had surely happened before it (see ReserveHammer).
func fitted(ops []reserveOp, rate int64) error {
	for _, r := range ops {
		if r.settle {
			continue
		}
		var before int64
		for _, o := range ops {
			if o.end < r.start {
				before += o.n + o.more // a Reserve's events, a settle's extra
			}
			if o.settle && o.start < r.end {
				before -= o.back
			}
		}
		if before+r.n > rate {
			return fmt.Errorf("a Reserve of %d (calls %d..%d) was allowed with at least %d events counted: more than the Rate %d", r.n, r.start, r.end, before, rate)
		}
	}
	return nil
}

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
				h := &reserveHammer{l: b.New(t, testkit.Options(testkit.NewClock())), rule: kind.rule}
				h.rule.Name = "reserve-hammer"
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						h.run(t, g, perGoroutine, start)
					}()
				}
				close(start)
				wg.Wait()
				if t.Failed() {
					return
				}
				h.check(t, goroutines*perGoroutine, rate)
			})
		}
	}
}

// reserveHammer is what ReserveHammer's goroutines share: the limiter and
// the rule, the counter that orders their calls, the calls that took
// effect, and the tallies the pair and Stats are checked against.
type reserveHammer struct {
	l     *ratelimit.Limiter
	rule  ratelimit.Rule
	clock atomic.Int64
	mu    sync.Mutex
	ops   []reserveOp
	// kept is the events the reservations kept; unsettled, rejected,
	// settled and debts count reservations; givenBack and charged, events.
	kept, unsettled, rejected, settled, debts atomic.Int64
	givenBack, charged                        atomic.Int64
}

// run is goroutine g of the hammer: once start is closed, it reserves and
// settles perGoroutine times (reserveAndSettle), its random choices seeded
// by g, and stops at the first error. Its calls that took effect join
// h.ops as it returns.
func (h *reserveHammer) run(t *testing.T, g, perGoroutine int, start <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(g), 29))
	var mine []reserveOp
	defer func() {
		h.mu.Lock()
		h.ops = append(h.ops, mine...)
		h.mu.Unlock()
	}()
	<-start
	for range perGoroutine {
		ops, ok := h.reserveAndSettle(t, rng)
		mine = append(mine, ops...)
		if !ok {
			return
		}
	}
}

// reserveAndSettle reserves 1 to 4 events on the key "hot" and, when the
// reservation is allowed, leaves it unsettled (three times in twenty) or
// settles it (settle) for none, fewer, as many or more (up to 2n + 2). It
// returns the calls that took effect, and false after an error of t.
func (h *reserveHammer) reserveAndSettle(t *testing.T, rng *rand.Rand) ([]reserveOp, bool) {
	n := 1 + rng.IntN(4)
	op := reserveOp{start: h.clock.Add(1), n: int64(n)}
	r, res, err := h.l.Reserve(context.Background(), h.rule, "hot", n)
	op.end = h.clock.Add(1)
	if err != nil || res.Degraded || (r != nil) != res.Allowed {
		t.Errorf("Reserve(%d) = %v, %+v, %v", n, r, res, err)
		return nil, false
	}
	if r == nil {
		h.rejected.Add(1)
		return nil, true
	}
	var actual int
	switch x := rng.IntN(20); {
	case x < 3: // never settled
		h.kept.Add(int64(n))
		h.unsettled.Add(1)
		return []reserveOp{op}, true
	case x < 7:
		actual = 0
	case x < 12:
		actual = rng.IntN(n)
	case x < 15:
		actual = n
	default:
		actual = n + 1 + rng.IntN(n+2)
	}
	s, ok := h.settle(t, rng, r, n, actual)
	if !ok {
		return []reserveOp{op}, false
	}
	return []reserveOp{op, s}, true
}

// settle settles r, a reservation of n events, for actual (when that is
// none, half the time by Cancel), tallies it, and one time in five settles
// it again, which must be ErrSettled. It returns the settle's call, and
// false when it failed (an error of t).
func (h *reserveHammer) settle(t *testing.T, rng *rand.Rand, r *ratelimit.Reservation, n, actual int) (reserveOp, bool) {
	ctx := context.Background()
	s := reserveOp{settle: true, start: h.clock.Add(1)}
	var err error
	if actual == 0 && rng.IntN(2) == 0 {
		err = r.Cancel(ctx)
	} else {
		err = r.Settle(ctx, actual)
	}
	s.end = h.clock.Add(1)
	if err != nil {
		t.Errorf("Settle(%d) of a reservation of %d = %v", actual, n, err)
		return s, false
	}
	s.back, s.more = max(0, int64(n-actual)), max(0, int64(actual-n))
	h.kept.Add(int64(actual))
	h.settled.Add(1)
	h.givenBack.Add(s.back)
	h.charged.Add(s.more)
	if s.more > 0 {
		h.debts.Add(1)
	}
	if rng.IntN(5) == 0 { // settled twice
		if err := r.Settle(ctx, actual); !errors.Is(err, ratelimit.ErrSettled) {
			t.Errorf("a second Settle = %v, want ErrSettled", err)
		}
	}
	return s, true
}

// check checks, after the hammer (calls Reserves in all), that the pair
// counts exactly what the reservations kept (read by measuring), that
// every allowed Reserve fitted under rate (fitted), that some Reserve was
// rejected, and that Stats counts the reservations as tallied.
func (h *reserveHammer) check(t *testing.T, calls, rate int64) {
	ctx := context.Background()
	r, err := h.l.Peek(ctx, measuring(h.rule), "hot")
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(r.Limit - r.Remaining); got != h.kept.Load() {
		t.Errorf("the pair counts %d events; the reservations kept %d (%d unsettled)", got, h.kept.Load(), h.unsettled.Load())
	}
	if err := fitted(h.ops, rate); err != nil {
		t.Error(err)
	}
	if h.rejected.Load() == 0 {
		t.Errorf("no Reserve was rejected: the hammer never met the limit")
	}
	allowed := calls - h.rejected.Load()
	s := h.l.Stats()
	want := ratelimit.Stats{Reservations: uint64(allowed), ReservationsSettled: uint64(h.settled.Load()),
		ReservedGivenBack: uint64(h.givenBack.Load()), ReservedCharged: uint64(h.charged.Load()), ReservationDebts: uint64(h.debts.Load())}
	got := ratelimit.Stats{Reservations: s.Reservations, ReservationsSettled: s.ReservationsSettled,
		ReservedGivenBack: s.ReservedGivenBack, ReservedCharged: s.ReservedCharged, ReservationDebts: s.ReservationDebts}
	if got != want {
		t.Errorf("Stats' reservations:\n got %+v\nwant %+v", got, want)
	}
	t.Logf("%d reserves allowed, %d rejected; %d settled (%d events given back, %d charged), %d unsettled; the pair counts %d",
		allowed, h.rejected.Load(), h.settled.Load(), h.givenBack.Load(), h.charged.Load(), h.unsettled.Load(), h.kept.Load())
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

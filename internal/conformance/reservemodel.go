package conformance

import (
	"context"
	"errors"
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
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			for seed := uint64(1); seed <= 40; seed++ {
				rng := rand.New(rand.NewPCG(seed, 29))
				rate := 1 + rng.IntN(12)
				window := []time.Duration{time.Second, 7 * time.Second, 1000003 * time.Microsecond, time.Minute}[rng.IntN(4)]
				burst := 1 + rng.IntN(16)
				runReserveModel(t, b, gcra(fmt.Sprintf("model-%d", seed), rate, window, burst), seed, 60, false)
			}
		})
	}
}

// ReserveAtExactnessBound runs ReserveAgainstModel's sequences on buckets
// at the largest size the rule check admits (Burst × Window/gcd just below
// 2^52 ticks, a full bucket up to 2^50µs), with reservations and settles
// (up to MaxSettleFactor × Burst) near the Burst: every number a
// reservation's record or a settle computes must stay exact as a double in
// Lua (see internal/meter's reserved), and every Result must be the model's.
func ReserveAtExactnessBound(t *testing.T, backends []Backend) {
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			for i, c := range []struct {
				rate   int
				window time.Duration
			}{
				{7, (1<<30 + 1) * time.Microsecond},               // T = 153391689⅐µs
				{1<<31 - 1, (1<<21 - 1) * time.Microsecond},       // 2^31-1 is prime: rq = Rate
				{1_000_003, 3 * time.Second},                      // a prime rate per second
				{999_983, (1<<52/999_983 - 1) * time.Microsecond}, // Burst 1 admits the largest wq
			} {
				g := new(big.Int).GCD(nil, nil, big.NewInt(c.window.Microseconds()), big.NewInt(int64(c.rate))).Int64()
				wq, rq := c.window.Microseconds()/g, int64(c.rate)/g
				burst := min(int64(1<<31-1), (1<<52)/wq)
				for burst > 1 && burst*wq/rq > 1<<50 {
					burst /= 2
				}
				runReserveModel(t, b, gcra(fmt.Sprintf("bound-%d", i), c.rate, c.window, int(burst)), uint64(i+1), 80, false)
			}
		})
	}
}

// ReserveAgainstModelOnTwo runs ReserveAgainstModel's sequences with
// every Reserve and AllowN made on either of two limiters of one store
// (Backend.Two), at random, their shields off (a cached rejection does not
// see a give-back on the other instance, see Reservation.Settle): a
// give-back on one instance is free for the next call on the other, and
// every Result is the model's. The emission interval is a whole number of
// µs: a process' copy of the bucket holds Redis' TAT rounded up to a whole
// µs (see meter.Bucket.CopyFrom), so that with a fractional interval its
// own count may be one token more, and its retry 1µs longer, than Redis'
// (ReserveAgainstModel covers such intervals on one limiter). Before the
// GCRA give-back mark (lua/gcra.lua) seed 3 (5 per 7s, burst 10) failed
// on every backend: the other limiter's Peek at 39.76s said Remaining 7
// where the model had 10.
func ReserveAgainstModelOnTwo(t *testing.T, backends []Backend) {
	onTwo(t, backends, func(t *testing.T, b Backend) {
		for seed := uint64(1); seed <= 40; seed++ {
			rng := rand.New(rand.NewPCG(seed, 29))
			rate := []int{1, 2, 4, 5, 8, 10}[rng.IntN(6)] // divides each window's µs
			window := []time.Duration{time.Second, 7 * time.Second, time.Minute}[rng.IntN(3)]
			burst := 1 + rng.IntN(16)
			runReserveModel(t, b, gcra(fmt.Sprintf("two-%d", seed), rate, window, burst), seed, 60, true)
		}
	})
}

// runReserveModel runs one random sequence of steps calls on rule (a GCRA
// rule) under the seed, on b, against the model (see ReserveAgainstModel;
// with two, ReserveAgainstModelOnTwo).
func runReserveModel(t *testing.T, b Backend, rule ratelimit.Rule, seed uint64, steps int, two bool) {
	t.Helper()
	clk := testkit.NewClock()
	m := newReserveModelRun(t, b, clk, rule, seed, two)
	for range steps {
		m.advance()
		clk.Set(testkit.Epoch().Add(time.Duration(m.now) * time.Microsecond))
		n := m.size()
		switch op := m.rng.IntN(10); {
		case op < 3 || op < 5 && len(m.open) == 0:
			m.reserve(n)
		case op < 5:
			m.settle()
		case op < 9:
			m.allowN(n)
		default:
			m.peek()
		}
		if m.other != nil {
			want := m.g.decide(m.now, 1, true)
			if res, err := m.other.Peek(context.Background(), rule, "k"); err != nil || res != want {
				m.fail("the other limiter's Peek at %dµs = %+v, %v; model %+v", m.now, res, err, want)
			}
		}
	}
}

// reserveModelRun is one run of runReserveModel: the limiters, the model,
// the random sources of the steps, and what the run has done so far.
type reserveModelRun struct {
	t    *testing.T
	rule ratelimit.Rule
	seed uint64
	two  bool
	// l decides the steps (with two, l or other, at random: see on); other,
	// where the backend has Two, peeks after each.
	l, other *ratelimit.Limiter
	g        *gcraModel
	rng      *rand.Rand // the steps
	pick     *rand.Rand // with two, the limiter of each step
	emit     float64    // the emission interval, in µs
	most     int64      // the most a settle may charge
	open     []heldReservation
	log      []string
	now      int64 // µs since testkit.Epoch
}

// heldReservation is a reservation of a reserveModelRun not settled yet.
type heldReservation struct {
	r     *ratelimit.Reservation
	event int // its index among the model's events
}

// newReserveModelRun makes the limiters of a run of rule on b, on the
// clock clk, and its empty model, its steps drawn from seed: with two, both
// limiters of b.Two decide, their shields off; otherwise, where b has Two,
// the first decides and the second, its shield off, only peeks.
func newReserveModelRun(t *testing.T, b Backend, clk ratelimit.Clock, rule ratelimit.Rule, seed uint64, two bool) *reserveModelRun {
	t.Helper()
	rate, window, burst := rule.Limit.Rate, rule.Limit.Window, rule.Limit.Burst
	m := &reserveModelRun{
		t: t, rule: rule, seed: seed, two: two,
		g:    &gcraModel{t: big.NewRat(window.Microseconds(), int64(rate)), burst: int64(burst)},
		rng:  rand.New(rand.NewPCG(seed, 31)),
		pick: rand.New(rand.NewPCG(seed, 37)),
		emit: float64(window.Microseconds()) / float64(rate),
		// The most a settle may charge: MaxSettleFactor × Burst, and no more
		// than the tokens refilled in 2^50µs (see MaxSettleFactor).
		most: min(ratelimit.MaxSettleFactor*int64(burst), new(big.Int).Quo(new(big.Int).Mul(big.NewInt(1<<50), big.NewInt(int64(rate))), big.NewInt(window.Microseconds())).Int64()),
	}
	if b.Two != nil {
		// The other's shield is off: it would answer from a rejection it
		// cached before a give-back it cannot see (see
		// Reservation.Settle).
		peeker := testkit.Options(clk)
		peeker.ShieldMax = -1
		first := testkit.Options(clk)
		if two {
			first.ShieldMax = -1
		}
		m.l, m.other = b.Two(t, first, peeker)
	} else {
		m.l = b.New(t, testkit.Options(clk))
	}
	return m
}

// fail ends the test with what failed, the run's rule and seed, and the
// steps so far.
func (m *reserveModelRun) fail(format string, args ...any) {
	m.t.Helper()
	lim := m.rule.Limit
	m.t.Fatalf("seed %d (%d per %v, burst %d): %s; steps:\n%s", m.seed, lim.Rate, lim.Window, lim.Burst, fmt.Sprintf(format, args...), strings.Join(m.log, "\n"))
}

// advance moves the run's time on, at random: by up to a full bucket's
// refill, by 0 to 2 emission intervals, or not at all.
func (m *reserveModelRun) advance() {
	switch m.rng.IntN(3) {
	case 0:
		// Up to a full bucket's refill, while the clock stays within
		// 35 years of the epoch (as TestGCRAAtItsExactnessBound).
		if m.now < 1<<50 {
			m.now += int64(m.rng.Float64() * m.emit * float64(1+m.rng.IntN(m.rule.Limit.Burst+2)))
		}
	case 1:
		m.now += int64(m.emit) * int64(m.rng.IntN(3))
	}
}

// size draws the events of a step's call: up to the Burst, near it, or
// few, so that several reservations are outstanding at once.
func (m *reserveModelRun) size() int {
	burst := m.rule.Limit.Burst
	n := 1 + m.rng.IntN(burst)
	switch m.rng.IntN(4) {
	case 0:
		n = burst - m.rng.IntN(min(burst, 3)) // near the Burst
	case 1:
		n = 1 + m.rng.IntN(burst/8+1) // small: several outstanding at once
	}
	return n
}

// on is the limiter that decides a step: with two, either, at random.
func (m *reserveModelRun) on() *ratelimit.Limiter {
	if m.two && m.pick.IntN(2) == 0 {
		return m.other
	}
	return m.l
}

// reserve reserves n events, checks the Result against the model's, and
// holds the reservation when it is allowed.
func (m *reserveModelRun) reserve(n int) {
	m.t.Helper()
	want := m.g.decide(m.now, int64(n), false)
	r, res, err := m.on().Reserve(context.Background(), m.rule, "k", n)
	m.log = append(m.log, fmt.Sprintf("%dµs: Reserve(%d) = %+v, %v", m.now, n, res, err))
	if err != nil || res != want || (r != nil) != want.Allowed {
		m.fail("Reserve(%d) at %dµs = %+v, %v; model %+v", n, m.now, res, err, want)
	}
	if r != nil {
		m.open = append(m.open, heldReservation{r: r, event: len(m.g.events) - 1})
	}
}

// settle settles one of the held reservations, at random, for what actual
// draws, and has the model count what it settled for: in place of the
// reservation, or, for more, the extra as an event of now. Where the
// reservation is the model's event 3 modulo 7, a Settle of one more than
// the most comes first, and must be ErrInvalidN.
func (m *reserveModelRun) settle() {
	m.t.Helper()
	ctx := context.Background()
	i := m.rng.IntN(len(m.open))
	h := m.open[i]
	m.open = append(m.open[:i], m.open[i+1:]...)
	reserved := int64(h.r.Reserved())
	actual := m.actual(reserved)
	if h.event%7 == 3 {
		if err := h.r.Settle(ctx, int(m.most)+1); !errors.Is(err, ratelimit.ErrInvalidN) {
			m.fail("Settle(%d), one more than the most = %v; want ErrInvalidN", m.most+1, err)
		}
	}
	err := h.r.Settle(ctx, int(actual))
	m.log = append(m.log, fmt.Sprintf("%dµs: Settle(%d of %d, event %d) = %v", m.now, actual, reserved, h.event, err))
	if err != nil {
		m.fail("Settle(%d) = %v", actual, err)
	}
	if actual <= reserved {
		m.g.events[h.event].m = actual
	} else {
		m.g.events = append(m.g.events, modelEvent{at: m.now, m: actual - reserved})
	}
}

// actual draws what a reservation of reserved events settles for: none,
// fewer, as many, more, or the most a settle may charge (as many, where the
// bucket is decades in debt already).
func (m *reserveModelRun) actual(reserved int64) int64 {
	switch m.rng.IntN(5) {
	case 0:
		return 0
	case 1:
		return m.rng.Int64N(reserved + 1)
	case 2:
		return reserved
	case 3:
		return min(m.most, reserved+m.rng.Int64N(int64(m.rule.Limit.Burst)*2+1))
	default:
		if tat := m.g.tat(); tat != nil && tat.Cmp(big.NewRat(m.now+1<<50, 1)) > 0 {
			return reserved // a debt of decades already: more would pile past what Durations hold
		}
		return m.most // the most a settle may charge
	}
}

// allowN makes an AllowN of n events and checks the Result against the
// model's.
func (m *reserveModelRun) allowN(n int) {
	m.t.Helper()
	want := m.g.decide(m.now, int64(n), false)
	res, err := m.on().AllowN(context.Background(), m.rule, "k", n)
	m.log = append(m.log, fmt.Sprintf("%dµs: AllowN(%d) = %+v, %v", m.now, n, res, err))
	if err != nil || res != want {
		m.fail("AllowN(%d) at %dµs = %+v, %v; model %+v", n, m.now, res, err, want)
	}
}

// peek makes a Peek on the first limiter and checks the Result against the
// model's.
func (m *reserveModelRun) peek() {
	m.t.Helper()
	want := m.g.decide(m.now, 1, true)
	res, err := m.l.Peek(context.Background(), m.rule, "k")
	m.log = append(m.log, fmt.Sprintf("%dµs: Peek = %+v, %v", m.now, res, err))
	if err != nil || res != want {
		m.fail("Peek at %dµs = %+v, %v; model %+v", m.now, res, err, want)
	}
}

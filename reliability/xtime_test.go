package reliability_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestGCRAVersusXTimeRate checks the GCRA kind against an implementation
// nobody here wrote: golang.org/x/time/rate, whose AllowN(t, n) takes the
// time, so the comparison is deterministic. Both are the same token bucket
// (tokens = Burst - debt/T, a call for n passes iff tokens >= n; a
// rejection costs nothing), x/time/rate in float64 tokens, this library in
// exact integer ticks. Seeded random sequences (rates, windows whose
// emission interval is not a whole µs, bursts, n > 1, whole-µs clock moves
// that land on, just before and just after a token's refill) must give the
// same Allowed at every step, except within 1µs of a refill: where they
// differ, either this library says the call passes in 1µs (RetryAfter <=
// 1µs) or x/time/rate's tokens are short of n by at most 1µs of refill.
// Such a step starts both afresh. Remaining must equal x/time/rate's whole
// tokens after the call, outside the same 1µs.
//
//	go test -run TestGCRAVersusXTimeRate -xtime.n=100000 ./reliability
var (
	xtimeN    = flag.Int("xtime.n", 3000, "GCRA versus x/time/rate: number of random sequences")
	xtimeSeed = flag.Uint64("xtime.seed", 20261123, "GCRA versus x/time/rate: seed of the first sequence")
)

type xtimeStep struct {
	d time.Duration // clock move before the call
	n int
}

func TestGCRAVersusXTimeRate(t *testing.T) {
	ctx := context.Background()
	var calls, rejected, nearRefill int
	for i := 0; i < *xtimeN; i++ {
		seed := *xtimeSeed + uint64(i)
		rng := rand.New(rand.NewPCG(seed, 0x7a7e))
		r := 1 + rng.IntN(50)
		window := time.Duration(1+rng.IntN(3_000_000)) * time.Microsecond
		if rng.IntN(4) == 0 {
			window = time.Duration(1+rng.IntN(5)) * time.Second
		}
		burst := 1 + rng.IntN(20)
		rule := ratelimit.Rule{Name: "x", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: r, Window: window, Burst: burst}}
		emit := float64(window.Microseconds()) / float64(r) // µs per token
		perSecond := rate.Limit(float64(r) / window.Seconds())

		clk := testkit.NewClock()
		l := testkit.NewLimiter(t, nil, testkit.Options(clk))
		ref := rate.NewLimiter(perSecond, burst)
		now := testkit.Epoch()
		segment := 0
		var steps []string
		for j := 0; j < 120; j++ {
			var d time.Duration
			switch x := rng.IntN(10); {
			case x < 3:
				d = time.Duration(rng.IntN(3)) * time.Microsecond
			case x < 7: // onto a refill: a whole number of emission intervals, and 1µs either side
				k := 1 + rng.IntN(3)
				d = time.Duration(math.Round(float64(k)*emit)+float64(rng.IntN(3)-1)) * time.Microsecond
			case x < 9:
				d = time.Duration(rng.Int64N(int64(float64(burst)*emit)+1)) * time.Microsecond
			default:
				d = time.Duration(rng.Int64N(int64(2*window/time.Microsecond)+1)) * time.Microsecond
			}
			n := 1
			if rng.IntN(4) == 0 {
				n = 1 + rng.IntN(burst)
			}
			now = now.Add(max(d, 0))
			clk.Set(now)
			key := fmt.Sprintf("k%d", segment)
			got, err := l.AllowN(ctx, rule, key, n)
			if err != nil {
				t.Fatalf("seed %d: AllowN: %v", seed, err)
			}
			want := ref.AllowN(now, n)
			tokens := ref.TokensAt(now)
			calls++
			if !want {
				rejected++
			}
			steps = append(steps, fmt.Sprintf("  +%v AllowN(%d): ours allowed=%v remaining=%d retry=%v reset=%v; x/time/rate allowed=%v tokens=%.9f",
				d, n, got.Allowed, got.Remaining, got.RetryAfter, got.ResetAfter, want, tokens))
			oneMicro := float64(perSecond) * 1e-6 // tokens refilled in 1µs
			if got.Allowed != want {
				short := float64(n) - ref.TokensAt(now) // x/time/rate, rejected: tokens it lacked
				if (!got.Allowed && got.RetryAfter <= time.Microsecond) || (got.Allowed && short <= oneMicro+1e-9) {
					nearRefill++
					segment++ // the states now differ by this call: start both afresh
					ref = rate.NewLimiter(perSecond, burst)
					continue
				}
				t.Fatalf("seed %d (%d per %v, burst %d): step %d: allowed %v, x/time/rate %v, beyond 1µs of a refill; steps:\n%s",
					seed, r, window, burst, j, got.Allowed, want, strings.Join(steps, "\n"))
			}
			whole := math.Floor(tokens + 1e-9)
			if frac := tokens - math.Floor(tokens); frac < 1-oneMicro-1e-9 && frac > oneMicro+1e-9 || frac == 0 {
				if got.Remaining != int(whole) {
					t.Fatalf("seed %d (%d per %v, burst %d): step %d: Remaining %d, x/time/rate has %.9f tokens; steps:\n%s",
						seed, r, window, burst, j, got.Remaining, tokens, strings.Join(steps, "\n"))
				}
			}
		}
		l.Close()
	}
	t.Logf("%d sequences, %d calls (%d rejected by x/time/rate): Allowed identical at all but %d calls, each within 1µs of a refill",
		*xtimeN, calls, rejected, nearRefill)
}

// TestGCRAAtItsExactnessBound runs buckets at the largest size the rule
// check admits (Burst × Window/gcd just below 2^52 ticks; a Rate of
// 2^31-1 with a Window coprime to it) on the local path, on a real
// redis-server (whose Lua numbers are doubles, and which prints them with
// %.14g) and on the exact model (big.Rat, diffkinds_test.go): every Result
// must be the same, at times far from the epoch and with tokens taken in
// amounts near the Burst. One token more than the bound is ErrInvalidRule.
func TestGCRAAtItsExactnessBound(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	server := redistest.Start(t, redistest.Options{})
	client := testkit.NewClient(t, server.Addr())
	ctx := context.Background()
	for _, c := range []struct {
		rate   int
		window time.Duration
	}{
		{7, (1<<30 + 1) * time.Microsecond},               // T = 153391689⅐µs, a full bucket is 20 years
		{1<<31 - 1, (1<<21 - 1) * time.Microsecond},       // 2^31-1 is prime: rq = Rate
		{1_000_003, 3 * time.Second},                      // a prime rate per second
		{999_983, (1<<52/999_983 - 1) * time.Microsecond}, // Burst 1 admits the largest wq
	} {
		g := new(big.Int).GCD(nil, nil, big.NewInt(c.window.Microseconds()), big.NewInt(int64(c.rate))).Int64()
		wq := c.window.Microseconds() / g
		burst := int(min(int64(1<<31-1), (1<<52)/wq))
		for burst > 1 && int64(burst)*wq/(int64(c.rate)/g) > 1<<50 {
			burst /= 2
		}
		rule := ratelimit.Rule{Name: fmt.Sprintf("bound-%d", c.rate), Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: c.rate, Window: c.window, Burst: burst}}
		t.Run(rule.Name, func(t *testing.T) {
			if err := rule.Validate(); err != nil {
				t.Fatalf("the largest Burst: %v", err)
			}
			if over := rule; int64(burst) == (1<<52)/wq {
				over.Limit.Burst++
				if err := over.Validate(); !errors.Is(err, ratelimit.ErrInvalidRule) {
					t.Fatalf("one token beyond the bound: %v, want ErrInvalidRule", err)
				}
			}
			lc, rc := testkit.NewClock(), testkit.NewClock()
			local := testkit.NewLimiter(t, nil, testkit.Options(lc))
			remote := testkit.NewLimiter(t, client, testkit.Isolated(testkit.Options(rc)))
			model := pureModel()
			rng := rand.New(rand.NewPCG(uint64(c.rate), 7))
			emit := float64(c.window.Microseconds()) / float64(c.rate)
			now := testkit.Epoch()
			for i := 0; i < 2000; i++ {
				switch rng.IntN(4) {
				case 0:
					// Up to a full bucket's refill, while the clock stays
					// within 35 years of the epoch: times themselves are
					// exact in Lua only below 2^53µs (the year 2255).
					if now.Sub(testkit.Epoch()) < (1<<50)*time.Microsecond {
						now = now.Add(time.Duration(rng.Float64()*emit*float64(1+rng.IntN(burst))) * time.Microsecond)
					}
				case 1:
					now = now.Add(time.Duration(math.Round(emit*float64(1+rng.IntN(3)))+float64(rng.IntN(3)-1)) * time.Microsecond)
				}
				lc.Set(now)
				rc.Set(now)
				n := 1 + rng.IntN(burst)
				if rng.IntN(3) == 0 {
					n = burst - rng.IntN(min(burst, 3))
				}
				peek := rng.IntN(5) == 0
				var lr, rr ratelimit.Result
				var lerr, rerr error
				if peek {
					lr, lerr = local.Peek(ctx, rule, "k")
					rr, rerr = remote.Peek(ctx, rule, "k")
				} else {
					lr, lerr = local.AllowN(ctx, rule, "k", n)
					rr, rerr = remote.AllowN(ctx, rule, "k", n)
				}
				mr := model.decide(rule, "k", now, int64(n), peek)
				if peek {
					mr = model.decide(rule, "k", now, 1, true)
				}
				if lerr != nil || rerr != nil || lr != rr || rr != mr {
					t.Fatalf("step %d at %v, n=%d peek=%v:\nlocal %+v %v\nredis %+v %v\nmodel %+v",
						i, now.Sub(testkit.Epoch()), n, peek, lr, lerr, rr, rerr, mr)
				}
			}
		})
	}
}

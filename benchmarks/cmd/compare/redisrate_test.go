package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/ratelimit-go/ratelimit"
)

// TestDecisionsMatchRedisRate checks a GCRA rule against an implementation
// nobody here wrote: go-redis/redis_rate v10, on the same redis-server, with
// the same call sequences. Both read Redis' TIME (our limiter has no Clock).
//
// Each configuration (rate per window, burst, the AllowN sizes) gets a
// seeded random walk of calls: each one is planned, in exact arithmetic (a
// model of GCRA in whole microseconds), at least gcraPlanMargin away from
// any instant where an answer could change (a call becoming allowed,
// Remaining stepping). Both limiters are then called back to back, and the
// step is compared if the instant the calls actually read the clock
// (measured around them) is still clear of every such instant by more than
// the uncertainty of those readings: a call the machine delayed is checked
// where it really happened, not where it was planned. There both must
// agree: Allowed identical, and the same Remaining when redis_rate's
// meaning is ours (allowed calls, and rejected single calls; redis_rate
// reports 0 on every rejection), except where redis_rate's floats round it
// down (see compareStep). RetryAfter (on rejections; redis_rate gives -1
// when it allows) and ResetAfter must name the same instant within 1 ms:
// the two calls read TIME a little apart, so the difference of the
// durations may also be as large as the time between the calls (and a
// rejection our hot-key shield repeats counts from when the reply it
// repeats came back, up to one round trip later).
//
// A call that landed too close to such an instant is not compared; if it
// was allowed, the two buckets may now differ by a hair, so the walk starts
// again on a fresh key (at most gcraAttempts times). No speed is asserted.
func TestDecisionsMatchRedisRate(t *testing.T) {
	e := testRedis(t)
	// Our limiter has default Options, and notes where each decision was
	// made: a rejection the hot-key shield answers counts its RetryAfter
	// from when the rejection it repeats came back, not from Redis' TIME.
	var paths sync.Map // rule name + " " + key → the Path of its last decision
	opts := ourOptions()
	opts.OnDecision = func(d ratelimit.Decision) { paths.Store(d.Rule.Name+" "+d.Key, d.Path) }
	client, err := rueidisClient(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close) // the subtests run in parallel, after this function returns
	ours, err := ratelimit.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ours.Close() })
	lastPath := func(rule, key string) ratelimit.Path {
		p, _ := paths.Load(rule + " " + key)
		return p.(ratelimit.Path)
	}
	rdb := goRedisClient(e.addr)
	t.Cleanup(func() { rdb.Close() })
	rr := redis_rate.NewLimiter(rdb)
	// Load both scripts and open the connections first, so that no step
	// pays for a NOSCRIPT retry or a dial between the two calls.
	warm := ratelimit.Rule{Name: "xc-warm", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1, Window: time.Second, Burst: 1}}
	if _, err := ours.Allow(context.Background(), warm, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := rr.Allow(context.Background(), "xc-warm:k", redis_rate.PerSecond(1)); err != nil {
		t.Fatal(err)
	}

	configs := []gcraConfig{
		{rate: 10, window: time.Second, burst: 10, ns: []int{1}},                         // T = 100 ms, Burst = Rate
		{rate: 10, window: time.Second, burst: 1, ns: []int{1}},                          // strict spacing
		{rate: 5, window: time.Second, burst: 3, ns: []int{1}},                           // T = 200 ms
		{rate: 10, window: time.Second, burst: 8, ns: []int{1, 2, 3, 5}},                 // AllowN
		{rate: 20, window: 3 * time.Second, burst: 4, ns: []int{1, 2, 4}},                // T = 150 ms, n = Burst
		{rate: 7, window: 700 * time.Millisecond, burst: 6, ns: []int{1, 1, 1, 2, 3, 6}}, // T = 100 ms
	}
	for i, c := range configs {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel() // the calls mostly sleep; in parallel the test takes seconds
			seed := uint64(i + 1)
			rule := ratelimit.Rule{Name: fmt.Sprintf("xc%d", i), Kind: ratelimit.GCRA,
				Limit: ratelimit.Limit{Rate: c.rate, Window: c.window, Burst: c.burst}}
			limit := redis_rate.Limit{Rate: c.rate, Period: c.window, Burst: c.burst}
			mine, theirs := oursCaller(ours, rule, lastPath), redisRateCaller(rr, limit, rule.Name+":")
			for attempt := 1; ; attempt++ {
				w := &gcraWalk{t: t, c: c, ours: mine, theirs: theirs, key: fmt.Sprintf("k%d", attempt),
					rng: rand.New(rand.NewPCG(seed, 0x6c7261))}
				spoiled := w.run()
				if spoiled == "" {
					if w.allowed < 3 || w.denied < 3 {
						t.Fatalf("seed %d: %d allowed and %d rejected calls compared; the walk should test both answers", seed, w.allowed, w.denied)
					}
					t.Logf("seed %d: %d allowed and %d rejected calls compared (%d of ours by the shield; %d too close to a boundary to compare); RetryAfter/ResetAfter differ by at most %v, of which at most %v is not explained by when the two calls read the clock; redis_rate's Remaining rounded down on a full bucket %d times",
						seed, w.allowed, w.denied, w.shielded, w.skipped, w.worst, w.unexplained, w.roundedDown)
					return
				}
				if attempt == gcraAttempts {
					t.Fatalf("seed %d: every attempt was spoiled, the last by %s", seed, spoiled)
				}
				t.Logf("seed %d, attempt %d: %s; again on a fresh key", seed, attempt, spoiled)
			}
		})
	}

	t.Run("AllowN beyond Burst", func(t *testing.T) {
		// redis_rate rejects such a call forever (RetryAfter grows with n);
		// ours refuses it as invalid input.
		rule := ratelimit.Rule{Name: "xc-big", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: time.Second, Burst: 4}}
		if _, err := ours.AllowN(context.Background(), rule, "k", 5); !errors.Is(err, ratelimit.ErrInvalidN) {
			t.Fatalf("AllowN(5) with Burst 4: err %v, want ErrInvalidN", err)
		}
	})
}

const (
	// gcraPlanMargin is how far each call is planned, in exact arithmetic,
	// from an instant where an answer changes.
	gcraPlanMargin = 15 * time.Millisecond
	// gcraSafety is what a call's actual reading of the clock must keep
	// from such an instant, beyond the uncertainty of the readings.
	gcraSafety = time.Millisecond
	// gcraSteps is the number of calls of each walk.
	gcraSteps = 32
	// gcraAttempts bounds the walks of a configuration a busy machine
	// spoiled.
	gcraAttempts = 6
)

// gcraConfig is one limit both limiters enforce, and the sizes its AllowN
// calls are drawn from (each at most burst).
type gcraConfig struct {
	rate   int
	window time.Duration
	burst  int
	ns     []int
}

func (c gcraConfig) String() string {
	return fmt.Sprintf("%d per %v burst %d n %v", c.rate, c.window, c.burst, strings.Trim(fmt.Sprint(c.ns), "[]"))
}

// gcraModel is GCRA in exact integer microseconds, to place the calls of a
// walk away from the instants where an answer changes and to tell whether a
// call landed clear of them. The test compares the two limiters with each
// other; that redis_rate also agrees with the model on every compared call
// checks the test itself.
type gcraModel struct {
	t, burst int64 // the emission interval (µs) and the burst
	tat      int64 // the theoretical arrival time (µs)
	has      bool  // a call has been allowed
}

// decide returns whether AllowN(n) at now (µs) is allowed, and how far now
// is from the nearest instant where the decision or the Remaining of an
// allowed call would differ.
func (m *gcraModel) decide(now int64, n int) (allowed bool, margin int64) {
	if !m.has {
		return true, 1 << 62
	}
	tat := max(m.tat, now)
	allowed = tat+int64(n)*m.t-m.burst*m.t <= now
	// Allowed switches at tat + (n - burst)·T; Remaining of an allowed call
	// steps at tat - k·T for k >= 0.
	margin = abs64(now - (m.tat + (int64(n)-m.burst)*m.t))
	if now >= m.tat {
		margin = min(margin, now-m.tat)
	} else {
		d := (m.tat - now) % m.t
		margin = min(margin, d, m.t-d)
	}
	return allowed, margin
}

func (m *gcraModel) allow(now int64, n int) {
	m.tat = max(m.tat, now) + int64(n)*m.t
	m.has = true
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// gcraAnswer is what the comparison reads of either limiter's answer.
type gcraAnswer struct {
	allowed                bool
	limit, remaining       int
	retryAfter, resetAfter time.Duration
	shielded               bool // ours only: the hot-key shield answered
}

// gcraCaller makes one AllowN(n) call on key.
type gcraCaller func(ctx context.Context, key string, n int) (gcraAnswer, error)

// oursCaller calls rule on our limiter; a decision made without Redis is
// an error here. lastPath tells where the call was decided.
func oursCaller(l *ratelimit.Limiter, rule ratelimit.Rule, lastPath func(rule, key string) ratelimit.Path) gcraCaller {
	return func(ctx context.Context, key string, n int) (gcraAnswer, error) {
		r, err := l.AllowN(ctx, rule, key, n)
		if err != nil {
			return gcraAnswer{}, err
		}
		path := lastPath(rule.Name, key)
		if r.Degraded || (path != ratelimit.PathRedis && path != ratelimit.PathShield) {
			return gcraAnswer{}, fmt.Errorf("decided without Redis (%v)", path)
		}
		return gcraAnswer{r.Allowed, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter, path == ratelimit.PathShield}, nil
	}
}

// redisRateCaller calls limit on redis_rate, under prefix.
func redisRateCaller(l *redis_rate.Limiter, limit redis_rate.Limit, prefix string) gcraCaller {
	return func(ctx context.Context, key string, n int) (gcraAnswer, error) {
		r, err := l.AllowN(ctx, prefix+key, limit, n)
		if err != nil {
			return gcraAnswer{}, err
		}
		return gcraAnswer{r.Allowed > 0, limit.Burst, r.Remaining, r.RetryAfter, r.ResetAfter, false}, nil
	}
}

// gap bounds the time between two readings of the clock: ours, then
// redis_rate's, each during its own call, both between a0 (before ours)
// and b1 (after theirs), so redis_rate's came 0 to b1-a0 after ours.
type gap struct{ lo, hi time.Duration }

// gcraWalk is one attempt at a configuration: a walk of gcraSteps calls
// on key, and what it found.
type gcraWalk struct {
	t            *testing.T
	c            gcraConfig
	ours, theirs gcraCaller
	key          string
	rng          *rand.Rand

	m         gcraModel
	anchor    gap   // between the two readings at the bucket's last anchor
	anchorErr int64 // µs: how far the model's TAT may be from either limiter's
	// lastTrip is how long our last call decided on Redis took: a
	// rejection the shield repeats counts from when that reply came back,
	// up to that much after Redis read its clock.
	lastTrip time.Duration

	allowed, denied, skipped int           // steps compared, and not
	shielded                 int           // our rejections the shield answered
	roundedDown              int           // redis_rate's Remaining one under the exact value
	worst, unexplained       time.Duration // largest |ours - theirs|, and what the readings do not account for
}

// run walks gcraSteps calls and reports every disagreement. It returns ""
// or why the walk had to stop: an allowed call that landed too close to an
// instant where an answer changes, after which the two buckets need not be
// the same to the microsecond.
func (w *gcraWalk) run() string {
	ctx := context.Background()
	emission := w.c.window / time.Duration(w.c.rate)
	w.m = gcraModel{t: emission.Microseconds(), burst: int64(w.c.burst)}
	start := time.Now()
	var plan time.Duration
	for i := range gcraSteps {
		// Half the calls come back to back, the others up to 1.5
		// emission intervals later, so that the bucket runs dry and
		// refills; each is moved on until it is clear of every boundary.
		if w.rng.IntN(2) != 0 {
			plan += time.Duration(w.rng.Int64N(int64(3*emission/2/time.Millisecond))) * time.Millisecond
		}
		n := w.c.ns[w.rng.IntN(len(w.c.ns))]
		plan = max(plan, time.Since(start).Truncate(time.Millisecond)+time.Millisecond)
		for {
			if _, margin := w.m.decide(plan.Microseconds(), n); margin >= gcraPlanMargin.Microseconds() {
				break
			}
			plan += 3 * time.Millisecond
		}
		time.Sleep(time.Until(start.Add(plan)))
		a0 := time.Now()
		o, err := w.ours(ctx, w.key, n)
		a1 := time.Now()
		if err != nil {
			w.t.Fatalf("step %d: ours: %v", i, err)
		}
		shieldLag := time.Duration(0)
		if o.shielded {
			shieldLag = w.lastTrip
			w.shielded++
		} else {
			w.lastTrip = a1.Sub(a0)
		}
		r, err := w.theirs(ctx, w.key, n)
		b1 := time.Now()
		if err != nil {
			w.t.Fatalf("step %d: redis_rate: %v", i, err)
		}
		// Both readings lie within half the bracket of its middle.
		now := (a0.Sub(start) + b1.Sub(start)) / 2
		spread := b1.Sub(a0)/2 + time.Duration(w.anchorErr)*time.Microsecond + gcraSafety
		modelAllowed, margin := w.m.decide(now.Microseconds(), n)
		where := fmt.Sprintf("step %d (AllowN(%d) at %v)", i, n, now.Round(time.Microsecond))
		if margin <= spread.Microseconds() {
			w.skipped++
			if o.allowed != r.allowed || r.allowed {
				return fmt.Sprintf("%s, %v from a boundary (readings uncertain by %v), allowed by ours %v and by redis_rate %v", where, time.Duration(margin)*time.Microsecond, spread, o.allowed, r.allowed)
			}
			continue // rejected by both: neither bucket changed
		}
		if modelAllowed != r.allowed {
			w.t.Errorf("%s: redis_rate Allowed %v where exact GCRA says %v", where, r.allowed, modelAllowed)
		}
		anchor := r.allowed && (!w.m.has || w.m.tat <= now.Microseconds())
		if r.allowed {
			w.m.allow(now.Microseconds(), n)
			w.allowed++
		} else {
			w.denied++
		}
		readings := gap{0, b1.Sub(a0)}
		if anchor {
			w.anchor, w.anchorErr = readings, (b1.Sub(a0) / 2).Microseconds()
		}
		w.compareStep(where, n, anchor, readings, shieldLag, o, r)
	}
	return ""
}

// compareStep reports where o (ours) and r (redis_rate) disagree at one
// step, whose readings of the clock were readings apart; a shield's
// answer may count up to shieldLag later.
//
// RetryAfter and ResetAfter count from each limiter's own reading of the
// clock up to an instant fixed by its bucket's last anchor (the allowed
// call that found the bucket full, which set the TAT to its now + n·T). So
// ours - theirs = (their reading at this call - ours) - (their reading at
// the anchor - ours) + the difference of the algorithms, which must stay
// within 1 ms.
func (w *gcraWalk) compareStep(where string, n int, anchor bool, readings gap, shieldLag time.Duration, o, r gcraAnswer) {
	t, burst := w.t, w.c.burst
	if o.allowed != r.allowed {
		t.Errorf("%s: ours Allowed %v, redis_rate %v (%+v)", where, o.allowed, r.allowed, r)
		return
	}
	if o.limit != burst {
		t.Errorf("%s: ours Limit %d, want Burst %d", where, o.limit, burst)
	}
	switch {
	case anchor:
		// On a full bucket Remaining is burst - n exactly. redis_rate
		// computes it as a difference of float seconds near 3e8 divided
		// by T, which can land just under the integer and be cut to one
		// less (seen on a fresh key: 8 for Burst 10).
		if o.remaining != burst-n || (r.remaining != burst-n && r.remaining != burst-n-1) {
			t.Errorf("%s: on a full bucket ours Remaining %d, redis_rate %d; want %d (redis_rate may say one less)", where, o.remaining, r.remaining, burst-n)
		}
		if r.remaining != o.remaining {
			w.roundedDown++
		}
	case (o.allowed || n == 1) && o.remaining != r.remaining:
		t.Errorf("%s: ours Remaining %d, redis_rate %d", where, o.remaining, r.remaining)
	}
	// The difference the readings explain: now - anchor, or exactly 0 at
	// the anchor itself (both durations then count from the same reading).
	explained := gap{readings.lo - w.anchor.hi, readings.hi - w.anchor.lo}
	if anchor {
		explained = gap{}
	}
	explained.hi += shieldLag
	sameInstant := func(name string, mine, their time.Duration) {
		d := mine - their
		w.worst = max(w.worst, d, -d)
		off := max(explained.lo-d, d-explained.hi, 0)
		w.unexplained = max(w.unexplained, off)
		if off > time.Millisecond {
			t.Errorf("%s: ours %s %v, redis_rate %v: they differ by %v, %v more than the readings of the clock explain ([%v, %v]); at most 1 ms may differ",
				where, name, mine, their, d, off, explained.lo, explained.hi)
		}
	}
	if !o.allowed {
		sameInstant("RetryAfter", o.retryAfter, r.retryAfter)
	}
	sameInstant("ResetAfter", o.resetAfter, r.resetAfter)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
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
// seeded random schedule of calls at whole milliseconds, built so that in
// exact arithmetic no call comes within gcraMargin of an instant where
// either answer could change (a call becoming allowed, Remaining stepping).
// At each step both limiters are called back to back and must agree:
// Allowed identical, and the same Remaining when redis_rate's meaning is
// ours (allowed calls, and rejected single calls; redis_rate reports 0 on
// every rejection), except where redis_rate's floats round it down (see
// runSchedule). RetryAfter (on rejections; redis_rate gives -1 when it
// allows) and ResetAfter must name the same instant within 1 ms: the two
// calls read TIME a little apart, so the difference of the durations may
// also be as large as the time between the calls, which the test measures
// around them.
//
// A step that finishes later than gcraMargin after its due time (a busy
// machine) makes the schedule no longer boundary-safe: that attempt is
// dropped and the configuration runs again on a fresh key, up to
// gcraAttempts times. No speed is asserted.
func TestDecisionsMatchRedisRate(t *testing.T) {
	e := testRedis(t)
	lim, closeFn, err := openOurs(e.addr, spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn) // the subtests run in parallel, after this function returns
	ours := lim.(*ours).l
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
			steps, allowed := c.schedule(seed)
			if allowed < 3 || len(steps)-allowed < 3 {
				t.Fatalf("seed %d: the schedule allows %d of %d calls; it should test both answers", seed, allowed, len(steps))
			}
			t.Logf("seed %d: %d of %d calls allowed, the last at %v", seed, allowed, len(steps), steps[len(steps)-1].at)
			rule := ratelimit.Rule{Name: fmt.Sprintf("xc%d", i), Kind: ratelimit.GCRA,
				Limit: ratelimit.Limit{Rate: c.rate, Window: c.window, Burst: c.burst}}
			limit := redis_rate.Limit{Rate: c.rate, Period: c.window, Burst: c.burst}
			mine, theirs := oursCaller(ours, rule), redisRateCaller(rr, limit, rule.Name+":")
			for attempt := 1; ; attempt++ {
				key := fmt.Sprintf("k%d", attempt)
				late, ok := runSchedule(t, mine, theirs, c.burst, key, steps)
				if ok {
					return
				}
				if attempt == gcraAttempts {
					t.Fatalf("seed %d: every attempt had a call finish %v or more after its due time (allowed: < %v); the machine is too busy for a boundary-safe schedule", seed, late, gcraMargin)
				}
				t.Logf("seed %d, attempt %d: a call finished %v after its due time; again on a fresh key", seed, attempt, late)
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
	// gcraMargin is how far every call of a schedule stays, in exact
	// arithmetic, from an instant where an answer changes.
	gcraMargin = 20 * time.Millisecond
	// gcraSteps is the number of calls of each schedule.
	gcraSteps = 32
	// gcraAttempts bounds the reruns of a schedule a busy machine spoiled.
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

// gcraStep is one call of a schedule: AllowN(n) at start + at.
type gcraStep struct {
	at     time.Duration
	n      int
	anchor bool // allowed on a full bucket: it sets the TAT from its own now
}

// gcraModel is GCRA in exact integer microseconds, only to place the calls
// of a schedule away from the instants where an answer changes; the test
// compares the two limiters with each other, not with it.
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

// schedule draws gcraSteps calls: half back to back with the previous one,
// the others up to 1.5 emission intervals later (so that the bucket runs
// dry and refills), each moved on by 3 ms until it is gcraMargin away from
// every instant where an answer changes. It also returns how many of them
// are allowed.
func (c gcraConfig) schedule(seed uint64) (steps []gcraStep, allowed int) {
	rng := rand.New(rand.NewPCG(seed, 0x6c7261))
	emission := c.window / time.Duration(c.rate)
	m := gcraModel{t: emission.Microseconds(), burst: int64(c.burst)}
	var at time.Duration
	for len(steps) < gcraSteps {
		if rng.IntN(2) != 0 {
			at += time.Duration(rng.Int64N(int64(3*emission/2/time.Millisecond))) * time.Millisecond
		}
		n := c.ns[rng.IntN(len(c.ns))]
		var anchor bool
		for {
			ok, margin := m.decide(at.Microseconds(), n)
			if margin >= gcraMargin.Microseconds() {
				anchor = ok && (!m.has || m.tat <= at.Microseconds())
				if ok {
					m.allow(at.Microseconds(), n)
					allowed++
				}
				break
			}
			at += 3 * time.Millisecond
		}
		steps = append(steps, gcraStep{at: at, n: n, anchor: anchor})
	}
	return steps, allowed
}

// gcraAnswer is what the comparison reads of either limiter's answer.
type gcraAnswer struct {
	allowed                bool
	limit, remaining       int
	retryAfter, resetAfter time.Duration
}

// gcraCaller makes one AllowN(n) call on key.
type gcraCaller func(ctx context.Context, key string, n int) (gcraAnswer, error)

// oursCaller calls rule on our limiter; a decision made without Redis is
// an error here.
func oursCaller(l *ratelimit.Limiter, rule ratelimit.Rule) gcraCaller {
	return func(ctx context.Context, key string, n int) (gcraAnswer, error) {
		r, err := l.AllowN(ctx, rule, key, n)
		if err == nil && r.Degraded {
			err = errors.New("decided without Redis")
		}
		return gcraAnswer{r.Allowed, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter}, err
	}
}

// redisRateCaller calls limit on redis_rate, under prefix.
func redisRateCaller(l *redis_rate.Limiter, limit redis_rate.Limit, prefix string) gcraCaller {
	return func(ctx context.Context, key string, n int) (gcraAnswer, error) {
		r, err := l.AllowN(ctx, prefix+key, limit, n)
		if err != nil {
			return gcraAnswer{}, err
		}
		return gcraAnswer{r.Allowed > 0, limit.Burst, r.Remaining, r.RetryAfter, r.ResetAfter}, nil
	}
}

// gap bounds the time between two readings of the clock: ours read Redis'
// TIME during [a0, a1] and redis_rate during [b0, b1], so its reading came
// b0-a1 to b1-a0 after ours.
type gap struct{ lo, hi time.Duration }

func gapOf(a0, a1, b0, b1 time.Time) gap { return gap{b0.Sub(a1), b1.Sub(a0)} }

// runSchedule calls both limiters at each step of steps on key, ours
// first, and reports every disagreement. It returns false, with the
// lateness, when a step finished gcraMargin or more after its due time,
// and stops there.
//
// RetryAfter and ResetAfter count from each limiter's own reading of the
// clock up to an instant fixed by its bucket's last anchor (the allowed
// call that found the bucket full, which set the TAT to its now + n·T). So
// ours - theirs = (their reading at this call - ours) - (their reading at
// the anchor - ours) + the difference of the algorithms, which must stay
// within 1 ms.
func runSchedule(t *testing.T, ours, theirs gcraCaller, burst int, key string, steps []gcraStep) (time.Duration, bool) {
	t.Helper()
	ctx := context.Background()
	var worst, unexplained time.Duration // largest |ours - theirs|, and what the readings do not account for
	var anchor gap
	roundedDown := 0 // redis_rate's Remaining one under the exact value on a full bucket
	start := time.Now()
	for i, st := range steps {
		due := start.Add(st.at)
		time.Sleep(time.Until(due))
		a0 := time.Now()
		o, err := ours(ctx, key, st.n)
		a1 := time.Now()
		if err != nil {
			t.Fatalf("step %d: ours: %v", i, err)
		}
		r, err := theirs(ctx, key, st.n)
		b1 := time.Now()
		if err != nil {
			t.Fatalf("step %d: redis_rate: %v", i, err)
		}
		if late := b1.Sub(due); late >= gcraMargin {
			return late, false
		}
		now := gapOf(a0, a1, a1, b1) // redis_rate's call started when ours ended
		// The difference the readings explain: now - anchor, or exactly 0
		// at the anchor itself (both durations then count from the same
		// reading).
		explained := gap{now.lo - anchor.hi, now.hi - anchor.lo}
		if st.anchor {
			anchor, explained = now, gap{}
		}
		where := fmt.Sprintf("step %d (AllowN(%d) at %v)", i, st.n, st.at)
		if o.allowed != r.allowed {
			t.Errorf("%s: ours Allowed %v, redis_rate %v (%+v)", where, o.allowed, r.allowed, r)
			continue
		}
		if o.limit != burst {
			t.Errorf("%s: ours Limit %d, want Burst %d", where, o.limit, burst)
		}
		switch {
		case st.anchor:
			// On a full bucket Remaining is burst - n exactly. redis_rate
			// computes it as a difference of float seconds near 3e8 divided
			// by T, which can land just under the integer and be cut to
			// one less (seen on a fresh key: 8 for Burst 10).
			if o.remaining != burst-st.n || (r.remaining != burst-st.n && r.remaining != burst-st.n-1) {
				t.Errorf("%s: on a full bucket ours Remaining %d, redis_rate %d; want %d (redis_rate may say one less)", where, o.remaining, r.remaining, burst-st.n)
			}
			if r.remaining != o.remaining {
				roundedDown++
			}
		case (o.allowed || st.n == 1) && o.remaining != r.remaining:
			t.Errorf("%s: ours Remaining %d, redis_rate %d", where, o.remaining, r.remaining)
		}
		sameInstant := func(name string, mine, their time.Duration) {
			d := mine - their
			worst = max(worst, d, -d)
			off := max(explained.lo-d, d-explained.hi, 0)
			unexplained = max(unexplained, off)
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
	t.Logf("%d steps compared; RetryAfter/ResetAfter differ by at most %v, of which at most %v is not explained by when the two calls read the clock; redis_rate's Remaining rounded down on a full bucket %d times", len(steps), worst, unexplained, roundedDown)
	return 0, true
}

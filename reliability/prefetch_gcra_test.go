package reliability_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// The differential test's prefetch mode for GCRA (issue 30): seeded random
// sequences of Allow, AllowN, Peek, Reset and clock moves on two or three
// Limiters on one redis-server, sharing one fake clock, over GCRA rules
// with Prefetch (and the same rules without it: the same bucket, decided on
// Redis), against the exact GCRA bound, the containment criterion:
//
// A bucket of Burst B refilled one token every T = Window / Rate allows
// the events at s_1 <= ... <= s_k (n events at one instant count n times)
// iff an exact GCRA fed them in order, from a full bucket, conforms every
// one of them: its TAT after them is max over i of s_i + (k - i + 1)·T,
// and the k-th conforms iff that TAT, before it, less s_k is at most
// (B - 1)·T, that is iff for every i <= k
//
//	k - i + 1 <= B + floor((s_k - s_i) / T)
//
// the count in every closed interval [s_i, s_k], so in every [a, a + L):
// at most B + ceil(L / T) - 1 (the issue's example: 100 + 100 - 1 = 199 in
// [99.9ms, 1099.8ms)). So the model is an exact GCRA (diffkinds_test.go's
// modelState, a rational TAT) fed the calls the fleet actually allowed, at
// their times: an allowed call of n events at t fails the test when the
// model's count at t plus n exceeds B. A rejected call the model would
// have allowed is an under-admission: counted, never a failure; so are
// rejections of a banned key.
//
// Why a prefetching fleet stays within it (lua/gcra.lua, above gcra.free):
// the bucket's TAT is the max-plus sum of its events, a grant's counted
// at t + Prefetch with its g slots (settled later to those used), a Redis
// decision's at its time. Take the ops whose events lie in [a, b], in the
// order Redis ran them; the last, at t_m <= b, was made only if the TAT
// then, at least v_1 + (the events of the ops before it)·T with v_1 the
// first op's time (t_1 >= a for a decision, t_1 + Prefetch > a for a
// grant: its slots are used before then), plus its own, less t_m, is at
// most B·T: so the count·T <= B·T + b - a. A give-back settles only the
// grant it names at what was used, which keeps every term.
//
// A Reset empties the bucket: the model forgets it. It voids the resetting
// Limiter's slots at once and the others' when their grants end: a call
// another Limiter allows from a grant it took before the Reset, less than
// Prefetch after it, is such a use, counted and left out of the model
// (Redis no longer counts it either). Which grant a slot came from is told
// by the Limiters' Stats: a call that makes a grant raises its Limiter's
// PrefetchGrants, and the grant is of the call's pair, at the call's time.

// pgRules are the GCRA rules the sequences draw: each name once with
// Prefetch and once without. T is 20ms, 83.33ms (not whole µs), 10ms
// (Burst above Rate), 10ms with Prefetch 2T, 25ms under a penalty, and
// 10ms with Prefetch 4T and a burst of 8 (a grant's overhead is half the
// bucket); "iss" is the issue's: Burst = Rate = 100 a second, Prefetch
// 100ms.
var pgRules = func() []ratelimit.Rule {
	var out []ratelimit.Rule
	for _, r := range []ratelimit.Rule{
		{Name: "g", Limit: ratelimit.Limit{Rate: 5, Window: 100 * time.Millisecond}, Prefetch: 10 * time.Millisecond},
		{Name: "h", Limit: ratelimit.Limit{Rate: 12, Window: time.Second, Burst: 6}, Prefetch: 60 * time.Millisecond},
		{Name: "s", Limit: ratelimit.Limit{Rate: 3, Window: 30 * time.Millisecond, Burst: 5}, Prefetch: 3 * time.Millisecond},
		{Name: "a", Limit: ratelimit.Limit{Rate: 20, Window: 200 * time.Millisecond}, Prefetch: 20 * time.Millisecond},
		{Name: "b:pen", Limit: ratelimit.Limit{Rate: 8, Window: 200 * time.Millisecond, Burst: 4}, Prefetch: 20 * time.Millisecond, Penalty: pfDiffPenalty},
		{Name: "iss", Limit: ratelimit.Limit{Rate: 100, Window: time.Second}, Prefetch: 100 * time.Millisecond},
		{Name: "w", Limit: ratelimit.Limit{Rate: 50, Window: 500 * time.Millisecond, Burst: 8}, Prefetch: 40 * time.Millisecond},
	} {
		r.Kind = ratelimit.GCRA
		plain := r
		plain.Prefetch = 0
		out = append(out, r, plain)
	}
	return out
}()

// pgBase is the index for pfRuleAt of pgRules' first rule: a step's rule
// is pgBase plus its index in pgRules (even, as pgRules' pairs start at
// even indices).
var pgBase = len(pfDiffRules) + len(pfKindDiffRules)

// pgIssue is the index of the issue's rule in pgRules (its plain twin
// follows it).
const pgIssue = 10

// pgClose closes Limiter inst (hand-written sequences only): its unused
// slots go back.
const pgClose pfKind = 100

// genPGSequence draws a sequence for a fleet of limiters, as
// genPFSequence does, with clock moves also to a grant's last µs (a
// call's time plus Prefetch, less 1µs: the issue's adversary uses its
// slots then), to a whole number of T after a call (when the bucket
// frees a token) and 1µs either side, floods (Burst + 1 calls of one
// Limiter at one instant), and the issue's adversary: a Limiter takes
// slots, uses them at its grant's last µs, and another floods.
func genPGSequence(rng *rand.Rand, steps, limiters int) []pfStep {
	var g pfGen
	// Half the names drawn are those whose Prefetch is several T ("a",
	// "iss" and "w"): a grant's overhead, and what an unsound grant
	// would let through, is Prefetch / T events.
	name := func() int {
		if rng.IntN(2) == 0 {
			return []int{3, 5, 6}[rng.IntN(3)]
		}
		return rng.IntN(len(pgRules) / 2)
	}
	focus := []int{name()}
	if rng.IntN(2) == 0 {
		focus = append(focus, name())
	}
	for len(g.seq) < steps {
		if rng.IntN(6) == 0 {
			r := pgRules[2*focus[rng.IntN(len(focus))]]
			p := r.Prefetch
			tq := r.Limit.Window / time.Duration(r.Limit.Rate)
			g.drawMove(rng, p, [4]int{5, 9, 13, 18},
				func() time.Duration { return g.callTime(rng) + p - time.Duration(rng.IntN(3))*time.Microsecond },
				func() time.Duration {
					k := time.Duration(1 + rng.IntN(int(burst(r))))
					return g.callTime(rng) + k*tq + time.Duration(rng.IntN(3)-1)*time.Microsecond
				})
			continue
		}
		s := pfStep{inst: rng.IntN(limiters), rule: pgBase + 2*focus[rng.IntN(len(focus))] + b2i(rng.IntN(4) == 0), key: b2i(rng.IntN(6) == 0)}
		if rng.IntN(5) == 0 && limiters > 1 {
			// The issue's adversary: a Limiter makes the pair hot and
			// takes slots, uses what it holds at its grant's last µs,
			// and another floods at once, from slots or on Redis.
			a, b := s.inst, (s.inst+1+rng.IntN(limiters-1))%limiters
			r := pfRuleAt(s.rule)
			for range 2 + rng.IntN(int(burst(r))) {
				g.call(pfStep{kind: pfAllow, inst: a, rule: s.rule &^ 1, key: s.key})
			}
			g.move(r.Prefetch - time.Duration(1+rng.IntN(2))*time.Microsecond)
			for range 1 + rng.IntN(4) {
				g.call(pfStep{kind: pfAllow, inst: a, rule: s.rule &^ 1, key: s.key})
			}
			if rng.IntN(2) == 0 {
				g.move(time.Microsecond)
			}
			for range burst(r) + 1 {
				g.call(pfStep{kind: pfAllow, inst: b, rule: s.rule, key: s.key})
			}
			continue
		}
		if rng.IntN(12) == 0 {
			// A flood: one Limiter calls until the bucket must be
			// empty, and once more.
			for range burst(pfRuleAt(s.rule)) + 1 {
				g.call(pfStep{kind: pfAllow, inst: s.inst, rule: s.rule, key: s.key})
			}
			continue
		}
		g.drawCall(rng, s, 60, int(burst(pfRuleAt(s.rule))))
	}
	return g.seq
}

// pgGrantOf is when a Limiter's pair (rule name, key) was last granted
// slots, µs (absent: never).
type pgGrantOf map[[2]string]int64

// runPGDiff runs seq on a fresh fleet of limiters and checks every row
// (see the top of the file); tally, when not nil, counts what it did.
func runPGDiff(newFleet pfFleetNew, limiters int, seq []pfStep, tally *pfTally) []pfRow {
	model := map[[2]string]*modelState{}
	resets := map[[2]string]pfResetAt{}
	grantAt := make([]pgGrantOf, limiters)
	grants := make([]uint64, limiters)
	for i := range grantAt {
		grantAt[i] = pgGrantOf{}
	}
	return runPFSteps(newFleet, limiters, seq, func(row *pfRow, r ratelimit.Rule, key string, n int, t int64, grants0, grants1 uint64) {
		s := row.step
		pair := [2]string{r.Name, key}
		before, had := grantAt[s.inst][pair]
		granted := false
		if grants1 > grants[s.inst] {
			grants[s.inst], granted = grants1, true
			grantAt[s.inst][pair] = t
		}
		st := model[pair]
		if st == nil {
			st = &modelState{}
			model[pair] = st
		}
		switch {
		case row.unhealthy():
		case s.kind == pfReset:
			delete(model, pair)
			resets[pair] = pfResetAt{t, s.inst}
		case s.kind == pfPeek:
		default:
			count := st.count(r, t)
			fits := count+int64(n) <= burst(r)
			tally.decided(row, fits)
			if !row.res.Allowed {
				break
			}
			if rs, ok := resets[pair]; ok && row.path == ratelimit.PathPrefetch && had && before <= rs.at {
				// The slot came from the grant the pair held before the
				// call, taken before the Reset, or from one the call
				// made (granted), at t.
				within := t < rs.at+r.Prefetch.Microseconds()
				switch {
				case granted:
					row.voided = rs.inst != s.inst && within
				case rs.inst == s.inst:
					row.fail = fmt.Sprintf("allowed from a slot granted at epoch%+v, before this Limiter's own Reset at epoch%+v", pgEpoch(before), pgEpoch(rs.at))
				case !within:
					row.fail = fmt.Sprintf("allowed from a slot granted at epoch%+v, before another Limiter's Reset, %v after it: Prefetch or more", pgEpoch(before), time.Duration(t-rs.at)*time.Microsecond)
				default:
					row.voided = true
				}
				if row.voided {
					if tally != nil {
						tally.voided++
					}
					break
				}
			}
			if !fits {
				row.fail = fmt.Sprintf("allowed %d where an exact GCRA of the fleet's allowed calls counts %d in use: more than Burst %d", n, count, burst(r))
			}
			st.apply(r, t, int64(n))
		}
	}, tally)
}

// pgEpoch is µs t since testkit.Epoch.
func pgEpoch(t int64) time.Duration {
	return time.Duration(t-testkit.Epoch().UnixMicro()) * time.Microsecond
}

// TestDifferentialPrefetchGCRA runs the GCRA prefetch mode (see the top of
// the file) on redis-server; -diff.n, -diff.steps and -diff.seed as in the
// other modes.
func TestDifferentialPrefetchGCRA(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	runPFMode(t, pfDiffFleetNew(t, "dpg"), pfMode{name: "GCRA prefetch mode", bound: "the exact GCRA's bound", stream: 0x6c7a, gen: genPGSequence, run: runPGDiff})
}

// pgAdversary is the issue's adversary on its rule (Burst = Rate = 100 a
// second, T = 10ms, Prefetch 100ms), against the exact GCRA, on four
// Limiters: A (L0) takes slots at 0 and uses them at the last µs of their
// grant, then gives back what it took meanwhile (Close), so that nothing
// unused hides what the uses owe; B (L1) then calls as fast as it may,
// 100 calls at 100ms and two every 10ms until 1.1s, from slots of its own;
// C (L2) calls on Redis beside it. At 2.5s (the bucket full again) C takes
// a grant; at 2.7s, the bucket full once more, B fills it on Redis, C gives
// its grant back after it (Close): a bucket full since the grant holds no
// record of it, and nothing comes back: D's (L3) calls are rejected. (B's
// would be in any case: a process' own count of what it allowed holds it
// to the bucket too.)
func pgAdversary() []pfStep {
	p, plain := pgBase+pgIssue, pgBase+pgIssue+1
	at := time.Duration(0)
	var seq []pfStep
	to := func(d time.Duration) {
		if d > at {
			seq = append(seq, pfStep{kind: pfAdvance, d: d - at})
			at = d
		}
	}
	call := func(inst, rule, n int) {
		if n == 1 {
			seq = append(seq, pfStep{kind: pfAllow, inst: inst, rule: rule})
		} else {
			seq = append(seq, pfStep{kind: pfAllowN, inst: inst, rule: rule, n: n})
		}
	}
	ms := time.Millisecond
	// A at 0: two calls on Redis, then a grant of 2 + 2 (2 used), and
	// one more call that uses the third and asks for the next 5 (the
	// demand), at 0, usable until 100ms.
	call(0, p, 1)
	call(0, p, 1)
	call(0, p, 2)
	call(0, p, 1)
	// The grant's last µs: A uses the 5 and asks for 5 more, and Close
	// gives those back.
	to(100*ms - time.Microsecond)
	call(0, p, 5)
	seq = append(seq, pfStep{kind: pgClose, inst: 0})
	// B and C from 100ms.
	to(100 * ms)
	for range 100 {
		call(1, p, 1)
	}
	call(2, plain, 1)
	for k := 1; k <= 100; k++ {
		to(100*ms + time.Duration(k)*10*ms)
		call(1, p, 1)
		call(1, p, 1)
		call(2, plain, 1)
	}
	// 2.5s: the bucket is full. C takes slots: two calls on Redis, then
	// a grant of 2 + 2 (2 used) as events at 2.6s, the TAT 2.64s. At 2.7s
	// the bucket is full again: B fills it on Redis (the decision forgets
	// the grant's record), C gives its 2 unused slots back (Close), and
	// nothing comes back: D's calls are rejected.
	to(2500 * ms)
	call(2, p, 1)
	call(2, p, 1)
	call(2, p, 2)
	to(2700 * ms)
	for range 100 {
		call(1, plain, 1)
	}
	seq = append(seq, pfStep{kind: pgClose, inst: 2})
	for range 10 {
		call(3, plain, 1)
	}
	return seq
}

// TestPrefetchGCRAAdversary runs pgAdversary against the exact GCRA, and
// counts the calls it allowed in the issue's interval [99.9ms, 1099.8ms)
// (here [100ms - 1µs, 1099.8ms)): at most 199.
func TestPrefetchGCRAAdversary(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	seq := pgAdversary()
	var tally pfTally
	rows := runPGDiff(pfDiffFleetNew(t, "dpg"), 4, seq, &tally)
	if i := firstPFFail(rows); i >= 0 {
		t.Fatalf("the issue's adversary left the exact GCRA's bound:\n%s", formatPFRows(rows[:i+1]))
	}
	from, to := 100*time.Millisecond-time.Microsecond, 1099800*time.Microsecond
	in := 0
	for _, r := range rows {
		if (r.step.kind == pfAllow || r.step.kind == pfAllowN) && r.res.Allowed && r.now >= from && r.now < to {
			in += max(r.step.n, 1)
		}
	}
	t.Logf("the issue's adversary: %d allowed in [%v, %v) (bound 199); %v", in, from, to, &tally)
	if in > 199 {
		t.Errorf("%d allowed in [%v, %v): more than 199", in, from, to)
	}
	if tally.fromSlots == 0 {
		t.Errorf("no call was allowed from slots")
	}
}

package reliability_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // berlin, wherever the test runs

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// The differential test: seeded random sequences of Allow, AllowN, Peek,
// Reset and clock moves (µs steps, exact window boundaries and 1µs either
// side, jumps, and moves backwards) over a few rules (with and without
// penalties, some sharing a name with another Limit) and keys, run on a
// local-only limiter and on a limiter backed by a real redis-server, each with
// its own fake clock set to the same times, and on reference models
// (diffmodel_test.go). Every Result and every error is compared.
//
//   - mode forward: the clock never moves back and a name keeps its Window.
//     Local, Redis and docs/semantics.md's formula (the pure model) must all agree.
//   - mode anything: everything goes. Redis must match the model of its
//     scripts exactly, and the local path must match Redis, at every step.
//     Where both leave docs/semantics.md's formula (trimming forgets an event that a
//     call stamped more than a window earlier still counts; an allowed
//     call's ResetAfter is Window), which docs/semantics.md documents for clocks that
//     jump back and Windows that grow, the sequences are counted and an
//     example of each is logged. In mode forward either one is an error.
//   - mode reserve: mode forward with Reserve, Settle (for less, as much
//     and more), Cancel and settles twice among the calls, over the rules
//     of every kind that takes reservations, approximate counters
//     included (diffreserve_test.go). As in mode forward, all must agree.
//   - mode prefetch (TestDifferentialPrefetch, diffprefetch_test.go): two
//     or three Limiters on one redis-server and one fake clock, over rules
//     with Prefetch and the same rules without; every call the fleet
//     allows must fit the exact log of the calls it allowed before (it may
//     under-admit, which is counted, never over-admit).
//
// A failure prints the seed and the shortest failing sequence found (steps
// dropped and clock moves merged while the failure remains, each candidate
// run on fresh state). CI runs -diff.n sequences of -diff.steps steps per
// mode. A long run:
//
//	go test -race -run TestDifferential -diff.n=100000 -v
//
// and a replay of one sequence, with the seed it printed:
//
//	go test -run 'TestDifferential/forward' -diff.seed=SEED -diff.n=1 -v
var (
	diffN     = flag.Int("diff.n", 200, "differential test: number of random sequences")
	diffSteps = flag.Int("diff.steps", 60, "differential test: steps per sequence")
	diffSeed  = flag.Uint64("diff.seed", 20261122, "differential test: seed of the first sequence (0: from the time, for campaigns such as -diff.seed=0 -diff.n=100000)")
)

// diffPenalty is the ladder of the penalised rules.
var diffPenalty = &ratelimit.Penalty{WarnAfter: 2, BanAfter: 4, BanFor: 3 * time.Second, Memory: 5 * time.Second}

// diffRules are the rules a sequence draws from. Several share a name: the
// same state seen through a changed Limit, a changed Penalty or none.
var diffRules = []ratelimit.Rule{
	{Name: "a", Limit: ratelimit.Limit{Rate: 3, Window: time.Second}},
	{Name: "a", Limit: ratelimit.Limit{Rate: 5, Window: time.Second}},
	{Name: "a", Limit: ratelimit.Limit{Rate: 3, Window: 250 * time.Millisecond}},
	{Name: "b:pen", Limit: ratelimit.Limit{Rate: 4, Window: 2 * time.Second}, Penalty: diffPenalty},
	{Name: "b:pen", Limit: ratelimit.Limit{Rate: 2, Window: 2 * time.Second}, Penalty: diffPenalty},
	{Name: "b:pen", Limit: ratelimit.Limit{Rate: 4, Window: 2 * time.Second}},
	{Name: "c}", Limit: ratelimit.Limit{Rate: 1, Window: 100 * time.Millisecond},
		Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: 150 * time.Millisecond, Memory: 400 * time.Millisecond}},
	{Name: "d", Limit: ratelimit.Limit{Rate: 2, Window: 7 * time.Microsecond}},
	// The other kinds (models in diffkinds_test.go): buckets whose
	// emission interval is and is not a whole µs, quotas of a UTC day and
	// of a Berlin week.
	{Name: "g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 4, Window: time.Second, Burst: 6}},
	{Name: "g:pen", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 7, Window: 2 * time.Second, Burst: 2}, Penalty: diffPenalty},
	{Name: "q", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 4, Period: ratelimit.Day}},
	{Name: "q:pen", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 3, Period: ratelimit.Week, Location: berlin}, Penalty: diffPenalty},
	// Fixed windows: a Rate changed under one name, and a penalty.
	{Name: "f", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 3, Window: time.Second}},
	{Name: "f", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 5, Window: time.Second}},
	{Name: "f:pen", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 2, Window: 700 * time.Millisecond}, Penalty: diffPenalty},
	// Only mode reserve draws the rules below (see allowedRules):
	// approximate counters (a Rate changed under one name, and a penalty),
	// and penalised rules of the kinds a Reserve takes whose violations
	// are remembered longer than a sequence lasts (see reservePenalty).
	{Name: "c", Approximate: true, Limit: ratelimit.Limit{Rate: 4, Window: time.Second}},
	{Name: "c", Approximate: true, Limit: ratelimit.Limit{Rate: 6, Window: time.Second}},
	{Name: "c:pen", Approximate: true, Limit: ratelimit.Limit{Rate: 3, Window: 800 * time.Millisecond}, Penalty: reservePenalty},
	{Name: "b:res", Limit: ratelimit.Limit{Rate: 2, Window: 2 * time.Second}, Penalty: reservePenalty},
	{Name: "q:res", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 3, Period: ratelimit.Week, Location: berlin}, Penalty: reservePenalty},
	{Name: "f:res", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 2, Window: 700 * time.Millisecond}, Penalty: reservePenalty},
}

// reservePenalty is the ladder of mode reserve's penalised rules: its
// Memory outlasts any sequence, so that no violation is forgotten: a known
// issue of forgotten violations (see "Known, and kept out" in
// diffreserve_test.go) stays out of the mode.
var reservePenalty = &ratelimit.Penalty{WarnAfter: 2, BanAfter: 4, BanFor: 3 * time.Second, Memory: 30 * 24 * time.Hour}

// reserveOnly reports whether only mode reserve draws r.
func reserveOnly(r ratelimit.Rule) bool { return r.Approximate || r.Penalty == reservePenalty }

// berlin is the time zone of a quota in diffRules.
var berlin = func() *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	return loc
}()

// capacity is the most events one call of r may ask for.
func capacity(r ratelimit.Rule) int {
	if r.Kind == ratelimit.GCRA && r.Limit.Burst > 0 {
		return r.Limit.Burst
	}
	return r.Limit.Rate
}

var diffKeys = []string{"k", "k2", "{k}:x"}

type diffKind int

const (
	diffAllow diffKind = iota
	diffAllowN
	diffPeek
	diffReset
	diffAdvance
	diffReserve // Reserve n events as reservation res (diffreserve_test.go)
	diffSettle  // Settle reservation res at n
	diffCancel  // Cancel reservation res
)

// diffStep is one step: a call, or a move of both clocks by d.
type diffStep struct {
	kind diffKind
	rule int // index into diffRules
	key  int // index into diffKeys
	n    int
	d    time.Duration
	res  int // the reservation a Reserve makes, or a Settle or Cancel names
}

func (s diffStep) String() string {
	r := diffRules[s.rule]
	desc := fmt.Sprintf("%q %d/%v", r.Name, r.Limit.Rate, r.Limit.Window)
	if r.Approximate {
		desc += "~"
	}
	if r.Penalty != nil {
		desc += "+penalty"
	}
	switch s.kind {
	case diffAllow:
		return fmt.Sprintf("Allow(%s, %q)", desc, diffKeys[s.key])
	case diffAllowN:
		return fmt.Sprintf("AllowN(%s, %q, %d)", desc, diffKeys[s.key], s.n)
	case diffPeek:
		return fmt.Sprintf("Peek(%s, %q)", desc, diffKeys[s.key])
	case diffReset:
		return fmt.Sprintf("Reset(%s, %q)", desc, diffKeys[s.key])
	case diffReserve:
		return fmt.Sprintf("r%d = Reserve(%s, %q, %d)", s.res, desc, diffKeys[s.key], s.n)
	case diffSettle:
		return fmt.Sprintf("r%d.Settle(%d)", s.res, s.n)
	case diffCancel:
		return fmt.Sprintf("r%d.Cancel()", s.res)
	}
	return fmt.Sprintf("clock %+v", s.d)
}

// diffMode says which sequences a run draws.
type diffMode struct {
	name string
	// backwards lets the clock move back now and then.
	backwards bool
	// reshape lets calls use rules that share a name but not a window.
	reshape bool
	// reserve draws Reserve, Settle and Cancel steps too, and the rules
	// of every kind, approximate counters included (see
	// genReserveSequence).
	reserve bool
}

var (
	// forward: the clock never moves back and a name keeps its window
	// (Rate and Penalty still change). Local and Redis must agree exactly.
	diffForward = diffMode{name: "forward"}
	// anything: clock moves back, windows change under one name.
	diffAnything = diffMode{name: "anything", backwards: true, reshape: true}
	// reserve: mode forward with reservations (diffreserve_test.go).
	diffReserveMode = diffMode{name: "reserve", reserve: true}
)

// allowedRules returns the indexes of diffRules a mode may use.
func (m diffMode) allowedRules() []int {
	var idx []int
	for i, r := range diffRules {
		if !m.reshape && r.Name == "a" && r.Limit.Window != time.Second {
			continue
		}
		switch {
		case !m.reserve && reserveOnly(r):
			continue // the modes before mode reserve keep their sequences
		case m.reserve && !reserveOnly(r) && r.Penalty != nil:
			continue // mode reserve's penalised rules are its own
		}
		idx = append(idx, i)
	}
	return idx
}

// genSequence draws one sequence. Clock moves are small µs steps, exact
// window boundaries measured from an earlier call (and 1µs either side),
// random jumps, and in mode anything now and then a move backwards.
func genSequence(rng *rand.Rand, steps int, mode diffMode) []diffStep {
	if mode.reserve {
		return genReserveSequence(rng, steps, mode)
	}
	rules := mode.allowedRules()
	var seq []diffStep
	var now time.Duration
	var callTimes []time.Duration
	for len(seq) < steps {
		if rng.IntN(3) == 0 {
			d := genMove(rng, mode, rules, now, callTimes)
			now += d
			seq = append(seq, diffStep{kind: diffAdvance, d: d})
			continue
		}
		s := diffStep{rule: rules[rng.IntN(len(rules))], key: rng.IntN(len(diffKeys))}
		switch x := rng.IntN(20); {
		case x < 11:
			s.kind = diffAllow
		case x < 15:
			s.kind = diffAllowN
			s.n = 1 + rng.IntN(capacity(diffRules[s.rule]))
		case x < 19:
			s.kind = diffPeek
		default:
			s.kind = diffReset
		}
		callTimes = append(callTimes, now)
		seq = append(seq, s)
	}
	return seq
}

// genMove draws a clock move from now, given the times of the calls
// drawn so far and the rules (indexes into diffRules) a sequence uses.
func genMove(rng *rand.Rand, mode diffMode, rules []int, now time.Duration, callTimes []time.Duration) time.Duration {
	var d time.Duration
	switch x := rng.IntN(20); {
	case x < 6:
		d = time.Duration(1+rng.IntN(5)) * time.Microsecond
	case x < 12 && len(callTimes) > 0:
		t0 := callTimes[rng.IntN(len(callTimes))]
		w := diffRules[rules[rng.IntN(len(rules))]].Limit.Window
		d = t0 + w + time.Duration(rng.IntN(3)-1)*time.Microsecond - now
	case x < 18:
		d = time.Duration(rng.IntN(2500)) * time.Millisecond
	case x < 19 && rng.IntN(2) == 0:
		// To a midnight (UTC, or Berlin's an hour earlier), and
		// 1µs either side: the quotas' period boundaries.
		at := testkit.Epoch().Add(now)
		next := time.Date(at.Year(), at.Month(), at.Day()+1, 0, 0, 0, 0, time.UTC)
		if rng.IntN(2) == 0 {
			next = next.Add(-time.Hour)
		}
		d = next.Sub(at) + time.Duration(rng.IntN(3)-1)*time.Microsecond
	case x < 19:
		d = time.Duration(rng.IntN(5*60)) * time.Second
	default:
		d = -time.Duration(1+rng.IntN(1500)) * time.Millisecond
	}
	if !mode.backwards && d < 0 {
		d = time.Duration(rng.IntN(5)) * time.Microsecond
	}
	return d
}

// diffOutcome is what one call returned: its Result, its error's text,
// and the sentinel error it wraps (see sentinelOf), which is all a model
// says of an error.
type diffOutcome struct {
	res      ratelimit.Result
	err      string
	sentinel string
}

// modelView is what a model can say of o: the Result and the sentinel, not
// the error's text.
func (o diffOutcome) modelView() diffOutcome {
	o.err = ""
	return o
}

func (o diffOutcome) String() string {
	if o.err != "" {
		return "error " + o.err
	}
	if o.sentinel != "" {
		return "error " + o.sentinel
	}
	r := o.res
	s := fmt.Sprintf("allowed=%v limit=%d remaining=%d retry=%v reset=%v", r.Allowed, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter)
	if r.Violations != 0 || r.Warned || r.Banned {
		s += fmt.Sprintf(" violations=%d warned=%v banned=%v", r.Violations, r.Warned, r.Banned)
	}
	if r.Degraded {
		s += " DEGRADED"
	}
	return s
}

// diffRow is one step of a run and, for a call, what each side answered.
type diffRow struct {
	i            int
	step         diffStep
	now          time.Duration // since testkit.Epoch
	local, redis diffOutcome
	pure, pureW  diffOutcome // pureModel, windowResetModel
	model        diffOutcome // redisModel
	// resetGiveBack: at this step or before, a settle for less named
	// events a Reset had cleared (see knownResetGiveBack).
	resetGiveBack bool
}

func (r diffRow) String() string {
	if r.step.kind == diffAdvance {
		return fmt.Sprintf("%3d  %v  (now epoch%+v)", r.i, r.step, r.now)
	}
	s := fmt.Sprintf("%3d  %v\n       local %s\n       redis %s", r.i, r.step, r.local, r.redis)
	if r.model != r.redis.modelView() {
		s += "\n       model " + r.model.String()
	}
	if r.pure != r.redis.modelView() {
		s += "\n       pure  " + r.pure.String()
	}
	return s
}

// diffPair is a local-only limiter and a redis-server limiter on fresh state.
type diffPair struct {
	local, remote       *ratelimit.Limiter
	localClk, remoteClk interface{ Set(time.Time) }
}

// runDiff executes seq on fresh limiters and fresh models.
func runDiff(newPair func() (diffPair, func()), seq []diffStep) []diffRow {
	p, done := newPair()
	defer done()
	pure, pureW, model := pureModel(), windowResetModel(), redisModel()
	// Each side's reservations, by the id their Reserve step gave them.
	localHeld, redisHeld := map[int]*ratelimit.Reservation{}, map[int]*ratelimit.Reservation{}
	ctx := context.Background()
	now := testkit.Epoch()
	rows := make([]diffRow, 0, len(seq))
	for i, s := range seq {
		row := diffRow{i: i, step: s}
		if s.kind == diffAdvance {
			now = now.Add(s.d)
			row.now = now.Sub(testkit.Epoch())
			rows = append(rows, row)
			continue
		}
		row.now = now.Sub(testkit.Epoch())
		p.localClk.Set(now)
		p.remoteClk.Set(now)
		row.local = diffCall(ctx, p.local, localHeld, s)
		row.redis = diffCall(ctx, p.remote, redisHeld, s)
		row.pure = modelCall(pure, s, now)
		row.pureW = modelCall(pureW, s, now)
		row.model = modelCall(model, s, now)
		row.resetGiveBack = pure.resetGiveBack
		rows = append(rows, row)
	}
	return rows
}

// diffCall makes the call of step s on l; held are l's reservations, by
// id (a Reserve's step adds to it, a Settle's or a Cancel's reads it: an id
// no Reserve allowed is a nil Reservation).
func diffCall(ctx context.Context, l *ratelimit.Limiter, held map[int]*ratelimit.Reservation, s diffStep) diffOutcome {
	rule := diffRules[s.rule]
	key := diffKeys[s.key]
	var o diffOutcome
	var err error
	switch s.kind {
	case diffReserve:
		var r *ratelimit.Reservation
		r, o.res, err = l.Reserve(ctx, rule, key, s.n)
		if (r != nil) != (err == nil && o.res.Allowed) {
			o.err = fmt.Sprintf("Reserve returned reservation %v with Allowed %v and error %v", r, o.res.Allowed, err)
			return o
		}
		held[s.res] = r
	case diffSettle:
		err = held[s.res].Settle(ctx, s.n)
	case diffCancel:
		err = held[s.res].Cancel(ctx)
	case diffAllow:
		o.res, err = l.Allow(ctx, rule, key)
	case diffAllowN:
		o.res, err = l.AllowN(ctx, rule, key, s.n)
	case diffPeek:
		o.res, err = l.Peek(ctx, rule, key)
	case diffReset:
		err = l.Reset(ctx, rule, key)
	}
	if err != nil {
		o.err, o.sentinel = err.Error(), sentinelOf(err)
	}
	return o
}

func modelCall(m *diffModel, s diffStep, now time.Time) diffOutcome {
	rule := diffRules[s.rule]
	key := diffKeys[s.key]
	switch s.kind {
	case diffReserve:
		return m.reserve(s.res, rule, key, now, int64(s.n))
	case diffSettle:
		return m.settle(s.res, now, int64(s.n))
	case diffCancel:
		return m.settle(s.res, now, 0)
	case diffAllow:
		return diffOutcome{res: m.decide(rule, key, now, 1, false)}
	case diffAllowN:
		return diffOutcome{res: m.decide(rule, key, now, int64(s.n), false)}
	case diffPeek:
		return diffOutcome{res: m.decide(rule, key, now, 1, true)}
	}
	m.reset(rule.Name, key)
	return diffOutcome{}
}

// diffCheck finds the first step of a run that shows a failure, or -1.
type diffCheck func(rows []diffRow) int

func firstRow(pred func(diffRow) bool) diffCheck {
	return func(rows []diffRow) int {
		for i, r := range rows {
			if r.resetGiveBack && knownResetGiveBack {
				return -1 // counted by resetGiveBackShows
			}
			if r.step.kind != diffAdvance && pred(r) {
				return i
			}
		}
		return -1
	}
}

var (
	redisOffModel = firstRow(func(r diffRow) bool { return r.redis.modelView() != r.model })
	localOffRedis = firstRow(func(r diffRow) bool { return r.local != r.redis })
	redisOffPure  = firstRow(func(r diffRow) bool { return r.redis.modelView() != r.pure })
	// Redis matches redisModel, which differs from windowResetModel only by
	// trimming, and windowResetModel from pureModel only in ResetAfter.
	trimmingShows = firstRow(func(r diffRow) bool { return r.redis.modelView() != r.pureW })
	resetShows    = firstRow(func(r diffRow) bool { return r.pureW != r.pure })
	// A settle's give-back after a Reset of its pair took from what the
	// pair recorded since, on Redis or locally (see knownResetGiveBack).
	resetGiveBackShows diffCheck = func(rows []diffRow) int {
		for i, r := range rows {
			if r.resetGiveBack && r.step.kind != diffAdvance && (r.redis.modelView() != r.pure || r.local != r.redis) {
				return i
			}
		}
		return -1
	}
)

// shrink makes a failing sequence as short as it can while check still
// finds a failure on fresh state: it drops steps one at a time and merges
// neighbouring clock moves, until neither changes anything.
func shrink(newPair func() (diffPair, func()), seq []diffStep, check diffCheck) []diffStep {
	return shrinkSteps(seq, func(cand []diffStep) int { return check(runDiff(newPair, cand)) },
		func(a, b diffStep) (diffStep, bool) {
			return diffStep{kind: diffAdvance, d: a.d + b.d}, a.kind == diffAdvance && b.kind == diffAdvance
		})
}

// shrinkSteps is the shrinking of every differential test: failAt runs a
// sequence on fresh state and returns its first failing step (-1: none);
// merge joins two neighbouring steps into one when they are clock moves.
// It drops steps one at a time and merges neighbours, cutting the sequence
// after its failure, until neither changes anything.
func shrinkSteps[S any](seq []S, failAt func([]S) int, merge func(a, b S) (S, bool)) []S {
	at := failAt(seq)
	if at < 0 {
		return seq
	}
	seq = append([]S(nil), seq[:at+1]...)
	try := func(cand []S) bool {
		if at := failAt(cand); at >= 0 {
			seq = cand[:at+1]
			return true
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for i := len(seq) - 1; i >= 0; i-- {
			if i >= len(seq) {
				continue
			}
			if try(append(append([]S(nil), seq[:i]...), seq[i+1:]...)) {
				changed = true
				continue
			}
			if i+1 < len(seq) {
				if merged, ok := merge(seq[i], seq[i+1]); ok && try(append(append(append([]S(nil), seq[:i]...), merged), seq[i+2:]...)) {
					changed = true
				}
			}
		}
	}
	return seq
}

func formatRows(rows []diffRow) string {
	lines := make([]string, len(rows))
	for i, r := range rows {
		lines[i] = r.String()
	}
	return strings.Join(lines, "\n")
}

func TestDifferentialLocalVersusRedis(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	server := redistest.Start(t, redistest.Options{})
	client := testkit.NewClient(t, server.Addr())
	// In mode anything the remote limiter runs without its hot-key shield:
	// a shielded answer skips the script, and with it a trim, which only a
	// clock that jumps back by more than a window can tell (docs/semantics.md: such a
	// clock can find older events dropped, or not). Mode forward keeps the
	// shield on and requires docs/semantics.md's formula all the same.
	shieldOff := false
	newPair := func() (diffPair, func()) {
		lc, rc := testkit.NewClock(), testkit.NewClock()
		local, err := ratelimit.New(nil, testkit.Options(lc))
		if err != nil {
			t.Fatal(err)
		}
		remoteOpts := testkit.Isolated(testkit.Options(rc))
		if shieldOff {
			remoteOpts.ShieldMax = -1
		}
		remote, err := ratelimit.New(client, remoteOpts)
		if err != nil {
			t.Fatal(err)
		}
		return diffPair{local: local, remote: remote, localClk: lc, remoteClk: rc},
			func() { local.Close(); remote.Close() }
	}
	seed := *diffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for _, mode := range []diffMode{diffForward, diffAnything, diffReserveMode} {
		shieldOff = mode.backwards
		t.Run(mode.name, func(t *testing.T) {
			start := time.Now()
			var tally reserveTally
			var trimKnown, resetKnown, giveBackKnown int
			var trimExample, resetExample, giveBackExample string
			example := func(s uint64, seq []diffStep, check diffCheck) string {
				small := shrink(newPair, seq, check)
				return fmt.Sprintf("seed %d, shortest sequence:\n%s", s, formatRows(runDiff(newPair, small)))
			}
			for i := 0; i < *diffN; i++ {
				s := seed + uint64(i)
				seq := genSequence(rand.New(rand.NewPCG(s, 0x5eed)), *diffSteps, mode)
				rows := runDiff(newPair, seq)
				if mode.reserve {
					tally.add(rows)
				}
				fail := func(what string, check diffCheck) {
					small := shrink(newPair, seq, check)
					t.Fatalf("%s (mode %s, sequence %d, seed %d: replay with -run 'TestDifferential.*/%s' -diff.seed=%d -diff.n=1)\n"+
						"shortest failing sequence found (%d of %d steps), run on fresh state from epoch:\n%s",
						what, mode.name, i, s, mode.name, s, len(small), len(seq), formatRows(runDiff(newPair, small)))
				}
				// Redis must do exactly what its scripts are meant to do.
				if redisOffModel(rows) >= 0 {
					fail("redis disagrees with the model of the scripts", redisOffModel)
				}
				// Forward, that is also the documented semantics.
				if redisOffPure(rows) >= 0 && !mode.backwards && !mode.reshape {
					fail("redis disagrees with the documented semantics", redisOffPure)
				}
				if trimmingShows(rows) >= 0 {
					trimKnown++
					if trimExample == "" {
						trimExample = example(s, seq, trimmingShows)
					}
				}
				if resetShows(rows) >= 0 {
					resetKnown++
					if resetExample == "" {
						resetExample = example(s, seq, resetShows)
					}
				}
				if resetGiveBackShows(rows) >= 0 {
					giveBackKnown++
					if giveBackExample == "" {
						giveBackExample = example(s, seq, resetGiveBackShows)
					}
				}
				if localOffRedis(rows) < 0 {
					continue
				}
				fail("local and redis disagree", localOffRedis)
			}
			t.Logf("mode %s: %d sequences of %d steps (first seed %d) in %v; redis matched the model of its scripts in all; "+
				"trimming forgot events that docs/semantics.md's formula counts in %d; ResetAfter differed from docs/semantics.md's in %d; "+
				"local matched redis in %d",
				mode.name, *diffN, *diffSteps, seed, time.Since(start).Round(time.Millisecond), trimKnown, resetKnown, *diffN)
			if trimKnown > 0 {
				t.Logf("trimming: example, %s", trimExample)
			}
			if mode.reserve {
				t.Logf("mode reserve: %v", &tally)
			}
			if giveBackKnown > 0 {
				t.Logf("known issue: in %d sequences a settle for less after a Reset of its pair gave back events recorded since "+
					"(the model gives nothing back: the Reset cleared the reservation's events; the comparison of such a sequence "+
					"stops there): example, %s", giveBackKnown, giveBackExample)
			}
			if resetKnown > 0 {
				t.Logf("ResetAfter of an allowed call is Window although a later-stamped event keeps the window "+
					"busy longer: example, %s", resetExample)
			}
			// Both deviations from docs/semantics.md's formula need a clock that jumps back
			// by more than a window, or a Window that grows under one name (the
			// log keeps two windows of events), or a later-stamped event: they
			// are documented behaviour in mode anything, and bugs in mode
			// forward.
			if !mode.backwards && trimKnown+resetKnown > 0 {
				t.Errorf("with a clock that only moves forward and fixed windows, the limiter left docs/semantics.md's formula: "+
					"trimming in %d sequences, ResetAfter in %d (examples in the log)", trimKnown, resetKnown)
			}
		})
	}
}

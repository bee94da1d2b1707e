package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// The differential test's prefetch mode (issue 30): seeded random
// sequences of Allow, AllowN, Peek, Reset and clock moves on two or three
// Limiters on one redis-server, sharing one fake clock, over rules with
// Prefetch (and the same rules without it: the same logs, decided on
// Redis), with several calls at one instant so that pairs get hot and take
// slots. A prefetching fleet under-admits what it holds unused; it never
// admits what the exact log would not. So the model is the exact log of
// the calls the fleet actually allowed, at their times, and at every
// allowed call of n events at t:
//
//	(the events allowed in (t - Window, t]) + n <= Rate
//
// which, the clock only moving forward, is the containment criterion on
// the fake clock: no Window-long interval holds more than Rate allowed
// events. A rejected call the model would have allowed is an
// under-admission: counted and logged, never a failure; so are rejections
// of a banned key (the model knows no penalty). No call errs or comes back
// Degraded.
//
// A Reset empties the pair's log at once: the model forgets what it held.
// It voids the resetting Limiter's slots at once, and the other Limiters'
// when their grants end (docs/prefetch.md, "Reset"): a call another
// Limiter allows from a slot granted before the Reset, less than Prefetch
// after it, is such a use, counted and left out of the model (Redis' log
// no longer holds it either); one Prefetch or more after the Reset, or on
// the resetting Limiter, it fails the test. (A slot's grant time is its
// Result's: ResetAfter is the Window from the slot's stamp, the grant's
// request time plus Prefetch; a Reset is always followed by a clock move,
// so that a grant's time tells before from after.)
//
// A failure prints the seed and the shortest failing sequence found. The
// write-back loop gives back lapsed slots in the background, so a replay
// may differ from the run in timing; what is checked holds whatever it.
// The sequences and their length are -diff.n and -diff.steps, as in the
// other modes.

// pfDiffPenalty is the ladder of the penalised rule with Prefetch.
var pfDiffPenalty = &ratelimit.Penalty{WarnAfter: 2, BanAfter: 4, BanFor: 150 * time.Millisecond, Memory: time.Second}

// pfDiffRules are the rules the sequences draw: each name once with
// Prefetch and once without (the same log, decided on Redis).
var pfDiffRules = func() []ratelimit.Rule {
	var out []ratelimit.Rule
	for _, r := range []ratelimit.Rule{
		{Name: "p", Limit: ratelimit.Limit{Rate: 5, Window: 100 * time.Millisecond}, Prefetch: 10 * time.Millisecond},
		{Name: "q", Limit: ratelimit.Limit{Rate: 12, Window: time.Second}, Prefetch: 60 * time.Millisecond},
		{Name: "s", Limit: ratelimit.Limit{Rate: 3, Window: 30 * time.Millisecond}, Prefetch: 3 * time.Millisecond},
		{Name: "b:pen", Limit: ratelimit.Limit{Rate: 8, Window: 200 * time.Millisecond}, Prefetch: 20 * time.Millisecond, Penalty: pfDiffPenalty},
	} {
		plain := r
		plain.Prefetch = 0
		out = append(out, r, plain)
	}
	return out
}()

var pfDiffKeys = []string{"k", "k2"}

// pfRuleAt is the rule a step's index names: pfDiffRules, then
// pfKindDiffRules (the kinds' mode, diffprefetchkinds_test.go), then
// pgRules (GCRA's, prefetch_gcra_test.go, from pgBase).
func pfRuleAt(i int) ratelimit.Rule {
	switch {
	case i < len(pfDiffRules):
		return pfDiffRules[i]
	case i < pgBase:
		return pfKindDiffRules[i-len(pfDiffRules)]
	}
	return pgRules[i-pgBase]
}

type pfKind int

const (
	pfAllow pfKind = iota
	pfAllowN
	pfPeek
	pfReset
	pfAdvance
)

// pfStep is one step: a call on Limiter inst of pfRuleAt(rule) on
// pfDiffKeys[key], a Close (pgClose, hand-written sequences only), or a
// move of the clock by d.
type pfStep struct {
	kind pfKind
	inst int
	rule int // index for pfRuleAt
	key  int
	n    int
	d    time.Duration
}

func (s pfStep) String() string {
	switch s.kind {
	case pfAdvance:
		return fmt.Sprintf("clock %+v", s.d)
	case pgClose:
		return fmt.Sprintf("L%d.Close()", s.inst)
	}
	r := pfRuleAt(s.rule)
	desc := fmt.Sprintf("%q %d/%v", r.Name, r.Limit.Rate, r.Limit.Window)
	switch {
	case r.Kind == ratelimit.GCRA:
		desc += fmt.Sprintf(" burst %d", burst(r))
	case r.Kind == ratelimit.FixedWindow:
		desc = "fixed " + desc
	case r.Kind == ratelimit.CalendarQuota:
		desc = fmt.Sprintf("quota %q %d a day", r.Name, r.Limit.Rate)
	}
	if r.Prefetch > 0 {
		desc += fmt.Sprintf(" prefetch %v", r.Prefetch)
	}
	if r.Penalty != nil {
		desc += "+penalty"
	}
	call := map[pfKind]string{pfAllow: "Allow", pfAllowN: "AllowN", pfPeek: "Peek", pfReset: "Reset"}[s.kind]
	if s.kind == pfAllowN {
		return fmt.Sprintf("L%d.%s(%s, %q, %d)", s.inst, call, desc, pfDiffKeys[s.key], s.n)
	}
	return fmt.Sprintf("L%d.%s(%s, %q)", s.inst, call, desc, pfDiffKeys[s.key])
}

// genPFSequence draws a sequence for a fleet of limiters: mostly calls,
// several at one instant, on one or two of the rules' names (with Prefetch
// three times in four) and mostly one key, so that pairs get hot; clock
// moves of a few µs, of up to twice a Prefetch, to a grant's end or a
// window's (from an earlier call, and 1µs either side), and jumps.
func genPFSequence(rng *rand.Rand, steps, limiters int) []pfStep {
	return genPFSequenceOf(rng, steps, limiters, 0, len(pfDiffRules))
}

// genPFSequenceOf draws genPFSequence's sequence from the rules
// pfRuleAt(base .. base+rules-1), pairs of a rule with Prefetch and the
// same without; a move to a window's end from an earlier call is, for a
// fixed window or a quota, to the end of that call's window or period.
func genPFSequenceOf(rng *rand.Rand, steps, limiters, base, rules int) []pfStep {
	var g pfGen
	names := rules / 2
	focus := []int{rng.IntN(names)}
	if rng.IntN(2) == 0 {
		focus = append(focus, rng.IntN(names))
	}
	for len(g.seq) < steps {
		if rng.IntN(6) == 0 {
			r := pfRuleAt(base + 2*focus[rng.IntN(len(focus))])
			p := max(r.Prefetch, time.Millisecond)
			g.drawMove(rng, p, [4]int{6, 11, 14, 19},
				func() time.Duration { return g.callTime(rng) + p + time.Duration(rng.IntN(3)-1)*time.Microsecond },
				func() time.Duration {
					return pfEdge(r, g.callTime(rng)) + time.Duration(rng.IntN(3)-1)*time.Microsecond
				})
			continue
		}
		s := pfStep{inst: rng.IntN(limiters), rule: base + 2*focus[rng.IntN(len(focus))] + b2i(rng.IntN(4) == 0), key: b2i(rng.IntN(6) == 0)}
		g.drawCall(rng, s, 62, pfRuleAt(s.rule).Limit.Rate)
	}
	return g.seq
}

// pfGen is a sequence being drawn: its steps, the clock's offset from
// epoch, and the times of its calls.
type pfGen struct {
	seq       []pfStep
	now       time.Duration
	callTimes []time.Duration
}

// move moves the clock by d, at least 1µs.
func (g *pfGen) move(d time.Duration) {
	d = max(d, time.Microsecond)
	g.now += d
	g.seq = append(g.seq, pfStep{kind: pfAdvance, d: d})
}

// drawMove draws a clock move and makes it: of 1 to 5µs, of up to 2p, to
// the time grantEnd draws (from an earlier call), to the one edge draws
// (likewise), or a jump of up to 1.5s; cuts are the first four's upper
// bounds in 20 (the last two drawn only once a call was made).
func (g *pfGen) drawMove(rng *rand.Rand, p time.Duration, cuts [4]int, grantEnd, edge func() time.Duration) {
	var d time.Duration
	switch x := rng.IntN(20); {
	case x < cuts[0]:
		d = time.Duration(1+rng.IntN(5)) * time.Microsecond
	case x < cuts[1]:
		d = time.Duration(rng.Int64N(int64(2 * p)))
	case x < cuts[2] && len(g.callTimes) > 0:
		d = grantEnd() - g.now
	case x < cuts[3] && len(g.callTimes) > 0:
		d = edge() - g.now
	default:
		d = time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
	}
	g.move(d)
}

// callTime draws the time of one of the calls made so far.
func (g *pfGen) callTime(rng *rand.Rand) time.Duration {
	return g.callTimes[rng.IntN(len(g.callTimes))]
}

// call appends the call s, at the clock's time.
func (g *pfGen) call(s pfStep) {
	g.callTimes = append(g.callTimes, g.now)
	g.seq = append(g.seq, s)
}

// drawCall draws what s calls and appends it: Allow (allow in 100),
// AllowN of 1 to min(3, most) events (to 84 in 100), Peek (to 97) or
// Reset, which a clock move of 1 to 3µs follows.
func (g *pfGen) drawCall(rng *rand.Rand, s pfStep, allow, most int) {
	switch x := rng.IntN(100); {
	case x < allow:
		s.kind = pfAllow
	case x < 84:
		s.kind = pfAllowN
		s.n = 1 + rng.IntN(min(3, most))
	case x < 97:
		s.kind = pfPeek
	default:
		s.kind = pfReset
	}
	g.call(s)
	if s.kind == pfReset {
		g.move(time.Duration(1+rng.IntN(3)) * time.Microsecond)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pfRow is one step of a run and, for a call, what it answered.
type pfRow struct {
	i    int
	step pfStep
	now  time.Duration // since testkit.Epoch
	res  ratelimit.Result
	err  error
	path ratelimit.Path
	// what the check made of it
	under, voided, banned bool
	fail                  string
}

func (r pfRow) String() string {
	if r.step.kind == pfAdvance || r.step.kind == pgClose {
		if r.fail != "" {
			return fmt.Sprintf("%3d  FAIL: %s", r.i, r.fail)
		}
		return fmt.Sprintf("%3d  %v  (now epoch%+v)", r.i, r.step, r.now)
	}
	s := fmt.Sprintf("%3d  %v", r.i, r.step)
	switch {
	case r.err != nil:
		s += fmt.Sprintf("\n       error %v", r.err)
	case r.step.kind != pfReset:
		s += fmt.Sprintf("\n       allowed=%v remaining=%d retry=%v reset=%v on %v", r.res.Allowed, r.res.Remaining, r.res.RetryAfter, r.res.ResetAfter, r.path)
		if r.res.Banned {
			s += " banned"
		}
		if r.res.Degraded {
			s += " DEGRADED"
		}
	}
	// GCRA's check (runPGDiff) voids only the slots of another
	// Limiter's grant.
	gcra := pfRuleAt(r.step.rule).Kind == ratelimit.GCRA
	if r.under && gcra {
		s += "  (under-admitted: the exact GCRA allows it)"
	} else if r.under {
		s += "  (under-admitted: the model allows it)"
	}
	if r.voided && gcra {
		s += "  (a slot granted before another Limiter's Reset)"
	} else if r.voided {
		s += "  (a slot granted before a Reset)"
	}
	if r.fail != "" {
		s += "\n       FAIL: " + r.fail
	}
	return s
}

// pfFleetNew makes the Limiters of one run: a key prefix of their own on
// one client, one fake clock.
type pfFleetNew func(limiters int) (lims []*ratelimit.Limiter, paths []*ratelimit.Path, clk interface{ Set(time.Time) }, done func())

// pfTally counts what the runs did.
type pfTally struct {
	calls, allowed, fromSlots, rejected, under, banned, voided, sequences int
	underBy                                                               [8]int // by the rejection's path
	grants, granted, used, returned                                       uint64
}

func (t *pfTally) String() string {
	return fmt.Sprintf("%d sequences, %d calls: %d allowed (%d from slots), %d rejected (%d of a banned key); "+
		"the model would have allowed %d of the rejected (%.1f%% of the calls; %s); %d slots granted before a Reset used after it; "+
		"%d grants of %d slots, %d used, %d returned",
		t.sequences, t.calls, t.allowed, t.fromSlots, t.rejected, t.banned, t.under, 100*float64(t.under)/float64(max(t.calls, 1)),
		t.underPaths(), t.voided, t.grants, t.granted, t.used, t.returned)
}

// underPaths says where the under-admitted calls were rejected.
func (t *pfTally) underPaths() string {
	var parts []string
	for p, n := range t.underBy {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d on %v", n, ratelimit.Path(p)))
		}
	}
	return strings.Join(parts, ", ")
}

// runPFDiff runs seq on a fresh fleet of limiters and checks every row
// (see the top of the file); tally, when not nil, counts what it did.
func runPFDiff(newFleet pfFleetNew, limiters int, seq []pfStep, tally *pfTally) []pfRow {
	logs := map[[2]string][]pfEvent{}
	resets := map[[2]string]pfResetAt{}
	// held is when each Limiter's grant of a pair was made (the step whose
	// call raised its PrefetchGrants: a grant is only asked for by a call
	// of its pair), until a ban or its own Reset closed it.
	type heldKey struct {
		inst int
		pair [2]string
	}
	held := map[heldKey]int64{}
	return runPFSteps(newFleet, limiters, seq, func(row *pfRow, r ratelimit.Rule, key string, n int, t int64, grants0, grants1 uint64) {
		s := row.step
		fresh := grants1 > grants0 // a grant of the pair at this step
		pair := [2]string{r.Name, key}
		hk := heldKey{s.inst, pair}
		grantAt, holds := held[hk]
		usable := holds && t < pfUsableUntil(r, grantAt)
		rate := int64(r.Limit.Rate)
		switch {
		case row.unhealthy():
		case s.kind == pfReset:
			delete(logs, pair)
			delete(held, hk) // the Limiter's own Reset voids its slots
			resets[pair] = pfResetAt{t, s.inst}
		case s.kind == pfPeek:
		default:
			count := pfModelCount(r, logs[pair], t)
			fits := count+int64(n) <= rate
			tally.decided(row, fits)
			if !row.res.Allowed {
				break
			}
			if row.path == ratelimit.PathPrefetch && !fresh && !usable {
				if holds {
					row.fail = fmt.Sprintf("allowed from a slot, but this Limiter's grant of the pair (at epoch%+v) was usable until epoch%+v, and it made none since",
						time.Duration(grantAt-testkit.Epoch().UnixMicro())*time.Microsecond, time.Duration(pfUsableUntil(r, grantAt)-testkit.Epoch().UnixMicro())*time.Microsecond)
				} else {
					row.fail = "allowed from a slot, but this Limiter holds no grant of the pair (none made, or a ban or its own Reset closed it)"
				}
				break
			}
			if rs, ok := resets[pair]; ok && row.path == ratelimit.PathPrefetch && pfWindowed(r) {
				// A slot of a window or period has no stamp of its own: a
				// use is of a slot granted before another Limiter's Reset
				// when the grant this Limiter held was, and still was
				// usable (when this step made a grant too, the use may be
				// of either: counted as voided, the model the laxer).
				if rs.inst != s.inst && usable && grantAt <= rs.at {
					row.voided = true
					if tally != nil {
						tally.voided++
					}
					break
				}
			} else if ok && row.path == ratelimit.PathPrefetch {
				// The slot's grant was requested at until - Prefetch.
				until := t + (row.res.ResetAfter - r.Limit.Window).Microseconds()
				if sent := until - r.Prefetch.Microseconds(); sent <= rs.at {
					row.voided = true
					if tally != nil {
						tally.voided++
					}
					switch {
					case rs.inst == s.inst:
						row.fail = fmt.Sprintf("allowed from a slot granted at epoch%+v, before this Limiter's own Reset at epoch%+v", time.Duration(sent-testkit.Epoch().UnixMicro())*time.Microsecond, time.Duration(rs.at-testkit.Epoch().UnixMicro())*time.Microsecond)
					case t >= rs.at+r.Prefetch.Microseconds():
						row.fail = fmt.Sprintf("allowed from a slot granted before another Limiter's Reset, %v after it: Prefetch or more", time.Duration(t-rs.at)*time.Microsecond)
					}
					break
				}
			}
			if !fits {
				row.fail = fmt.Sprintf("allowed %d where the fleet's allowed calls hold %d in the window: more than Rate %d", n, count, rate)
			}
			logs[pair] = append(logs[pair], pfEvent{t, int64(n)})
		}
		switch {
		case row.res.Banned && r.Prefetch > 0 && s.kind != pfPeek:
			// A ban a call of the rule with Prefetch meets closes the
			// grant. (One met by a call of the name's rule without it,
			// or by a Peek, does not: the slots stay usable until the
			// grant ends, as on another process.)
			delete(held, hk)
		case fresh:
			held[hk] = t
		}
	}, tally)
}

// pfResetAt is a pair's last Reset: when (µs), by which Limiter.
type pfResetAt struct {
	at   int64
	inst int
}

// pfCheck checks a call's row as run, r's call of n events on key at t
// (µs), its Limiter's PrefetchGrants grants0 before it and grants1 after.
type pfCheck func(row *pfRow, r ratelimit.Rule, key string, n int, t int64, grants0, grants1 uint64)

// runPFSteps runs seq on a fresh fleet of limiters: it moves the clock,
// closes a Limiter (pgClose), or makes a call and has check check its
// row; then it closes the fleet and checks its Stats (pfAfterClose).
func runPFSteps(newFleet pfFleetNew, limiters int, seq []pfStep, check pfCheck, tally *pfTally) []pfRow {
	lims, paths, clk, done := newFleet(limiters)
	closed := false
	defer func() {
		if !closed {
			done()
		}
	}()
	ctx := context.Background()
	now := testkit.Epoch()
	rows := make([]pfRow, 0, len(seq))
	for i, s := range seq {
		row := pfRow{i: i, step: s, now: now.Sub(testkit.Epoch())}
		switch s.kind {
		case pfAdvance:
			now = now.Add(s.d)
			row.now = now.Sub(testkit.Epoch())
			rows = append(rows, row)
			continue
		case pgClose:
			lims[s.inst].Close()
			rows = append(rows, row)
			continue
		}
		clk.Set(now)
		l, r, key := lims[s.inst], pfRuleAt(s.rule), pfDiffKeys[s.key]
		*paths[s.inst] = ratelimit.PathNone
		grants0 := l.Stats().PrefetchGrants
		n := row.call(ctx, l, r, key)
		row.path = *paths[s.inst]
		check(&row, r, key, n, now.UnixMicro(), grants0, l.Stats().PrefetchGrants)
		rows = append(rows, row)
	}
	// Close gives back what the grants hold: every slot granted was used
	// or returned, but those a Reset voided (Redis no longer held them).
	done()
	closed = true
	return pfAfterClose(lims, seq, rows, tally)
}

// call makes the row's step's call on l of r and key, and notes what it
// answered; it returns the events the call asks for.
func (row *pfRow) call(ctx context.Context, l *ratelimit.Limiter, r ratelimit.Rule, key string) int {
	n := 1
	switch row.step.kind {
	case pfAllow:
		row.res, row.err = l.Allow(ctx, r, key)
	case pfAllowN:
		n = row.step.n
		row.res, row.err = l.AllowN(ctx, r, key, n)
	case pfPeek:
		row.res, row.err = l.Peek(ctx, r, key)
	case pfReset:
		row.err = l.Reset(ctx, r, key)
	}
	return n
}

// unhealthy fails the row of a call that erred, or came back Degraded on
// a healthy Redis, and reports whether it did.
func (row *pfRow) unhealthy() bool {
	switch {
	case row.err != nil:
		row.fail = "an error"
	case row.res.Degraded:
		row.fail = "Degraded on a healthy Redis"
	default:
		return false
	}
	return true
}

// decided notes a decided call (Allow or AllowN) of row, fits whether the
// model would allow it: a rejected one is of a banned key, or
// under-admitted when it fits; the tally, when not nil, counts it.
func (t *pfTally) decided(row *pfRow, fits bool) {
	if !row.res.Allowed {
		row.banned = row.res.Banned
		row.under = fits && !row.banned
	}
	if t == nil {
		return
	}
	t.calls++
	if !row.res.Allowed {
		t.rejected++
		t.banned += b2i(row.banned)
		t.under += b2i(row.under)
		if row.under {
			t.underBy[row.path]++
		}
		return
	}
	t.allowed++
	t.fromSlots += b2i(row.path == ratelimit.PathPrefetch)
}

// pfAfterClose checks the closed fleet lims that ran seq into rows: every
// slot granted was used or returned (but when seq holds a Reset, which
// voids some), a failing row appended for each Limiter whose Stats do not
// add up; the tally, when not nil, counts the grants and the sequence.
func pfAfterClose(lims []*ratelimit.Limiter, seq []pfStep, rows []pfRow, tally *pfTally) []pfRow {
	reset := false
	for _, s := range seq {
		reset = reset || s.kind == pfReset
	}
	for i, l := range lims {
		st := l.Stats()
		if !reset && st.PrefetchSlotsGranted != st.PrefetchSlotsUsed+st.PrefetchSlotsReturned {
			rows = append(rows, pfRow{i: len(rows), step: pfStep{kind: pfAdvance}, now: rows[len(rows)-1].now,
				fail: fmt.Sprintf("after Close L%d's Stats count %d slots granted, %d used, %d returned", i, st.PrefetchSlotsGranted, st.PrefetchSlotsUsed, st.PrefetchSlotsReturned)})
		}
		if tally != nil {
			tally.grants += st.PrefetchGrants
			tally.granted += st.PrefetchSlotsGranted
			tally.used += st.PrefetchSlotsUsed
			tally.returned += st.PrefetchSlotsReturned
		}
	}
	if tally != nil {
		tally.sequences++
	}
	return rows
}

// firstPFFail returns the index of the first failing row, or -1.
func firstPFFail(rows []pfRow) int {
	for i, r := range rows {
		if r.fail != "" {
			return i
		}
	}
	return -1
}

// pfRun runs seq on a fresh fleet of limiters and checks every row;
// tally, when not nil, counts what it did: runPFDiff, runPGDiff.
type pfRun func(newFleet pfFleetNew, limiters int, seq []pfStep, tally *pfTally) []pfRow

// shrinkPF makes a failing sequence as short as it can while it still
// fails on a fresh fleet, run by run (dropping steps, merging clock moves;
// see shrinkSteps).
func shrinkPF(run pfRun, newFleet pfFleetNew, limiters int, seq []pfStep) []pfStep {
	return shrinkSteps(seq, func(cand []pfStep) int { return firstPFFail(run(newFleet, limiters, cand, nil)) },
		func(a, b pfStep) (pfStep, bool) {
			return pfStep{kind: pfAdvance, d: a.d + b.d}, a.kind == pfAdvance && b.kind == pfAdvance
		})
}

// pfMode is one of the differential test's prefetch modes: its sequences
// (gen, drawing from the PCG stream), how a run is checked (run), the
// bound a failure names ("the exact log's bound") and the mode's name in
// the log line.
type pfMode struct {
	name, bound string
	stream      uint64
	gen         func(rng *rand.Rand, steps, limiters int) []pfStep
	run         pfRun
}

// runPFMode runs mode's -diff.n sequences of -diff.steps from -diff.seed
// on fleets of two or three of newFleet's, as TestDifferential does: the
// first failing one fails the test with the seed, the rows as run and the
// shortest failing sequence found; then it logs the tally and fails when
// no call was allowed from slots.
func runPFMode(t *testing.T, newFleet pfFleetNew, mode pfMode) {
	t.Helper()
	seed := *diffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	start := time.Now()
	var tally pfTally
	for i := 0; i < *diffN; i++ {
		s := seed + uint64(i)
		rng := rand.New(rand.NewPCG(s, mode.stream))
		limiters := 2 + rng.IntN(2)
		seq := mode.gen(rng, *diffSteps, limiters)
		rows := mode.run(newFleet, limiters, seq, &tally)
		if firstPFFail(rows) < 0 {
			continue
		}
		small := shrinkPF(mode.run, newFleet, limiters, seq)
		t.Fatalf("a prefetching fleet of %d left %s (sequence %d, seed %d: replay with -run '%s' -diff.seed=%d -diff.n=1)\n"+
			"as run:\n%s\nshortest failing sequence found (%d of %d steps), run on a fresh fleet from epoch:\n%s",
			limiters, mode.bound, i, s, t.Name(), s, formatPFRows(rows[:firstPFFail(rows)+1]), len(small), len(seq), formatPFRows(mode.run(newFleet, limiters, small, nil)))
	}
	t.Logf("%s: %v; in %v (first seed %d, %d steps each)", mode.name, &tally, time.Since(start).Round(time.Millisecond), seed, *diffSteps)
	if tally.fromSlots == 0 {
		t.Errorf("no call was allowed from slots: the sequences never made a pair hot")
	}
}

// TestDifferentialPrefetch runs the prefetch mode (see the top of the
// file) on redis-server.
func TestDifferentialPrefetch(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	runPFMode(t, pfDiffFleetNew(t, "dpf"), pfMode{name: "prefetch mode", bound: "the exact log's bound", stream: 0x9f, gen: genPFSequence, run: runPFDiff})
}

// pfDiffFleetNew returns a pfFleetNew on a fresh redis-server: each run's fleet
// has a key prefix of its own, prefix and the run's number.
func pfDiffFleetNew(t *testing.T, prefix string) pfFleetNew {
	server := redistest.Start(t, redistest.Options{})
	client := testkit.NewClient(t, server.Addr())
	runs := atomic.Int64{}
	return func(limiters int) ([]*ratelimit.Limiter, []*ratelimit.Path, interface{ Set(time.Time) }, func()) {
		return pfDiffFleet(t, client, fmt.Sprintf("%s%d:", prefix, runs.Add(1)), limiters)
	}
}

// pfDiffFleet makes limiters Limiters on client under prefix, on one fake
// clock, each reporting its decisions' path.
func pfDiffFleet(t *testing.T, client rueidis.Client, prefix string, limiters int) ([]*ratelimit.Limiter, []*ratelimit.Path, interface{ Set(time.Time) }, func()) {
	clk := testkit.NewClock()
	var lims []*ratelimit.Limiter
	var paths []*ratelimit.Path
	for range limiters {
		path := new(ratelimit.Path)
		opts := testkit.Options(clk)
		opts.KeyPrefix = prefix
		opts.OnDecision = func(d ratelimit.Decision) { *path = d.Path }
		l, err := ratelimit.New(client, opts)
		if err != nil {
			t.Fatal(err)
		}
		lims, paths = append(lims, l), append(paths, path)
	}
	return lims, paths, clk, func() {
		for _, l := range lims {
			l.Close()
		}
	}
}

func formatPFRows(rows []pfRow) string {
	lines := make([]string, len(rows))
	for i, r := range rows {
		lines[i] = r.String()
	}
	return strings.Join(lines, "\n")
}

package reliability_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// Mode reserve of the differential test (differential_test.go): mode
// forward's sequences with Reserve, Settle and Cancel steps among the
// calls, over the rules of every kind, approximate counters included, and
// the models' reading of issue 29: a Reserve decides as AllowN and records
// its n events at its time t0; after a Settle for less, every kind counts
// what it would had the Reserve asked for actual at t0 (the model replays
// the pair's records with actual in place of n: the log loses n - actual
// of the events at t0, a counter, a quota or a fixed window as many from
// the window or period they went into, which changes nothing once that no
// longer counts); after a Settle for more, the extra is recorded at the
// settle's time, past the limit; a Reservation settles once; events a Reset
// cleared are not given back.

// Known, and kept out of mode reserve (its penalised rules remember
// violations longer than a sequence lasts: see reservePenalty), found by
// its first runs and no part of reservations: violations the hot-key
// shield answered (owed to Redis, delivered by the pair's next call as
// strikes, the last at struck) after Redis' own were forgotten (Memory
// since its last) are added to Redis' forgotten ones: lua/penalty.lua's
// penalty.deliver forgets nothing, and cannot tell whether the first of
// the strikes came Memory after Redis' last (the call sends the last
// strike's time only). A quota of 3 a week with diffPenalty (Memory 5s):
// Allow, AllowN(2), Allow (a violation, the shield caches the rejection),
// 88s later Allow (the shield: violation 1, owed), Peek: Redis answers 2
// violations, the local path and the model 1.

// knownResetGiveBack: a settle for less after a Reset of its pair gives
// back from the events the pair recorded since the Reset, in the window or
// period the reservation's went into (a log's: at the reservation's very
// µs, and only in this process' own log; Redis' log removes the
// reservation's own members), while the Reset had cleared the
// reservation's events: the model gives nothing back. Known, not fixed
// yet: a reservation would need to know whether its pair was reset since
// (a record that names the Reset it followed, see lua/reset.lua and
// lua/undo.lua, and the like in the process). Until then a sequence's
// comparison stops at such a settle, and the test counts and logs them.
const knownResetGiveBack = false

// reserveKinds are the kinds of rule Reserve takes (Concurrency never
// does: a slot is Acquire's). A Reserve under a rule of another kind is
// ErrInvalidRule, on every side. The model replays a bucket's records as
// any other kind's.
var reserveKinds = map[ratelimit.Kind]bool{
	ratelimit.SlidingLog:    true, // exact and approximate
	ratelimit.GCRA:          true,
	ratelimit.CalendarQuota: true,
	ratelimit.FixedWindow:   true,
}

// meterOp is one change of a pair's meter in a model: n events recorded
// at at under rule, or (trim) the events at or before at - window dropped.
type meterOp struct {
	trim   bool
	rule   ratelimit.Rule
	at, n  int64
	window int64
}

// modelHeld is a reservation in a model.
type modelHeld struct {
	s       *modelState // the pair's state the Reserve recorded in
	op      int         // its record among s.ops
	rule    ratelimit.Rule
	key     string
	n       int64
	settled bool
}

// rebuild makes the meter again from its ops, in order.
func (s *modelState) rebuild() {
	s.kinds, s.events = kinds{}, nil
	for _, op := range s.ops {
		switch {
		case op.trim:
			s.dropOld(op.at, op.window)
		case op.n > 0: // a record of nothing changes nothing
			s.apply(op.rule, op.at, op.n)
		}
	}
}

// reserve answers Reserve(rule, key, n) at now, which holds the events
// it records as reservation id.
func (m *diffModel) reserve(id int, rule ratelimit.Rule, key string, now time.Time, n int64) diffOutcome {
	if !reserveKinds[rule.Kind] {
		return diffOutcome{sentinel: "ErrInvalidRule"}
	}
	res := m.decide(rule, key, now, n, false)
	if res.Allowed {
		s := m.get(rule.Name, key)
		m.held[id] = &modelHeld{s: s, op: len(s.ops) - 1, rule: rule, key: key, n: n}
	}
	return diffOutcome{res: res}
}

// settle answers reservation id's Settle(actual) at now.
func (m *diffModel) settle(id int, now time.Time, actual int64) diffOutcome {
	h := m.held[id]
	switch {
	case h == nil:
		return diffOutcome{sentinel: "ErrNoReservation"}
	case actual < 0 || actual > ratelimit.MaxSettleFactor*int64(capacity(h.rule)):
		return diffOutcome{sentinel: "ErrInvalidN"}
	case h.settled:
		return diffOutcome{sentinel: "ErrSettled"}
	}
	h.settled = true
	switch {
	case actual < h.n:
		if m.state[[2]string{h.rule.Name, h.key}] != h.s {
			m.resetGiveBack = true
			break // a Reset cleared the events: nothing is given back
		}
		h.s.ops[h.op].n = actual
		h.s.rebuild()
	case actual > h.n:
		m.get(h.rule.Name, h.key).record(h.rule, now.UnixMicro(), actual-h.n)
	}
	return diffOutcome{}
}

// sentinelOf names the sentinel error err wraps, as the models name it.
func sentinelOf(err error) string {
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrNoReservation", ratelimit.ErrNoReservation},
		{"ErrSettled", ratelimit.ErrSettled},
		{"ErrInvalidN", ratelimit.ErrInvalidN},
		{"ErrInvalidRule", ratelimit.ErrInvalidRule},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "unexpected"
}

// genReserveSequence draws a sequence of mode reserve: clock moves as
// genSequence's, and calls on one to three rules (of diffRules) and one or
// two keys of the sequence's own, so that reservations meet other calls,
// window and period boundaries and each other on one pair: Allow, AllowN,
// Peek, now and then a Reset, and Reserve of 1 to the rule's capacity;
// Settle of a reservation made before (or of a Reserve that was rejected or
// failed: no reservation) at 0 to 2n + 2 events (less than n about half
// the time), now and then outside the bounds; Cancel. Settles and cancels mostly name a reservation not
// settled yet, sometimes any (settled twice).
func genReserveSequence(rng *rand.Rand, steps int, mode diffMode) []diffStep {
	all := mode.allowedRules()
	rules := make([]int, 1+rng.IntN(3))
	for i := range rules {
		rules[i] = all[rng.IntN(len(all))]
	}
	keys := []int{rng.IntN(len(diffKeys))}
	if rng.IntN(3) == 0 {
		keys = append(keys, rng.IntN(len(diffKeys)))
	}
	type made struct {
		step    diffStep
		settled bool
	}
	var reserves []*made
	pick := func() *made {
		var open []*made
		for _, r := range reserves {
			if !r.settled {
				open = append(open, r)
			}
		}
		if len(open) > 0 && rng.IntN(4) != 0 {
			return open[rng.IntN(len(open))]
		}
		return reserves[rng.IntN(len(reserves))]
	}
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
		s := diffStep{rule: rules[rng.IntN(len(rules))], key: keys[rng.IntN(len(keys))]}
		switch x := rng.IntN(40); {
		case x < 7:
			s.kind = diffAllow
		case x < 11:
			s.kind = diffAllowN
			s.n = 1 + rng.IntN(capacity(diffRules[s.rule]))
		case x < 16:
			s.kind = diffPeek
		case x < 17:
			s.kind = diffReset
		case x < 27 || len(reserves) == 0:
			s.kind = diffReserve
			s.n = 1 + rng.IntN(capacity(diffRules[s.rule]))
			s.res = len(reserves)
			reserves = append(reserves, &made{step: s})
		default:
			r := pick()
			s.kind, s.rule, s.key, s.res = diffSettle, r.step.rule, r.step.key, r.step.res
			switch y := rng.IntN(30); {
			case x >= 36:
				s.kind = diffCancel
			case y == 0:
				s.n = -1
			case y == 1:
				s.n = ratelimit.MaxSettleFactor*capacity(diffRules[s.rule]) + 1
			case y < 4:
				s.n = r.step.n
			case y < 16:
				s.n = rng.IntN(r.step.n) // less
			default:
				s.n = rng.IntN(2*r.step.n + 3)
			}
			r.settled = s.n >= 0 && s.n <= ratelimit.MaxSettleFactor*capacity(diffRules[s.rule])
		}
		callTimes = append(callTimes, now)
		seq = append(seq, s)
	}
	return seq
}

// reserveTally counts what a run of mode reserve exercised.
type reserveTally struct {
	reserves, allowed                int
	less, equal, more, cancels       int
	twice, none, invalid, wrongRules int
	byKind                           map[string]int // settles that changed a count, by kind
}

// add counts the reservations and settles of one run's rows, as Redis
// answered them.
func (t *reserveTally) add(rows []diffRow) {
	if t.byKind == nil {
		t.byKind = map[string]int{}
	}
	reserved := map[int]int{}
	for _, r := range rows {
		switch r.step.kind {
		case diffReserve:
			t.reserves++
			if r.redis.sentinel == "ErrInvalidRule" {
				t.wrongRules++
			}
			if r.redis.res.Allowed {
				t.allowed++
				reserved[r.step.res] = r.step.n
			}
			continue
		case diffSettle, diffCancel:
		default:
			continue
		}
		switch r.redis.sentinel {
		case "ErrSettled":
			t.twice++
			continue
		case "ErrNoReservation":
			t.none++
			continue
		case "ErrInvalidN":
			t.invalid++
			continue
		}
		n, actual := reserved[r.step.res], r.step.n
		switch {
		case r.step.kind == diffCancel:
			t.cancels++
		case actual < n:
			t.less++
		case actual == n:
			t.equal++
			continue
		default:
			t.more++
		}
		t.byKind[kindName(diffRules[r.step.rule])]++
	}
}

func (t *reserveTally) String() string {
	return fmt.Sprintf("%d reserves (%d allowed, %d refused for their kind); settles for less %d, equal %d, more %d, cancels %d "+
		"(by kind %v); settled twice %d, no reservation %d, out of bounds %d",
		t.reserves, t.allowed, t.wrongRules, t.less, t.equal, t.more, t.cancels, t.byKind, t.twice, t.none, t.invalid)
}

// kindName names r's kind in the tally.
func kindName(r ratelimit.Rule) string {
	if r.Approximate {
		return "approximate"
	}
	return r.Kind.String()
}

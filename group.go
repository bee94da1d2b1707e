package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/ratelimit-go/ratelimit/internal/crowd"
	"github.com/ratelimit-go/ratelimit/internal/ladder"
	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/ratelimit-go/ratelimit/internal/script"
	"github.com/redis/rueidis"
)

// MaxGroupSize is the most pairs one AllowGroup call may hold.
const MaxGroupSize = 16

// AllowGroup is AllowAll for pairs declared as one group, such as a user's
// per-second, per-minute and per-day rules tagged by the user id: their
// Redis keys share the group's hash tag, so one script decides all of them
// at once. The request is allowed, and every pair records its events, only
// if every pair allows it; otherwise nothing is recorded (the first denying
// pair counts its violation, as Allow would). It returns the Results of the
// pairs asked, as AllowAll does. A rule in dry run never denies.
//
// A pair's state in a group is its own, apart from the same rule and key
// used outside the group or in another group: use each (rule, key) in one
// place. group must not be empty; approximate rules cannot be grouped (GCRA
// and calendar quota rules can); a group holds at most MaxGroupSize pairs. While Redis cannot be used the
// pairs are decided locally, in order, as AllowAll decides them.
func (l *Limiter) AllowGroup(ctx context.Context, group string, checks []Check) ([]Result, error) {
	rep := l.reporter()
	results, path, err := l.routeGroup(ctx, group, checks)
	if rep.on() {
		ds := make([]Decision, 0, len(results)+1)
		for i := range results {
			c := &checks[i]
			ds = append(ds, Decision{Rule: c.Rule, Key: c.Key, N: max(c.N, 1), Result: results[i], Path: path})
		}
		if err != nil && len(checks) > 0 {
			c := &checks[0]
			ds = append(ds, Decision{Rule: c.Rule, Key: c.Key, N: max(c.N, 1), Err: err, Path: path})
		}
		rep.report(ds...)
	}
	return results, err
}

// routeGroup decides a group on Redis, or without Redis as AllowAll
// would, and says where.
func (l *Limiter) routeGroup(ctx context.Context, group string, checks []Check) ([]Result, Path, error) {
	if err := l.usable(ctx); err != nil {
		return nil, PathNone, err
	}
	g, err := l.compileGroup(group, checks)
	if err != nil {
		return nil, PathNone, err
	}
	now := l.localNow() // the group's time, read again only after a wait (see awaitGroup)
	for i := range g {
		if p := &g[i].p; p.alg.rules.timed() {
			*p = p.alg.rules.setTime(*p, now)
		}
	}
	conn := l.conn.Load()
	if !l.remote || conn == nil {
		return l.groupWithoutRedis(checks, g, sent{path: PathLocal}, now), PathLocal, nil
	}
	return l.groupOnRedis(ctx, conn, group, checks, g, now)
}

// groupOnRedis decides a group on Redis (or from the shield), or, when the
// pipeline says Redis cannot be used, without it, as onRedis decides one
// pair: a call whose pairs are crowded waits for a seat (see holdGroup),
// and a call admission control would shed waits for a call of one of its
// pairs on the way, when one is (see crowd.go).
func (l *Limiter) groupOnRedis(ctx context.Context, conn *redisConn, group string, checks []Check, g []groupPair, now int64) ([]Result, Path, error) {
	legs := l.groupLegs(conn, g, now)
	var w crowd.Waiting
	defer w.Stop()
	for {
		var shielded []Result
		var err error
		shielded, now, err = l.holdGroup(ctx, &w, g, legs, now)
		switch {
		case err != nil:
			return nil, PathNone, err
		case shielded != nil:
			return shielded, PathShield, nil
		}
		ds, s, member, err := l.sendGroup(ctx, conn, group, g, legs, now)
		switch {
		case err != nil:
			return nil, PathRedis, err
		case s.path == PathRedis:
			return l.groupResults(checks, g, ds, legs, now), PathRedis, nil
		}
		if s.path == PathShed && legs[0].queue {
			// Admission control had no slot: while a call of one of the
			// pairs is on its way, wait for its answer instead.
			if i, seat := l.local.onItsWay(legs); seat != nil {
				shielded, later, err := l.awaitGroup(ctx, &w, g, legs, i, seat, now)
				switch {
				case err != nil:
					return nil, PathNone, err
				case shielded != nil:
					return shielded, PathShield, nil
				}
				now = later
				continue
			}
		}
		if s.mayHaveRun() {
			s.member = member
		}
		results := l.groupWithoutRedis(checks, g, s, now)
		s.release()
		return results, s.path, nil
	}
}

// groupLegs returns the legs of g's call at now, one a pair, each with
// what it counts for the fleet's reserve (see Limiter.reserve).
func (l *Limiter) groupLegs(conn *redisConn, g []groupPair, now int64) []leg {
	legs := make([]leg, len(g))
	queue := l.set.ShieldMax >= 0
	for i := range g {
		legs[i] = leg{k: &g[i].k, p: &g[i].p, n: g[i].n, queue: queue}
		legs[i].reserve, legs[i].lost, legs[i].lostAt = l.reserve(conn, &g[i].p, now)
	}
	return legs
}

// holdGroup holds what this process' own count adds to each pair's
// decision in legs, with the pairs' events reserved where they fit (see
// mirror.go), after waiting for a seat among the calls of each full pair
// (see crowd.go); or returns the shield's answer when the group's first
// pair is a rejection it holds. It returns the time the call goes on at,
// read at now: later after a wait (see Limiter.afterWaiting).
func (l *Limiter) holdGroup(ctx context.Context, w *crowd.Waiting, g []groupPair, legs []leg, now int64) ([]Result, int64, error) {
	for {
		// A group its first pair denies is denied by that pair alone:
		// the shield answers it when it holds that pair's rejection.
		if first := &g[0]; l.set.ShieldMax >= 0 && !first.dry && legs[0].seat == nil {
			if d, ok := l.local.shielded(first.k, &first.p, now, first.n, false, legs[0].waited || l.set.Clock == nil); ok {
				return []Result{d.result(first.p.rate, false)}, now, nil
			}
		}
		i, seat := l.local.holdLegs(legs, now)
		if seat == nil {
			return nil, now, nil
		}
		shielded, later, err := l.awaitGroup(ctx, w, g, legs, i, seat, now)
		if err != nil || shielded != nil {
			return shielded, later, err
		}
		now = later
	}
}

// awaitGroup waits for the seat of legs[i] (see await), and returns the
// shield's answer when the wait ran out at the group's first pair (as the
// shield answers a group its first pair denies, see Limiter.ranOut), or
// ctx's end; otherwise every leg goes on as one that waited, at the time
// it returns (see Limiter.afterWaiting).
func (l *Limiter) awaitGroup(ctx context.Context, w *crowd.Waiting, g []groupPair, legs []leg, i int, seat *crowd.Seat, now int64) ([]Result, int64, error) {
	ranOut, err := await(ctx, w, l.local, &legs[i], seat, l.set.Timeout)
	if err != nil {
		return nil, now, err
	}
	now = l.afterWaiting(groupTimed(g), now)
	if first := &g[0]; ranOut && i == 0 && !first.dry {
		if d, ok := l.local.ranOut(&legs[0], now); ok {
			return []Result{d.result(first.p.rate, false)}, now, nil
		}
	}
	for j := range legs {
		legs[j].queue, legs[j].waited = legs[i].queue, true
	}
	return nil, now, nil
}

// groupTimed reports whether one of g's pairs fixes the group's time, as
// a quota's period does: the group is then decided at its first reading
// of the clock (see Limiter.sendsNow).
func groupTimed(g []groupPair) bool {
	for i := range g {
		if g[i].p.alg.rules.timed() {
			return true
		}
	}
	return false
}

// sendGroup runs the group's script through the pipeline and returns the
// decisions of the pairs it asked, how the call was sent, and the member
// id its events are recorded under.
func (l *Limiter) sendGroup(ctx context.Context, conn *redisConn, group string, g []groupPair, legs []leg, now int64) ([]decision, sent, string, error) {
	keys, args, member := l.encodeGroup(g, legs, now)
	gs := groupScript(g)
	var ds []decision
	s, err := l.sendHeld(ctx, conn, keys[0], subject{"group", group}, legs, now, func(ctx context.Context, c rueidis.Client) error {
		var err error
		ds, err = parseDecisions(gs.Exec(ctx, c, keys, args), len(g))
		return err
	}, func() bool { return !groupDenied(g, ds) }) // a denied group recorded nothing: no reservation stands
	return ds, s, member, err
}

// parseDecisions reads group.lua's reply: nine numbers for each of at most
// pairs asked.
func parseDecisions(resp rueidis.RedisResult, pairs int) ([]decision, error) {
	if err := resp.Error(); err != nil {
		return nil, err
	}
	arr, err := resp.ToArray()
	if err != nil || len(arr) == 0 || len(arr)%9 != 0 || len(arr) > 9*pairs {
		return nil, &callError{cause: misuse, err: errors.New("unexpected script reply")}
	}
	ds := make([]decision, 0, len(arr)/9)
	for i := 0; i < len(arr); i += 9 {
		d, err := parseDecision(arr[i : i+9])
		if err != nil {
			return nil, &callError{cause: misuse, err: err}
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// groupPair is one validated pair of a group.
type groupPair struct {
	p   plan
	k   lkey
	n   int64
	dry bool // Rule.DryRun
}

func (l *Limiter) compileGroup(group string, checks []Check) ([]groupPair, error) {
	switch {
	case group == "":
		return nil, fmt.Errorf("%w: empty group", ErrInvalidKey)
	case len(group) > MaxKeyLength:
		return nil, fmt.Errorf("%w: group of %d bytes, longer than %d", ErrInvalidKey, len(group), MaxKeyLength)
	case len(checks) == 0 || len(checks) > MaxGroupSize:
		return nil, fmt.Errorf("%w: a group of %d pairs (1 to %d)", ErrInvalidRule, len(checks), MaxGroupSize)
	}
	g := make([]groupPair, len(checks))
	for i := range checks {
		c := &checks[i]
		p, err := c.Rule.compile()
		if err != nil {
			return nil, err
		}
		if why := p.alg.rules.grouped(); why != "" {
			return nil, fmt.Errorf("%w: rule %q: %s", ErrInvalidRule, c.Rule.Name, why)
		}
		n := int64(max(c.N, 1))
		if c.N < 0 || n > p.rate {
			return nil, p.invalidN(int64(c.N), c.Rule.Name)
		}
		k, err := localKey(c.Rule.Name, c.Key)
		if err != nil {
			return nil, err
		}
		k.Group = group
		g[i] = groupPair{p: p, k: k, n: n, dry: c.Rule.DryRun}
	}
	return g, nil
}

// encodeGroup returns group.lua's keys and arguments for g, decided at now
// when a Clock is set or the group holds a quota (whose period comes from
// now), with what the process' own count adds to each pair (legs), and the
// member id its events are recorded under.
func (l *Limiter) encodeGroup(g []groupPair, legs []leg, now int64) (keys, args []string, member string) {
	keys = make([]string, 0, 3*len(g))
	args = make([]string, 0, 2+13*len(g))
	args = append(args, l.clockArg(now, groupTimed(g)), strconv.Itoa(len(g)))
	member = l.member(l.seq.Add(1))
	for i := range g {
		gp := &g[i]
		var b strings.Builder
		kind := gp.p.alg.redis.letter()
		pair.WriteKey(&b, l.set.KeyPrefix, gp.k, kind)
		log := b.String()
		b.Reset()
		pair.WriteKey(&b, l.set.KeyPrefix, gp.k, 'p')
		pen := b.String()
		b.Reset()
		pair.WriteKey(&b, l.set.KeyPrefix, gp.k, 'r')
		keys = append(keys, log, pen, b.String())
		pp := &gp.p.penalty
		second, fifth, byMember := gp.p.alg.redis.args(gp.p)
		id := member
		if !byMember {
			id = itoa(fifth)
		}
		hd := &legs[i].hd
		args = append(args, string(kind), itoa(second), itoa(gp.p.rate), itoa(gp.n), id, flag(gp.p.penalize), flag(gp.dry),
			itoa(hd.retry), itoa(hd.owed), itoa(hd.banLeft), itoa(hd.since),
			itoa(pp.Memory), ladderArg(pp))
	}
	return keys, args, member
}

// groupResults turns the script's decisions into Results, applies dry runs
// and mirrors the decisions into the local limiter: the pairs' reservations
// made at now stand when the group was allowed (see mirror.go).
func (l *Limiter) groupResults(checks []Check, g []groupPair, ds []decision, legs []leg, now int64) []Result {
	at := l.receivedAt(now)
	denied := groupDenied(g, ds)
	results := make([]Result, len(ds))
	for i, d := range ds {
		mirrored := d
		if denied {
			mirrored.allowed = false // a pair that would allow recorded nothing either
		}
		// The shield keeps the first pair's state: a rejection only when
		// that pair denied the group (see routeGroup).
		shieldMax := int64(-1)
		if i == 0 && (!denied || len(ds) == 1) {
			shieldMax = legs[0].shieldMax(&l.set)
		}
		l.local.record(g[i].k, &g[i].p, now, at, g[i].n, false, &mirrored, &legs[i].hd, shieldMax)
		d.count = mirrored.count
		results[i] = d.result(g[i].p.rate, false)
		results[i].dryRun(checks[i].Rule.DryRun)
	}
	return results
}

// groupDenied reports whether group.lua's decisions ds for g deny the
// group: it stopped at a pair that denied, not in dry run.
func groupDenied(g []groupPair, ds []decision) bool {
	last := len(ds) - 1
	return len(ds) < len(g) || !ds[last].allowed && !g[last].dry
}

// groupWithoutRedis decides a group without Redis at now, pair by pair as
// AllowAll would, taking back what earlier pairs recorded when a later one
// denies. s says why Redis was not used.
func (l *Limiter) groupWithoutRedis(checks []Check, g []groupPair, s sent, now int64) []Result {
	results := make([]Result, 0, len(g))
	undos := make([]undo, len(g))
	for i := range g {
		gp := &g[i]
		undos[i] = undo{k: gp.k, p: gp.p, n: gp.n}
		res := l.withoutRedis(&checks[i].Rule, &gp.p, gp.k, gp.n, false, s, &undos[i], now)
		if res.dryRun(checks[i].Rule.DryRun) {
			undos[i] = undo{} // a dry run's rejection recorded nothing
		}
		results = append(results, res)
		if !res.Allowed {
			l.takeBack(undos[:i], nil) // a group answers as Redis does: each pair as it decided
			break
		}
	}
	return results
}

// ladderArg is a penalty's ladder as one argument (see writeLadder).
func ladderArg(pp *ladder.Plan) string {
	var b strings.Builder
	writeLadder(&b, pp)
	return b.String()
}

// groupScripts are group.lua's compositions, one for each sequence of
// kinds and penalties a group has held (see groupScript): as many as the
// program has kinds of groups.
var groupScripts sync.Map // string -> *script.Script

// groupScript returns group.lua composed for g's rules, in g's order.
func groupScript(g []groupPair) *script.Script {
	var name strings.Builder
	for i := range g {
		name.WriteString(g[i].p.alg.redis.scripts().pieces)
		name.WriteByte("-+"[b2i(g[i].p.penalize)])
	}
	if s, ok := groupScripts.Load(name.String()); ok {
		return s.(*script.Script)
	}
	v := script.Variant{}
	seen := map[string]bool{}
	for i := range g {
		kind := g[i].p.alg.redis.scripts().pieces
		v.Rules = append(v.Rules, script.Variant{Kind: kind, Penalty: g[i].p.penalize, Group: true, Index: i + 1,
			Second: "ARGV[a + 1]", Fifth: "ARGV[a + 4]", PenaltyAt: "a + 11"})
		if !seen[kind] {
			seen[kind] = true
			v.Preludes = append(v.Preludes, script.Variant{Kind: kind})
		}
	}
	s, _ := groupScripts.LoadOrStore(name.String(), script.New(script.AddsState, compose("group", v)))
	return s.(*script.Script)
}

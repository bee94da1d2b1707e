package main

import (
	"fmt"
	"strconv"
	"time"
)

// numKeys is the number of distinct keys of the many-keys cases.
const numKeys = 10_000

// manyKeys are the keys of the many-keys cases, the same for every
// contender.
var manyKeys = func() []string {
	keys := make([]string, numKeys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	return keys
}()

// hotKeys is the one key of the hot-key case.
var hotKeys = []string{"hot"}

// benchCase is one table of the report: contenders enforcing one spec over
// one key set.
type benchCase struct {
	id, title  string
	spec       spec
	keys       []string
	contenders []contender
	ours       string   // the contender the ratios are taken for
	notes      []string // printed under the table
}

// defaultWindow is the window of the mostly-allowed cases. One second, so
// that the warm-up fills a whole window and the measured run sees logs of a
// steady length, as a long-running service does; with a window longer than
// the run, every sliding log only grows during it.
const defaultWindow = time.Second

// hotWindow is case I's window: 1,000,000 per 100 ms, 10M a second,
// more than any contender decides on one key here.
const hotWindow = 100 * time.Millisecond

// cases returns the throughput cases; window is that of the mostly-allowed
// cases (A, C, D), whose rate, 1,000,000 per window, no key comes close to
// in a run, so almost every call is allowed. Case G (GCRA) keeps 1,000,000
// per second.
func cases(window time.Duration) []benchCase {
	var all []benchCase
	all = append(all, remoteManyKeysCases(window)...)
	all = append(all, remoteHotKeyCases()...)
	all = append(all, penaltyCase(window), localManyKeysCase(window), gcraCase())
	return append(all, localHotKeyCases()...)
}

// generousSpec is the spec of the mostly-allowed cases, named name:
// 1,000,000 per window.
func generousSpec(name string, window time.Duration) spec {
	return spec{name: name, rate: 1_000_000, window: window}
}

// remoteManyKeysCases are cases A (ratelimit on Redis against the floor
// and the peers) and R (Reserve + Settle beside AllowN), on numKeys keys
// under the generous rate.
func remoteManyKeysCases(window time.Duration) []benchCase {
	a := generousSpec("a", window)
	r := generousSpec("r", window)
	return []benchCase{
		{
			id: "A", title: fmt.Sprintf("remote, %d keys, mostly allowed (%d per %v)", numKeys, a.rate, a.window),
			spec: a, keys: manyKeys, ours: oursRemote.name,
			contenders: []contender{floorContender, oursRemote, naiveContender, cheapestContender, redisRateContender, ululeContender},
			notes: []string{
				"naive sliding log: one script of ZREMRANGEBYSCORE, ZCARD, ZADD (if allowed), PEXPIRE, the time passed by the client, through rueidis; it decides only allowed or not. cheapest exact log: ZCOUNT of the live events, ZADD (if allowed), PEXPIRE, never a trim.",
				"ratelimit: exact sliding log (a ZSET per key, one member per event); redis_rate: GCRA, Burst = Rate; ulule: fixed-window counter.",
				"ratelimit and the floor use rueidis (auto-pipelining, DisableCache); redis_rate and ulule use go-redis v9 with its default pool (10 connections per GOMAXPROCS).",
			},
		},
		{
			id: "R", title: fmt.Sprintf("remote, %d keys, mostly allowed: Reserve + Settle beside AllowN, %d events a call (%d per %v)", numKeys, reserveN, r.rate, r.window),
			spec: r, keys: manyKeys, ours: oursAllowN.name,
			contenders: reserveContender,
			notes: []string{
				"One op is one AllowN, or one Reserve and its Settle: settled at the reserved cost (nothing more is sent), for less (the rest given back: undo.lua, one more script) or for more (the extra charged at the settle's time: a write-back batch of its own, one more script). The ratios are against AllowN.",
			},
		},
	}
}

// remoteHotKeyCases are cases P (Prefetch beside every call on Redis,
// mostly allowed) and B (mostly rejected: ratelimit's hot-key shield), on
// one hot key.
func remoteHotKeyCases() []benchCase {
	// P: one hot key whose calls are all allowed, even by the kinds whose
	// prefetched decisions run at ~5M a second on this machine (10M a
	// second); the log's size follows the calls, not the rate.
	pf := spec{name: "p", rate: 100_000_000, window: 10 * time.Second}
	b := spec{name: "b", rate: 10, window: time.Minute}
	return []benchCase{
		{
			id: "P", title: fmt.Sprintf("remote, one hot key, mostly allowed: Prefetch beside every call on Redis (%d per %v)", pf.rate, pf.window),
			spec: pf, keys: hotKeys, ours: oursPrefetch.name,
			contenders: []contender{floorContender, oursRemote, oursPrefetch, oursGCRA, oursGCRAPrefetch, oursFixed, oursFixedPrefetch},
			notes: []string{
				"ratelimit, Prefetch 20ms: the same rule with Prefetch, so that a process takes slots of the hot key from Redis ahead of its calls (lua/grant.lua) and decides them in-process (path prefetch), never over the Rate; 'Redis CPU/op' is Redis' time per decision, grants included.",
				"The exact log's grant adds one weighted member to the key's log (lua/weighted.lua), GCRA's (Burst = Rate) and the fixed window's change one number: Redis' work per grant does not grow with its size. Each kind with Prefetch is to be read against the same kind without it.",
			},
		},
		{
			id: "B", title: fmt.Sprintf("remote, one hot key, mostly rejected (%d per %v)", b.rate, b.window),
			spec: b, keys: hotKeys, ours: oursRemote.name,
			contenders: []contender{floorContender, oursRemote, redisRateContender, ululeContender},
			notes: []string{
				"ratelimit answers a rejection that only a Reset could lift early from its hot-key shield, without a Redis round trip; the peers ask Redis every time.",
			},
		},
	}
}

// penaltyCase is case C: a penalty rule against the same rule without
// one, on Redis, numKeys keys under the generous rate.
func penaltyCase(window time.Duration) benchCase {
	c := generousSpec("c", window)
	return benchCase{
		id: "C", title: fmt.Sprintf("remote, %d keys, mostly allowed: penalty rule vs plain rule (%d per %v)", numKeys, c.rate, c.window),
		spec: c, keys: manyKeys, ours: oursRemote.name,
		contenders: []contender{floorContender, oursRemote, oursPenalty},
		notes: []string{
			"The penalty rule (WarnAfter 3, BanAfter 10, BanFor 1m) runs penalty.lua over two keys (the log and the penalty hash); nothing is violated here.",
		},
	}
}

// localManyKeysCase is case D: ratelimit in process against the
// in-process peers, numKeys keys under the generous rate.
func localManyKeysCase(window time.Duration) benchCase {
	d := generousSpec("d", window)
	return benchCase{
		id: "D", title: fmt.Sprintf("in-process, %d keys, mostly allowed (%d per %v)", numKeys, d.rate, d.window),
		spec: d, keys: manyKeys, ours: oursLocal.name,
		contenders: []contender{oursLocal, naiveLogContender, oursGCRALocal, sethvargoContender, xTimeRateContender},
		notes: []string{
			"ratelimit (local only): ratelimit.New(nil, ...), an exact sliding log per key in a sharded LRU; ratelimit GCRA (local only): the same limiter with a rule of Kind GCRA (Burst = Rate), one theoretical arrival time per key; sethvargo: token bucket per key in one map; x/time/rate: token bucket per key in a sync.Map (Burst = Rate).",
			"naive exact log: one sync.Mutex over a golang-lru simplelru.LRU[string, *ring] (65,536 keys); per call time.Now, Get (or Add a new ring), drop the timestamps at or before now - window from the ring's head, reject at rate, else append now (a growable circular []int64).",
			"sethvargo refills Interval/Tokens tokens per elapsed Interval (its fillRate is nanoseconds per token, used as tokens per tick): at 1,000,000 per 1s a key gets 1,000 tokens a second after the first, so its fastest cells reject some calls (see 'allowed').",
		},
	}
}

// gcraCase is case G: a GCRA rule on Redis against redis_rate, numKeys keys
// at 1,000,000 per second whatever -window says.
func gcraCase() benchCase {
	g := generousSpec("g", time.Second) // the 1,000,000 per 1 s, whatever -window says
	return benchCase{
		id: "G", title: fmt.Sprintf("remote, %d keys, mostly allowed, token bucket (GCRA): %d per %v, Burst = Rate", numKeys, g.rate, g.window),
		spec: g, keys: manyKeys, ours: oursGCRA.name,
		contenders: []contender{floorContender, oursGCRA, redisRateContender, cheapestGCRAContender},
		notes: []string{
			"ratelimit GCRA: a rule of Kind GCRA, Burst = Rate, no penalty, default Options (Redis' TIME), through rueidis; redis_rate: its GCRA script (TIME, GET, SET EX) through go-redis v9 with its default pool; the floor: EVALSHA of `return 1` through rueidis.",
			"Both limiters keep one value per key (the theoretical arrival time) and decide the same calls the same way (TestDecisionsMatchRedisRate).",
			"cheapest GCRA script: TIME, GET, SET PX and nothing else (it answers only allowed or not), through rueidis: what any GCRA script that reads Redis' clock can reach here.",
		},
	}
}

// localHotKeyCases are cases H (mostly rejected, at case B's rate) and I
// (mostly allowed), in process on one hot key.
func localHotKeyCases() []benchCase {
	h := spec{name: "h", rate: 10, window: time.Minute} // case B's rate
	// I: one hot key under the generous rate, in a window short enough
	// that the fastest contender (~10M calls a second) stays under
	// 1,000,000 per window: mostly allowed whatever -window says.
	i := spec{name: "i", rate: 1_000_000, window: hotWindow}
	return []benchCase{
		{
			id: "H", title: fmt.Sprintf("in-process, one hot key, mostly rejected (%d per %v)", h.rate, h.window),
			spec: h, keys: hotKeys, ours: oursLocal.name,
			contenders: []contender{oursLocal, naiveLogContender, sethvargoContender, xTimeRateContender},
			notes: []string{
				"Case D's contenders on case B's key and rate: every goroutine calls the same key, so all of them meet at one lock (ratelimit: the key's shard; sethvargo: the key's bucket; x/time/rate: the key's Limiter).",
			},
		},
		{
			id: "I", title: fmt.Sprintf("in-process, one hot key, mostly allowed (%d per %v)", i.rate, i.window),
			spec: i, keys: hotKeys, ours: oursLocal.name,
			contenders: []contender{oursLocal, naiveLogContender, oursGCRALocal, sethvargoContender},
			notes: []string{
				"Case D's contenders on one key that every goroutine calls, under a rate no contender reaches (10M a second), so that almost every call is allowed and appends to the key's log: all of them meet at one lock.",
			},
		},
	}
}

// results holds every measured cell by case, contender and concurrency.
type results map[string]map[string]map[int]*cellResult

func (r results) put(caseID string, c *cellResult) {
	if r[caseID] == nil {
		r[caseID] = map[string]map[int]*cellResult{}
	}
	if r[caseID][c.contender] == nil {
		r[caseID][c.contender] = map[int]*cellResult{}
	}
	r[caseID][c.contender][c.goroutines] = c
}

// keepBest stores c unless the same cell already has a valid result with
// more ops/s: the machine is shared, and noise only ever slows a run down.
// An invalid result is kept only while there is no valid one.
func (r results) keepBest(caseID string, c *cellResult) {
	old := r.get(caseID, c.contender, c.goroutines)
	if old == nil {
		if !c.valid() {
			c.invalidRounds = 1
		}
		r.put(caseID, c)
		return
	}
	invalid := old.invalidRounds
	if !c.valid() {
		invalid++
	}
	if old.valid() && (!c.valid() || old.opsPerSec() >= c.opsPerSec()) {
		old.invalidRounds = invalid
		return
	}
	c.invalidRounds = invalid
	r.put(caseID, c)
}

func (r results) get(caseID, contender string, g int) *cellResult {
	return r[caseID][contender][g]
}

// verdict is one line of the targets section.
type verdict struct {
	state string // MET, NOT MET, VOID (a cell is invalid) or SKIPPED
	text  string
}

// target is one goal of the issue, judged on ratios within one run.
type target struct {
	text  string
	judge func(r results) verdict
}

// ratioTarget: the figure of (caseA, a) over that of (caseB, b) at g is at
// least minRatio; fig picks ops/s or an inverse latency.
func ratioTarget(text string, caseA, a, caseB, b string, g int, minRatio float64, fig func(*cellResult) float64, unit string) target {
	return target{text: text, judge: func(r results) verdict {
		x, y := r.get(caseA, a, g), r.get(caseB, b, g)
		if x == nil || y == nil {
			return verdict{"SKIPPED", "not measured in this run"}
		}
		if !x.valid() || !y.valid() {
			return verdict{"VOID", "a cell is invalid (error or degraded decisions)"}
		}
		ratio := fig(x) / fig(y)
		state := "MET"
		if ratio < minRatio {
			state = "NOT MET"
		}
		return verdict{state, fmt.Sprintf("%.2f%s", ratio, unit)}
	}}
}

func opsFig(c *cellResult) float64 { return c.opsPerSec() }

// allocTarget: the allocs/op of (caseID, name) at every concurrency is at
// most maxAllocs.
func allocTarget(text, caseID, name string, gs []int, maxAllocs float64) target {
	return target{text: text, judge: func(r results) verdict {
		state, parts := "MET", ""
		for _, g := range gs {
			c := r.get(caseID, name, g)
			if c == nil {
				return verdict{"SKIPPED", "not measured in this run"}
			}
			if !c.valid() {
				return verdict{"VOID", "a cell is invalid"}
			}
			if c.allocsPerOp() > maxAllocs {
				state = "NOT MET"
			}
			parts += fmt.Sprintf(" %d: %.3f;", g, c.allocsPerOp())
		}
		return verdict{state, "allocs/op at" + parts[:len(parts)-1]}
	}}
}

// targets are the goals of the overload issue (#10) for the Redis path,
// of the local-speed issue (#11) for the local path and of the kinds issue
// (#12) for GCRA, each judged on ratios within this run.
func targets(gs []int) []target {
	floor, ours, naive := floorContender.name, oursRemote.name, naiveContender.name
	var t []target
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("A: remote Allow, %d keys, %d goroutines: ops/s ≥ 1.0× the naive sliding log", numKeys, g),
			"A", ours, "A", naive, g, 1, opsFig, "×"))
	}
	for _, g := range []int{16, 256} {
		t = append(t, ratioTarget(fmt.Sprintf("A: remote Allow, %d keys, %d goroutines: ops/s ≥ 0.6× the EVALSHA floor", numKeys, g),
			"A", ours, "A", floor, g, 0.6, opsFig, "×"))
	}
	t = append(t,
		target{text: "A: remote Allow, 1 goroutine: p50 ≤ 1.3× the floor's p50", judge: func(r results) verdict {
			x, y := r.get("A", ours, 1), r.get("A", floor, 1)
			if x == nil || y == nil {
				return verdict{"SKIPPED", "not measured in this run"}
			}
			if !x.valid() || !y.valid() {
				return verdict{"VOID", "a cell is invalid"}
			}
			ratio := float64(x.p50) / float64(y.p50)
			state := "MET"
			if ratio > 1.3 {
				state = "NOT MET"
			}
			return verdict{state, fmt.Sprintf("%.2f× (%v vs %v)", ratio, fmtDur(x.p50), fmtDur(y.p50))}
		}})
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("C: penalty rule ≥ 0.85× plain rule, %d goroutines", g),
			"C", oursPenalty.name, "C", ours, g, 0.85, opsFig, "×"))
	}
	t = append(t,
		allocTarget("A: remote allocs/op ≤ 2 (MemStats over the whole run, client goroutines included)", "A", ours, gs, 2),
		allocTarget("D: local allocs/op = 0 for existing keys (≤ 0.005 counts as 0)", "D", oursLocal.name, gs, 0.005))
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("D: local ops/s ≥ 1.0× sethvargo, %d goroutines", g),
			"D", oursLocal.name, "D", sethvargoContender.name, g, 1, opsFig, "×"))
	}
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("H: local hot key ops/s ≥ 1.0× sethvargo, %d goroutines", g),
			"H", oursLocal.name, "H", sethvargoContender.name, g, 1, opsFig, "×"))
	}
	t = append(t, allocTarget("H: local hot key allocs/op = 0 (≤ 0.005 counts as 0)", "H", oursLocal.name, gs, 0.005))
	t = append(t, gcraTargets(gs)...)
	return append(t, localStoreTargets(gs)...)
}

// localStoreTargets are the goals of the local-store issue (#19) for the
// exact log in process: against the naive exact log on many keys (case D),
// and against go-limiter on one hot key (case H). Its GCRA and allocation
// goals are gcraTargets' and targets' case D and H lines.
func localStoreTargets(gs []int) []target {
	var t []target
	for _, g := range gs {
		minRatio := 1.2
		if g == 1 {
			minRatio = 1.0
		}
		t = append(t, ratioTarget(fmt.Sprintf("D: local exact log, %d keys, %d goroutines: ops/s ≥ %.1f× the naive exact log", numKeys, g, minRatio),
			"D", oursLocal.name, "D", naiveLogContender.name, g, minRatio, opsFig, "×"))
	}
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("I: local exact log, one hot key mostly allowed, %d goroutines: ops/s ≥ 1.0× the naive exact log", g),
			"I", oursLocal.name, "I", naiveLogContender.name, g, 1, opsFig, "×"))
	}
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("I: local GCRA, one hot key mostly allowed, %d goroutines: ops/s ≥ 1.0× sethvargo", g),
			"I", oursGCRALocal.name, "I", sethvargoContender.name, g, 1, opsFig, "×"))
	}
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("H: local exact log, one hot key, %d goroutines: ops/s ≥ 0.8× sethvargo", g),
			"H", oursLocal.name, "H", sethvargoContender.name, g, 0.8, opsFig, "×"))
	}
	return t
}

// gcraTargets are the goals of the kinds issue (#12) for a GCRA rule: on
// Redis (case G) against redis_rate, which runs the same algorithm, and the
// floor; in process (case D) against go-limiter.
func gcraTargets(gs []int) []target {
	ours, local := oursGCRA.name, oursGCRALocal.name
	var t []target
	for _, g := range []int{16, 256} {
		t = append(t, ratioTarget(fmt.Sprintf("G: remote GCRA, %d keys, %d goroutines: ops/s ≥ 1.5× redis_rate", numKeys, g),
			"G", ours, "G", redisRateContender.name, g, 1.5, opsFig, "×"))
	}
	for _, g := range []int{16, 256} {
		t = append(t, ratioTarget(fmt.Sprintf("G: remote GCRA, %d keys, %d goroutines: ops/s ≥ 0.7× the EVALSHA floor", numKeys, g),
			"G", ours, "G", floorContender.name, g, 0.7, opsFig, "×"))
	}
	t = append(t,
		allocTarget("G: remote GCRA allocs/op ≤ 2 (MemStats over the whole run, client goroutines included)", "G", ours, gs, 2),
		allocTarget("D: local GCRA allocs/op = 0 for existing keys (≤ 0.005 counts as 0)", "D", local, gs, 0.005))
	for _, g := range gs {
		t = append(t, ratioTarget(fmt.Sprintf("D: local GCRA ops/s ≥ 1.0× sethvargo, %d goroutines", g),
			"D", local, "D", sethvargoContender.name, g, 1, opsFig, "×"))
	}
	return t
}

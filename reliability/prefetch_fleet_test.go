package reliability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// The prefetch fleet tests (issue 30): four Limiters, as four instances of
// a service, each with its own client, on one redis-server and one hot key
// of a rule with Prefetch, on the real clock (Redis' TIME), with
// heartbeats on so that each counts four live instances and a grant is at
// most a quarter of what is free (docs/prefetch.md).

// pfInstances is the fleet's size.
const pfInstances = 4

// pfRule is the hot rule: 5,000 a second, Prefetch 20ms.
var pfRule = ratelimit.Rule{Name: "pf", Limit: ratelimit.Limit{Rate: 5000, Window: time.Second}, Prefetch: 20 * time.Millisecond}

// pfCall is one allowed call of the fleet, timed by the wall clock around
// it: it was decided somewhere between start and end.
type pfCall struct {
	inst       int
	start, end time.Time
	n          int
	degraded   bool // decided without Redis (the rule's degraded share)
	prefetch   bool // allowed from slots (ResetAfter past the Window: see pfSlot)
}

// pfSlot reports whether an allowed, non-degraded Result came from a
// grant's slot: its ResetAfter is when the slot's stamp (the grant's time
// plus Prefetch, later than the call) leaves the window, where a decision
// on Redis answers exactly the Window (docs/prefetch.md, "Results").
func pfSlot(r ratelimit.Result, rule ratelimit.Rule) bool {
	return r.Allowed && !r.Degraded && r.ResetAfter > rule.Limit.Window
}

// pfFleet is the fleet: its server, its clients and Limiters, and the paths
// of each Limiter's decisions (by OnDecision).
type pfFleet struct {
	srv     *redistest.Server
	clients []rueidis.Client
	lims    []*ratelimit.Limiter
	logs    testkit.SyncBuffer
	paths   [pfInstances][8]atomic.Int64
	base    int // goroutines before the fleet was made
	closed  bool
}

// newPFFleet starts the fleet on srv with opts (a KeyPrefix of its own,
// heartbeats every 500ms unless opts sets them) and waits until every
// Limiter counts four instances.
func newPFFleet(t *testing.T, srv *redistest.Server, opts ratelimit.Options) *pfFleet {
	t.Helper()
	f := &pfFleet{srv: srv, base: runtime.NumGoroutine()}
	opts.Logger = quietLogger(&f.logs)
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 500 * time.Millisecond
	}
	opts.KeyPrefix = "pf:"
	for i := range pfInstances {
		o := opts
		o.OnDecision = func(d ratelimit.Decision) { f.paths[i][d.Path].Add(1) }
		opt := testkit.ClientOption(srv.Addr())
		opt.Dialer.Timeout = time.Second
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ratelimit.New(c, o)
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
		f.clients, f.lims = append(f.clients, c), append(f.lims, l)
	}
	t.Cleanup(f.close)
	testkit.Eventually(t, "every limiter counts four instances", func() bool {
		for _, l := range f.lims {
			if l.Stats().Instances != pfInstances {
				return false
			}
		}
		return true
	})
	return f
}

// close closes the Limiters, then their clients.
func (f *pfFleet) close() {
	if f.closed {
		return
	}
	f.closed = true
	var wg sync.WaitGroup
	for _, l := range f.lims {
		wg.Go(l.Close)
	}
	wg.Wait()
	for _, c := range f.clients {
		c.Close()
	}
}

// pathCounts sums the paths of the fleet's decisions.
func (f *pfFleet) pathCounts() string {
	var b strings.Builder
	for p := range 8 {
		n := int64(0)
		for i := range f.paths {
			n += f.paths[i][p].Load()
		}
		if n > 0 {
			fmt.Fprintf(&b, "%v %d, ", ratelimit.Path(p), n)
		}
	}
	return strings.TrimSuffix(b.String(), ", ")
}

// pfStats sums the fleet's Stats' prefetch counters.
type pfStats struct{ grants, granted, used, returned uint64 }

func (f *pfFleet) stats() (sum pfStats, each []ratelimit.Stats) {
	for _, l := range f.lims {
		s := l.Stats()
		each = append(each, s)
		sum.grants += s.PrefetchGrants
		sum.granted += s.PrefetchSlotsGranted
		sum.used += s.PrefetchSlotsUsed
		sum.returned += s.PrefetchSlotsReturned
	}
	return sum, each
}

func (s pfStats) String() string {
	return fmt.Sprintf("%d grants of %d slots (%.1f a grant), %d used, %d returned, %d neither",
		s.grants, s.granted, float64(s.granted)/float64(max(s.grants, 1)), s.used, s.returned, int64(s.granted)-int64(s.used)-int64(s.returned))
}

// pfLoad is what a load returned: the allowed calls, sorted by start, and
// the counts of the others.
type pfLoad struct {
	start, stop time.Time
	allowed     []pfCall
	calls, errs int64
	degraded    int64 // allowed or not
	worst       time.Duration
	firstErr    error
}

// drive runs callers goroutines on each Limiter, each calling Allow on the
// rule's key "hot" and pausing pause between calls, until stop is closed.
func (f *pfFleet) drive(rule ratelimit.Rule, callers int, pause time.Duration, stop <-chan struct{}) *pfLoad {
	ld := &pfLoad{start: time.Now()}
	var (
		mu                     sync.Mutex
		calls, errs, deg, wrst atomic.Int64
		wg                     sync.WaitGroup
	)
	for i, l := range f.lims {
		for range callers {
			wg.Go(func() {
				var mine []pfCall
				ctx := context.Background()
				for {
					select {
					case <-stop:
						mu.Lock()
						ld.allowed = append(ld.allowed, mine...)
						mu.Unlock()
						return
					default:
					}
					start := time.Now()
					r, err := l.Allow(ctx, rule, "hot")
					end := time.Now()
					calls.Add(1)
					if d := int64(end.Sub(start)); d > wrst.Load() {
						wrst.Store(d) // a rough maximum
					}
					switch {
					case err != nil:
						if errs.Add(1) == 1 {
							mu.Lock()
							ld.firstErr = err
							mu.Unlock()
						}
					case r.Degraded:
						deg.Add(1)
					}
					if err == nil && r.Allowed {
						mine = append(mine, pfCall{inst: i, start: start, end: end, n: 1, degraded: r.Degraded, prefetch: pfSlot(r, rule)})
					}
					time.Sleep(pause)
				}
			})
		}
	}
	<-stop
	ld.stop = time.Now()
	wg.Wait()
	ld.calls, ld.errs, ld.degraded, ld.worst = calls.Load(), errs.Load(), deg.Load(), time.Duration(wrst.Load())
	slices.SortFunc(ld.allowed, func(a, b pfCall) int { return a.start.Compare(b.start) })
	return ld
}

// spans returns the allowed calls as testkit.Spans.
func (ld *pfLoad) spans() []testkit.Span {
	s := make([]testkit.Span, len(ld.allowed))
	for i, c := range ld.allowed {
		s[i] = testkit.Span{Start: c.start, End: c.end, N: c.n}
	}
	return s
}

// perWindow returns the events allowed in each whole tumbling window from
// the load's start (by the time each call returned), and by instance.
func (ld *pfLoad) perWindow(w time.Duration) (total []int, by [][pfInstances]int) {
	n := int(ld.stop.Sub(ld.start) / w)
	total, by = make([]int, n), make([][pfInstances]int, n)
	for _, c := range ld.allowed {
		if i := int(c.end.Sub(ld.start) / w); i < n {
			total[i] += c.n
			by[i][c.inst] += c.n
		}
	}
	return total, by
}

// TestPrefetchFleetLoad: four Limiters × 128 goroutines on one key of 5,000
// a second with Prefetch 20ms, for 10 seconds, on a healthy redis-server
// (issue 30's proof). What must hold:
//
//   - containment: the allowed calls whose whole [start, return] lies
//     inside one interval shorter than the window are at most Rate, across
//     the fleet (testkit.MostContained, every window-long interval);
//   - liveness: each tumbling second from the load's start admits at least
//     0.9 × Rate, while the callers demand far more;
//   - Redis runs at most 0.1 script calls per allowed decision (INFO
//     commandstats: EVALSHA and EVAL, heartbeats included);
//   - no call errs or is Degraded; every slot granted is used or given
//     back by the time the four are closed, and no goroutine is left.
//
// The callers pause 1ms between calls, as request handlers do: goroutines
// answered in-process that never block starve the ones that read Redis'
// replies (see TestRecoveryFleetWindows). It measures a crowd on two
// cores: scripts/test runs it without the race detector.
func TestPrefetchFleetLoad(t *testing.T) {
	pfSkipLoad(t, "drives four limiters for 10 seconds")
	// Ten whole windows, and a little more, so that the last window's
	// grants (the window fills within some 100ms of its start) are recent
	// when the fleet closes (see pfCheckClose).
	const seconds, callers = 10, 128
	srv, f, scripts0, stop := pfStartLoad(t, seconds*time.Second+300*time.Millisecond)
	rule := pfRule
	ld := f.drive(rule, callers, time.Millisecond, stop)
	stopped := redisNow(t, srv)
	ran := scriptCalls(t, srv) - scripts0
	sum, _ := f.stats()
	pfCheckClose(t, f, stopped) // first: the sweeps below take seconds

	rate := rule.Limit.Rate
	allowed := len(ld.allowed)
	perSec, by := ld.perWindow(rule.Limit.Window)
	ld.logCalls(t, callers)
	t.Logf("allowed per second %v; by instance %v", perSec, by)
	t.Logf("paths: %s", f.pathCounts())
	t.Logf("prefetch: %v", sum)
	perAllowed := float64(ran) / float64(max(allowed, 1))
	t.Logf("Redis ran %d scripts: %.4f per allowed decision", ran, perAllowed)

	pfCheckHealthy(t, f, ld)
	most, at := testkit.MostContained(ld.spans(), rule.Limit.Window)
	t.Logf("containment: at most %d allowed inside one window (from +%v), Rate %d", most, at.Sub(ld.start).Round(time.Millisecond), rate)
	if most > rate {
		t.Errorf("%d allowed calls lie inside one window from +%v, more than Rate %d", most, at.Sub(ld.start), rate)
	}
	pfCheckSeconds(t, perSec, rate, callers)
	if perAllowed > 0.1 {
		t.Errorf("Redis ran %d scripts for %d allowed decisions: %.3f each, more than 0.1", ran, allowed, perAllowed)
	}
	pfCheckUsed(t, sum)
}

// pfStartLoad starts a fleet load's redis-server and fleet, and returns
// them, the script calls Redis counted so far and a channel closed after
// d. The Limiters' Timeout is 1s, as in the recovery tests: with the
// default 100ms, 512 callers that start at once on a cold key (each
// allowed on Redis, with Prefetch or without) wait longer than admission
// control's 20ms for a slot on two cores, and tens to hundreds are shed,
// decided Degraded and allowed on top of Redis' count in the first window
// (measured with Prefetch 0 too): that is the fallback's bound, not
// Prefetch's.
func pfStartLoad(t *testing.T, d time.Duration) (srv *redistest.Server, f *pfFleet, scripts0 int, stop <-chan struct{}) {
	t.Helper()
	srv = redistest.Start(t, redistest.Options{})
	f = newPFFleet(t, srv, ratelimit.Options{Timeout: time.Second})
	scripts0 = scriptCalls(t, srv)
	c := make(chan struct{})
	time.AfterFunc(d, func() { close(c) })
	return srv, f, scripts0, c
}

// pfSkipLoad skips a fleet load test (what: how long it drives the fleet)
// under -short, under the race detector (it measures a load; scripts/test
// runs it without) and without redis-server.
func pfSkipLoad(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	if testkit.RaceEnabled {
		t.Skip("measures a load; scripts/test runs it without the race detector")
	}
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
}

// logCalls logs what the load of pfInstances × callers did.
func (ld *pfLoad) logCalls(t *testing.T, callers int) {
	t.Helper()
	allowed := len(ld.allowed)
	t.Logf("%d × %d callers for %v: %d calls, %d allowed (%.0f a second), %d errors, %d Degraded, worst call %v",
		pfInstances, callers, ld.stop.Sub(ld.start).Round(time.Millisecond), ld.calls, allowed,
		float64(allowed)/ld.stop.Sub(ld.start).Seconds(), ld.errs, ld.degraded, ld.worst.Round(time.Millisecond))
}

// pfCheckHealthy fails the test when a call of the load on a healthy
// Redis erred or came back Degraded (then with the fleet's log).
func pfCheckHealthy(t *testing.T, f *pfFleet, ld *pfLoad) {
	t.Helper()
	if ld.errs > 0 {
		t.Errorf("%d calls returned an error, the first: %v", ld.errs, ld.firstErr)
	}
	if ld.degraded > 0 {
		t.Errorf("%d calls came back Degraded from a healthy Redis; log:\n%s", ld.degraded, f.logs.String())
	}
}

// pfCheckSeconds fails the test for each second of perSec (from the
// load's start) that admitted under 0.9 × rate while pfInstances ×
// callers demanded more.
func pfCheckSeconds(t *testing.T, perSec []int, rate, callers int) {
	t.Helper()
	for s, n := range perSec {
		if 10*n < 9*rate {
			t.Errorf("second %d from the load's start admitted %d, under 0.9 × Rate (%d), while %d callers demanded more", s, n, rate, pfInstances*callers)
		}
	}
}

// pfCheckUsed fails the test when the fleet used no slot.
func pfCheckUsed(t *testing.T, sum pfStats) {
	t.Helper()
	if sum.grants == 0 || sum.used == 0 {
		t.Errorf("no slot was used: %v", sum)
	}
}

// pfCheckGivenBack fails the test for each closed Limiter (each: their
// Stats) whose slots granted were not all used or given back.
func pfCheckGivenBack(t *testing.T, each []ratelimit.Stats) {
	t.Helper()
	for i, s := range each {
		if s.PrefetchSlotsGranted != s.PrefetchSlotsUsed+s.PrefetchSlotsReturned {
			t.Errorf("limiter %d after Close: %d slots granted, %d used and %d returned: %d neither",
				i, s.PrefetchSlotsGranted, s.PrefetchSlotsUsed, s.PrefetchSlotsReturned,
				int64(s.PrefetchSlotsGranted)-int64(s.PrefetchSlotsUsed)-int64(s.PrefetchSlotsReturned))
		}
	}
}

// pfCheckClose closes the fleet, whose load stopped at Redis' time stopped
// (µs), and checks that nothing leaks: every slot granted was used or
// given back (each Limiter's Stats), Redis' log holds no slot of a grant
// that was not used (what is left of each grant are its first slots,
// 1 .. k, as uses take them in order: its member id#k, and Close took away exactly
// the slots the Stats held unused: the slots stamped after stopped, those
// of the last Prefetch's grants, drop to the used ones), and the fleet's
// goroutines are gone.
func pfCheckClose(t *testing.T, f *pfFleet, stopped int64) {
	t.Helper()
	logKey, _ := layoutKeys("pf:", pfRule.Name, "hot")
	// The write-back gives back what lapsed and what failed requests owed:
	// let it settle, so that only what the grants hold is outstanding.
	time.Sleep(100 * time.Millisecond)
	// A give-back trims what is a window old (lua/grant.lua): only the
	// slots stamped in the last window but 200ms are compared, which
	// Close's give-backs (within 200ms) cannot trim.
	since := redisNow(t, f.srv) - (pfRule.Limit.Window - 200*time.Millisecond).Microseconds()
	before, _ := f.stats()
	members0, future0 := pfGrantMembers(t, f.srv, logKey, since, stopped)
	f.close()
	after, each := f.stats()
	members1, future1 := pfGrantMembers(t, f.srv, logKey, since, stopped)
	outstanding := int64(before.granted) - int64(before.used) - int64(before.returned)
	t.Logf("at Close: %d slots outstanding; the log held %d grant slots (%d stamped after the load stopped), %d after Close (%d); %v",
		outstanding, members0.total(), future0, members1.total(), future1, after)
	pfCheckGivenBack(t, each)
	if gone := members0.total() - members1.total(); int64(gone) != outstanding {
		t.Errorf("Close took %d grant slots off the log, want the %d the Stats held unused", gone, outstanding)
	}
	for id, got := range members1 {
		if !got.prefix() {
			t.Errorf("grant %s left slots %v in the log: not the first ones (a slot given back that was used, or one unused kept)", id, got.sorted())
		}
	}
	pfNoGoroutines(t, f.base)
}

// pfSlots are the slot numbers of one grant found in the log.
type pfSlots map[int]bool

func (s pfSlots) sorted() []int {
	var out []int
	for n := range s {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// prefix reports whether s is 1 .. len(s).
func (s pfSlots) prefix() bool {
	for n := 1; n <= len(s); n++ {
		if !s[n] {
			return false
		}
	}
	return true
}

// pfGrants are the slots of the grants in a log, by grant id.
type pfGrants map[string]pfSlots

func (g pfGrants) total() int {
	n := 0
	for _, s := range g {
		n += len(s)
	}
	return n
}

// pfGrantMembers reads the grants' slots in the weighted log stamped later
// than since (a grant is one member id#N whose id ends in "g", holding its
// slots 1 .. N, lua/weighted.lua), and how many are stamped later than
// late.
func pfGrantMembers(t *testing.T, srv *redistest.Server, logKey string, since, late int64) (pfGrants, int) {
	t.Helper()
	flat := strings.Split(mustDo(t, srv, "ZRANGEBYSCORE", logKey, "("+strconv.FormatInt(since, 10), "+inf", "WITHSCORES"), "\n")
	g, future := pfGrants{}, 0
	for k := 0; k+1 < len(flat); k += 2 {
		id, num, ok := strings.Cut(flat[k], "#")
		if !ok || !strings.HasSuffix(id, "g") {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		if g[id] != nil {
			t.Errorf("grant %s has two members in the log", id)
		}
		g[id] = pfSlots{}
		for i := 1; i <= n; i++ {
			g[id][i] = true
		}
		if score, _ := strconv.ParseInt(flat[k+1], 10, 64); score > late {
			future += n
		}
	}
	return g, future
}

// redisNow is Redis' TIME in µs.
func redisNow(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	parts := strings.Split(mustDo(t, srv, "TIME"), "\n")
	if len(parts) != 2 {
		t.Fatalf("TIME answered %q", parts)
	}
	s, _ := strconv.ParseInt(parts[0], 10, 64)
	us, _ := strconv.ParseInt(parts[1], 10, 64)
	return s*1_000_000 + us
}

// pfNoGoroutines waits (up to 5s) for the goroutines to come back to base,
// give or take a few of the runtime's and the test's own.
func pfNoGoroutines(t *testing.T, base int) {
	t.Helper()
	const margin = 3
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+margin {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines after Close, %d before the fleet was made:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPrefetchFleetKill: the fleet of TestPrefetchFleetLoad (fewer callers
// under the race detector) on a redis-server that is killed mid-grant (just
// after a Limiter was granted slots, while it uses them) and restarted
// after 300ms to 800ms (a seeded random phase, logged), with its data
// (appendonly, fsync always) and without, for every kind that takes
// Prefetch (pfKillKinds), each on a server of its own. What must hold
// (docs/fallback.md, "A fleet across a recovery"; TestRecoveryFleetWindows
// checks the same for calls decided on Redis):
//
//   - no call errs;
//   - every window or interval within the bound of the kind that applies
//     to it (each kind's check says which and why): for the exact log, a
//     window that may hold the outage's start holds at most
//     Σ max(ownᵢ, shareᵢ): ownᵢ the events instance i had Redis' consent
//     for (its calls that may have been decided before the kill was in
//     effect, and those it allowed from slots in hand after it, which
//     Redis counted when it granted them), shareᵢ = ceil(Rate / 4); every
//     other window, inside the outage, across the recovery or on a
//     healthy Redis: the shares together, 4 × ceil(Rate / 4) = Rate + 3;
//   - after Close nothing leaks: every slot granted was used or given
//     back, Redis holds none of the unused ones, no goroutine is left.
func TestPrefetchFleetKill(t *testing.T) {
	if testing.Short() {
		t.Skip("drives four limiters across a redis-server's kill")
	}
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	for _, kind := range pfKillKinds() {
		t.Run(kind.name, func(t *testing.T) {
			for _, c := range []struct {
				name string
				args []string
			}{
				{"restarted with its data", []string{"--appendonly", "yes", "--appendfsync", "always"}},
				{"restarted without persistence", nil},
			} {
				t.Run(c.name, func(t *testing.T) { pfKill(t, kind, c.args) })
			}
		})
	}
}

// A pfKillKind is one kind's case of TestPrefetchFleetKill: its rule, how
// long the load runs before the kill (at least before, and up to a second
// more, a seeded random phase) and after the restart, and what must hold
// after it (check, which closes the fleet).
type pfKillKind struct {
	name          string
	rule          ratelimit.Rule
	before, after time.Duration
	check         func(t *testing.T, f *pfFleet, ld *pfLoad, k fault, stopped int64)
}

// pfKillKinds are TestPrefetchFleetKill's kinds: the exact log, then the
// other kinds that take Prefetch (prefetch_kinds_fleet_test.go,
// prefetch_gcra_fleet_test.go).
func pfKillKinds() []pfKillKind {
	log := pfKillKind{name: "sliding log", rule: pfRule, before: 1200 * time.Millisecond, after: 2500 * time.Millisecond,
		check: func(t *testing.T, f *pfFleet, ld *pfLoad, k fault, stopped int64) {
			pfCheckClose(t, f, stopped) // first: the sweep below takes seconds
			checkPFFleetWindows(t, pfRule, ld, k)
		}}
	return append([]pfKillKind{log}, pfKillOtherKinds()...)
}

// pfKillCallers are the callers of each Limiter in TestPrefetchFleetKill,
// pausing 10ms between calls: at most 1.3 × the log's Rate, so that the
// windows stay full, and a grant lasts long enough (some 20 slots, as many
// as an instance allowed in the last Prefetch) to be in use when the kill
// comes.
const pfKillCallers = 16

// pfKill is one run of TestPrefetchFleetKill of kind on a server started
// with args.
func pfKill(t *testing.T, kind pfKillKind, args []string) {
	seed := recoverySeed(t)
	t.Logf("seed %d (replay with RATELIMIT_RECOVERY_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	callers, pause := pfKillCallers, 10*time.Millisecond
	srv := redistest.Start(t, redistest.Options{Args: args})
	// A Timeout generous enough for a loaded 2-core machine (under -race
	// too), so that only the kill makes calls fail, and a quick probe.
	f := newPFFleet(t, srv, ratelimit.Options{Timeout: time.Second, ProbeAfter: 200 * time.Millisecond})
	rule := kind.rule
	stop := make(chan struct{})
	loaded := make(chan *pfLoad)
	go func() { loaded <- f.drive(rule, callers, pause, stop) }()

	time.Sleep(kind.before + time.Duration(rng.Int64N(int64(time.Second))))
	// Mid-grant: right after a Limiter was granted slots, while it holds
	// at least 3 it has not used (given back or not: Stats cannot tell).
	grants := make([]uint64, len(f.lims))
	fresh := func() bool {
		found := false
		for i, l := range f.lims {
			s := l.Stats()
			if s.PrefetchGrants > grants[i] && s.PrefetchSlotsGranted-s.PrefetchSlotsUsed-s.PrefetchSlotsReturned >= 3 {
				found = true
			}
			grants[i] = s.PrefetchGrants
		}
		return found
	}
	fresh()
	waited := time.Now()
	for !fresh() && time.Since(waited) < 3*time.Second {
	}
	k := fault{kind: "kill", start: time.Now()}
	srv.Kill()
	k.in = time.Now()
	time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(500*time.Millisecond))))
	srv.Restart()
	k.end = time.Now()
	time.Sleep(kind.after)
	close(stop)
	ld := <-loaded
	stopped := redisNow(t, srv)

	inSlots := 0
	for _, c := range ld.allowed {
		if !c.degraded && c.start.After(k.in) && c.start.Before(k.end) {
			inSlots += c.n
		}
	}
	perSec, by := ld.perWindow(time.Second)
	fromSlots := make([]int, len(perSec))
	for _, c := range ld.allowed {
		if i := int(c.end.Sub(ld.start) / time.Second); i < len(fromSlots) && c.prefetch {
			fromSlots[i] += c.n
		}
	}
	sum, _ := f.stats()
	t.Logf("from slots per second %v", fromSlots)
	t.Logf("%d × %d callers: %d calls, %d allowed, %d errors, %d Degraded; killed at +%v (%v after the test began to wait for a fresh grant), restarted at +%v; %d allowed from slots in hand while Redis was down",
		pfInstances, callers, ld.calls, len(ld.allowed), ld.errs, ld.degraded, k.start.Sub(ld.start).Round(time.Millisecond),
		k.start.Sub(waited).Round(time.Microsecond), k.end.Sub(ld.start).Round(time.Millisecond), inSlots)
	t.Logf("allowed per second %v; by instance %v", perSec, by)
	t.Logf("paths: %s; prefetch: %v", f.pathCounts(), sum)
	if ld.errs > 0 {
		t.Errorf("%d calls returned an error, the first: %v", ld.errs, ld.firstErr)
	}
	if inSlots == 0 {
		t.Logf("no call was allowed from slots in hand after the kill: the grant was used up before it")
	}
	kind.check(t, f, ld, k, stopped)
}

// checkPFFleetWindows checks every window-long interval that starts at an
// allowed call's start against the bound that applies to it (see
// TestPrefetchFleetKill).
func checkPFFleetWindows(t *testing.T, r ratelimit.Rule, ld *pfLoad, k fault) {
	t.Helper()
	w := r.Limit.Window - time.Microsecond // the limiter keeps whole µs (see testkit.MostContained)
	rate := r.Limit.Rate
	share := (rate + pfInstances - 1) / pfInstances
	calls := ld.allowed
	// What each instance had Redis' consent for, in any window that may
	// hold the outage's start.
	var own [pfInstances]int
	for _, c := range calls {
		if c.end.After(k.start.Add(-w)) && k.consented(c) {
			own[c.inst] += c.n
		}
	}
	atStart := 0
	for _, o := range own {
		atStart += max(o, share)
	}
	worst := 0
	for i, first := range calls {
		from, to := first.start, first.start.Add(w)
		n := 0
		for _, c := range calls[i:] {
			if !c.start.Before(to) {
				break
			}
			if c.end.Before(to) {
				n += c.n
			}
		}
		bound, why := pfInstances*share, "the shares together"
		if !k.in.Before(from) && k.start.Before(to) {
			bound, why = atStart, "Σ max(own, share) at the outage's start"
		}
		if n > bound {
			var byInst [pfInstances]int
			var deg, slots int
			for _, c := range calls[i:] {
				if c.start.Before(to) && c.end.Before(to) {
					byInst[c.inst] += c.n
					if c.degraded {
						deg += c.n
					}
					if c.prefetch {
						slots += c.n
					}
				}
			}
			t.Errorf("%d events inside one window from +%v, more than %d (%s; own %v): by instance %v, %d Degraded, %d from slots; kill at +%v, restart at +%v",
				n, from.Sub(ld.start).Round(time.Millisecond), bound, why, own, byInst, deg, slots,
				k.start.Sub(ld.start).Round(time.Millisecond), k.end.Sub(ld.start).Round(time.Millisecond))
			return
		}
		worst = max(worst, n-bound)
	}
	t.Logf("every window within its bound (closest: %d under it)", -worst)
}

// consented reports whether c had Redis' consent across the kill k: it may
// have been decided before the kill was in effect, or it was allowed from
// slots in hand (not Degraded) before the restart, which Redis counted
// when it granted them. An instance knows these events of its own when
// the outage starts, and keeps them (docs/fallback.md, "The bounds").
func (k fault) consented(c pfCall) bool {
	return !c.start.After(k.in) || !c.degraded && c.start.Before(k.end)
}

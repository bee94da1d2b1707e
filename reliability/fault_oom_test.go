package reliability_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// oomMessage is redis-server's reply to a write refused at maxmemory.
const oomMessage = "OOM command not allowed when used memory > 'maxmemory'."

// oomCase is one kind of call that adds state to Redis: call makes one on
// the key (or group) named by its argument, for a rule of Rate 3.
type oomCase struct {
	name string
	call func(ctx context.Context, l *ratelimit.Limiter, key string) ([]ratelimit.Result, error)
}

// oomRules returns a rule of Rate 3 a minute of every kind the library has,
// with and without a penalty.
func oomRules() []ratelimit.Rule {
	pen := &ratelimit.Penalty{BanAfter: 1 << 20, BanFor: time.Minute}
	minute := ratelimit.PerMinute(3)
	var rules []ratelimit.Rule
	for _, r := range []ratelimit.Rule{
		{Name: "log", Limit: minute},
		{Name: "approx", Limit: minute, Approximate: true},
		{Name: "gcra", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 3, Window: time.Minute, Burst: 3}},
		{Name: "quota", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 3, Period: ratelimit.Day}},
	} {
		rules = append(rules, r)
		r.Name += "-penalty"
		r.Penalty = pen
		rules = append(rules, r)
	}
	return rules
}

// oomCases are Allow for every kind of rule, and AllowGroup over exact logs
// and over a log, a GCRA bucket and a quota (each with a Rate-3 rule first,
// so that the group allows 3 a minute).
func oomCases() []oomCase {
	var cases []oomCase
	for _, r := range oomRules() {
		cases = append(cases, oomCase{r.Name, func(ctx context.Context, l *ratelimit.Limiter, key string) ([]ratelimit.Result, error) {
			res, err := l.Allow(ctx, r, key)
			return []ratelimit.Result{res}, err
		}})
	}
	rules := oomRules()
	wide := ratelimit.Rule{Name: "wide", Limit: ratelimit.PerMinute(100)}
	for _, g := range []struct {
		name  string
		rules []ratelimit.Rule
	}{
		{"group", []ratelimit.Rule{rules[1], wide}},                     // log with penalty, log
		{"group-kinds", []ratelimit.Rule{rules[0], rules[4], rules[7]}}, // log, GCRA, quota with penalty
	} {
		cases = append(cases, oomCase{g.name, func(ctx context.Context, l *ratelimit.Limiter, key string) ([]ratelimit.Result, error) {
			checks := make([]ratelimit.Check, len(g.rules))
			for i, r := range g.rules {
				checks[i] = ratelimit.Check{Rule: r, Key: "k"}
			}
			return l.AllowGroup(ctx, key, checks)
		}})
	}
	return cases
}

// oomArgs start a redis-server with maxmemory (e.g. "4mb") and the
// noeviction policy, which refuses writes that would grow it past that
// instead of evicting keys. Without latency tracking: Redis 7 allocates a
// histogram of about 24 KiB the first time each command runs, which would
// look like growth.
func oomArgs(maxmemory string) []string {
	return []string{"--maxmemory", maxmemory, "--maxmemory-policy", "noeviction", "--latency-tracking", "no"}
}

// usedMemory returns redis-server's used_memory, in bytes.
func usedMemory(t testing.TB, s redisDoer) int {
	t.Helper()
	return memoryField(t, mustDo(t, s, "INFO", "memory"), "used_memory")
}

// meter reads a redis-server's memory on a connection of its own, kept
// open, so that reading it starts no connection.
type meter struct {
	t   testing.TB
	srv *redistest.Server
	c   *redistest.Conn
}

func newMeter(t testing.TB, srv *redistest.Server) *meter {
	m := &meter{t: t, srv: srv}
	m.redial()
	t.Cleanup(func() { m.c.Close() })
	return m
}

// redial opens the meter's connection again (after a restart).
func (m *meter) redial() {
	m.t.Helper()
	if m.c != nil {
		m.c.Close()
	}
	c, err := redistest.Dial(m.srv.Addr(), 10*time.Second)
	if err != nil {
		m.t.Fatal(err)
	}
	m.c = c
}

// do runs one command on the meter's connection.
func (m *meter) do(args ...string) string {
	m.t.Helper()
	m.c.SetDeadline(time.Now().Add(10 * time.Second))
	r, err := m.c.Do(args...)
	if err != nil {
		m.t.Fatalf("%q: %v", args, err)
	}
	return r
}

// stored returns the server's used_memory less what its clients'
// connections take (CLIENT LIST's tot-mem, computed when asked): what Redis
// holds for its data, scripts and itself. The connections' buffers grow by
// tens of KiB while large requests (a script sent whole) come in, and Redis
// shrinks them again on its own, later; INFO and CLIENT LIST are two
// commands, and a buffer can change between them (a CI run once saw a case
// move by 44 KiB that no write made). So it reads until two readings in a
// row agree, at most five times, and then takes the least: a write the
// test looks for (over 100 bytes a key, 1,000 keys) stays in every reading.
func (m *meter) stored() int {
	m.t.Helper()
	least := m.reading()
	for range 4 {
		n := m.reading()
		if n == least {
			return n
		}
		least = min(least, n)
	}
	return least
}

// reading is one reading of stored: INFO memory, then CLIENT LIST.
func (m *meter) reading() int {
	m.t.Helper()
	info := m.do("INFO", "memory")
	clients := 0
	for line := range strings.Lines(m.do("CLIENT", "LIST")) {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "tot-mem="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					m.t.Fatalf("CLIENT LIST: malformed %q", f)
				}
				clients += n
			}
		}
	}
	return memoryField(m.t, info, "used_memory") - clients
}

// memoryField returns a number of an INFO memory reply.
func memoryField(t testing.TB, info, field string) int {
	t.Helper()
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s:%s is not a number", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO memory has no %s", field)
	return 0
}

// fillToMaxmemory writes 16 KiB values into s until it refuses one with
// OOM, then lowers maxmemory 1 MiB below what s uses, so that the memory
// the server frees on its own never lets a write through: s is then out of
// memory, and with noeviction nothing is evicted. Redis counts its clients'
// buffers in what it checks against maxmemory, and those of the test's
// limiters move by over 100 KiB while they send their scripts whole (after
// SCRIPT FLUSH or a restart) and Redis shrinks them again; a margin of
// 64 KiB once let a script through, which Redis then cached (a CI run saw
// 21 KiB of growth after a restart).
func fillToMaxmemory(t testing.TB, s redisDoer) {
	t.Helper()
	chunk := strings.Repeat("x", 16<<10)
	for i := 0; ; i++ {
		_, err := s.Do("SET", "fill:"+strconv.Itoa(i), chunk)
		if err != nil && strings.HasPrefix(err.Error(), "OOM") {
			break
		}
		if err != nil {
			t.Fatalf("filling the server: %v", err)
		}
		if i > 1<<12 {
			t.Fatal("the server never refused a write: is maxmemory set?")
		}
	}
	mustDo(t, s, "CONFIG", "SET", "maxmemory", strconv.Itoa(usedMemory(t, s)-1<<20))
	if _, err := s.Do("SET", "fill:probe", "x"); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("SET at maxmemory = %v; want an OOM error", err)
	}
}

// scriptsTried returns how many scripts the server was sent by EVALSHA or
// EVAL: those it ran, and those it refused before running them (at
// maxmemory), which INFO commandstats counts apart as rejected_calls.
func scriptsTried(t testing.TB, s redisDoer) int {
	t.Helper()
	info := mustDo(t, s, "INFO", "commandstats")
	n := 0
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "cmdstat_eval:") && !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		_, fields, _ := strings.Cut(line, ":")
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			if k != "calls" && k != "rejected_calls" {
				continue
			}
			c, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("malformed commandstats line %q", line)
			}
			n += c
		}
	}
	return n
}

// memoryTolerance is how much Redis' memory (less client buffers) may move
// across a case for reasons of the server's own: far less than the calls of
// a case would add if they wrote (each new key costs Redis over 100 bytes,
// and a case makes oomCalls of them, 200 KiB or more).
const (
	memoryTolerance = 8 << 10
	oomCalls        = 1000
)

// TestFaultOOM runs every kind of call that adds state against a
// redis-server at its maxmemory under noeviction. Redis refuses a write
// inside a script only when it is the script's first; the exact log trims
// before it adds, so a script that Redis did not check before it ran would
// grow Redis past maxmemory on every new key. Each kind has a limiter of
// its own (a breaker that never opens, so every call reaches Redis) and
// must: not grow Redis' memory across many calls on new keys, have every
// call decided by the fallback without an error, and still give a Rate-3
// key exactly 3. Ban must be refused (banned locally only), the write-back
// must add nothing, and Reset, which only deletes, must still work.
func TestFaultOOM(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{Args: oomArgs("4mb")})
	ctx := context.Background()
	clk := testkit.NewClock()
	var logs testkit.SyncBuffer
	opts := testkit.Options(clk)
	opts.Timeout = time.Second
	opts.TripAfter = 1 << 30 // every call reaches Redis and is refused there
	opts.Logger = quietLogger(&logs)
	client := testkit.NewClient(t, srv.Addr())
	newLimiter := func(prefix string) *ratelimit.Limiter {
		o := opts
		o.KeyPrefix = prefix
		return testkit.NewLimiter(t, client, o)
	}

	// A key with state in Redis before the server is full: Reset must
	// remove it once the server is.
	resetRule := oomRules()[1]
	resetter := newLimiter("reset:")
	if r := testkit.Allow(t, resetter, resetRule, "k"); !r.Allowed || r.Degraded {
		t.Fatalf("Allow before the server is full = %+v; want allowed on redis", r)
	}
	resetLog, resetPen := layoutKeys("reset:", resetRule.Name, "k")
	if got := mustInt(t, srv, "EXISTS", resetLog); got != 1 {
		t.Fatalf("EXISTS %s = %d before Reset; want 1", resetLog, got)
	}

	fillToMaxmemory(t, srv)
	keys := mustInt(t, srv, "DBSIZE")
	mem := newMeter(t, srv)
	start := mem.stored()
	t.Logf("server full: used_memory %d (%d without client buffers), %d keys", usedMemory(t, srv), start, keys)

	cases := oomCases()
	var limiters []*ratelimit.Limiter
	for _, c := range cases {
		l := newLimiter(c.name + ":")
		limiters = append(limiters, l)
		before := mem.stored()
		callsOnNewKeys(t, c, l, "new", oomCalls)
		allowed := 0
		for i := range 6 {
			rs, err := c.call(ctx, l, "rate3")
			if err != nil || len(rs) == 0 || !rs[0].Degraded {
				t.Errorf("%s: Rate-3 key, call %d: %+v, %v; want decided without redis", c.name, i, rs, err)
			}
			if err == nil && rs[0].Allowed {
				allowed++
			}
		}
		if allowed != 3 {
			t.Errorf("%s: the Rate-3 key got %d of 6; want exactly 3", c.name, allowed)
		}
		grew := mem.stored() - before
		t.Logf("%s: %d calls on new keys, used_memory less client buffers moved by %d bytes", c.name, oomCalls, grew)
		if grew > memoryTolerance {
			t.Errorf("%s: used_memory grew by %d bytes over %d calls at maxmemory; want at most %d (server noise)", c.name, grew, oomCalls, memoryTolerance)
		}
		if s := l.Stats(); s.OutageDecisions < oomCalls+6 {
			t.Errorf("%s: Stats.OutageDecisions = %d; want at least %d (a group counts one per pair decided)", c.name, s.OutageDecisions, oomCalls+6)
		}
	}

	// Ban adds state: refused, so the ban holds in this process only.
	banRule := oomRules()[1]
	banner := newLimiter("ban:")
	limiters = append(limiters, banner)
	before := mem.stored()
	for i := range oomCalls {
		err := banner.Ban(ctx, banRule, "new"+strconv.Itoa(i), time.Minute)
		if !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Fatalf("Ban %d = %v; want ErrUnavailable (redis is out of memory)", i, err)
		}
	}
	if r := testkit.Allow(t, banner, banRule, "new0"); r.Allowed || !r.Degraded {
		t.Errorf("Allow of a key banned locally = %+v; want rejected, Degraded", r)
	}
	if grew := mem.stored() - before; grew > memoryTolerance {
		t.Errorf("ban: used_memory grew by %d bytes over %d bans at maxmemory", grew, oomCalls)
	}

	// Every limiter owes Redis what it decided alone; its write-back runs
	// every second and must be refused whole. Wait until the write-backs
	// have tried twice per limiter (no decision runs meanwhile).
	tried := scriptsTried(t, srv)
	testkit.Eventually(t, "the write-backs tried", func() bool {
		return scriptsTried(t, srv) >= tried+2*len(limiters)
	})
	if grew := mem.stored() - start; grew > memoryTolerance {
		t.Errorf("used_memory grew by %d bytes at maxmemory across every case and the write-backs", grew)
	}
	if got := mustInt(t, srv, "DBSIZE"); got != keys {
		t.Errorf("DBSIZE = %d at maxmemory; want %d (nothing added)", got, keys)
	}
	for _, l := range limiters {
		if s := l.Stats(); s.WrittenBack != 0 {
			t.Errorf("Stats.WrittenBack = %d at maxmemory; want 0", s.WrittenBack)
		}
	}

	// Reset only deletes: it must reach Redis.
	if err := resetter.Reset(ctx, resetRule, "k"); err != nil {
		t.Fatalf("Reset at maxmemory: %v; want nil (reached redis)", err)
	}
	if got := mustInt(t, srv, "EXISTS", resetLog, resetPen); got != 0 {
		t.Errorf("EXISTS %s %s after Reset = %d; want 0", resetLog, resetPen, got)
	}

	// Once the server has lost its scripts (SCRIPT FLUSH, a restart, which
	// loses the data too), every call sends its script whole, and Redis
	// must refuse it without keeping it.
	mustDo(t, srv, "SCRIPT", "FLUSH")
	for phase, again := range []func(){func() {}, func() { srv.Restart(); fillToMaxmemory(t, srv); mem.redial() }} {
		again()
		before := mem.stored()
		for i, c := range cases {
			callsOnNewKeys(t, c, limiters[i], "again"+strconv.Itoa(phase)+":", oomCalls/10)
		}
		grew := mem.stored() - before
		t.Logf("after %s: %d calls of each case, used_memory less client buffers moved by %d bytes", [2]string{"SCRIPT FLUSH", "a restart"}[phase], oomCalls/10, grew)
		if grew > memoryTolerance {
			t.Errorf("used_memory grew by %d bytes at maxmemory once the server had lost its scripts (phase %d)", grew, phase)
		}
	}
}

// callsOnNewKeys makes n calls of case c through l, each on a key (or
// group) of its own named from prefix, and fails the test when one returns
// an error or is decided on Redis: Redis is out of memory.
func callsOnNewKeys(t *testing.T, c oomCase, l *ratelimit.Limiter, prefix string, n int) {
	t.Helper()
	onRedis := 0
	for i := range n {
		rs, err := c.call(context.Background(), l, prefix+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("%s: call %d: %v; want decided without redis", c.name, i, err)
		}
		for _, r := range rs {
			if !r.Degraded {
				onRedis++
				break
			}
		}
	}
	if onRedis > 0 {
		t.Errorf("%s: %d of %d calls on new keys were decided on redis; want every one Degraded (redis is out of memory)", c.name, onRedis, n)
	}
}

// TestFaultOOMHeartbeat starts a limiter against a redis-server already at
// its maxmemory: the fleet's heartbeat adds the limiter to the instances
// set, so Redis must refuse it, and the set must not appear.
func TestFaultOOMHeartbeat(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{Args: oomArgs("2mb")})
	fillToMaxmemory(t, srv)
	var logs testkit.SyncBuffer
	opts := testkit.Options(testkit.NewClock())
	opts.TripAfter = 1 << 30
	opts.HeartbeatInterval = 10 * time.Millisecond
	opts.KeyPrefix = "fleet:"
	opts.Logger = quietLogger(&logs)
	before := scriptsTried(t, srv)
	testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	testkit.Eventually(t, "ten heartbeats", func() bool { return scriptsTried(t, srv) >= before+10 })
	if got := mustInt(t, srv, "EXISTS", "fleet:v1:{instances}"); got != 0 {
		t.Errorf("the instances set exists at maxmemory: the heartbeat wrote past it")
	}
}

// TestFaultOOMReply stands in for maxmemory on miniredis, which has none:
// every command is refused with redis-server's OOM reply. A call is decided
// without Redis, with no error, and counts as a failure of Redis: two of
// them open the breaker.
func TestFaultOOMReply(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	opts := testkit.OutageOptions(testkit.NewClock(), &logs, &states)
	opts.ProbeAfter = time.Hour
	opts.HeartbeatInterval = -1
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	rule := ratelimit.Rule{Name: "oom", Limit: ratelimit.PerMinute(3)}
	ctx := context.Background()
	if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || r.Degraded {
		t.Fatalf("Allow before the OOM replies = %+v; want allowed on redis", r)
	}
	mr.SetError(oomMessage)
	for i := range 2 {
		r, err := l.Allow(ctx, rule, "k")
		if err != nil || !r.Degraded || !r.Allowed {
			t.Fatalf("Allow %d under OOM replies = %+v, %v; want allowed without redis", i, r, err)
		}
	}
	testkit.Eventually(t, "the breaker opened", func() bool { return states.String() == "closed->open" })
	if s := l.Stats(); s.OutageDecisions != 2 {
		t.Errorf("Stats.OutageDecisions = %d; want 2", s.OutageDecisions)
	}
	r, err := l.Allow(ctx, rule, "k")
	if err != nil || !r.Degraded || r.Allowed {
		t.Errorf("fourth Allow with the breaker open = %+v, %v; want rejected without redis (Rate 3)", r, err)
	}
}

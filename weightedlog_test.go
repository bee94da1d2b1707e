package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/script"
	"github.com/redis/rueidis"
)

// The weighted exact log at the level of its scripts (lua/weighted.lua):
// a grant is one member of weight g, the sum of the weights less one is
// the sentinel's score less 2^52, and every script that counts, trims,
// gives back or resets the log keeps it exact.

// slidingScripts are the entries composed with lua/sliding.lua's own
// pieces, unweighted: no rule's since the weighted log (weightedlog.go).
// The cost tests measure a grant of g members, and a decision, with them
// beside the exact log's.
var slidingScripts = composeKind("sliding")

const (
	wlLog  = "w:v1:{1:r:=k}:l"
	wlTomb = "w:v1:{1:r:=k}:r"
	wlSum  = "#"
	wlBase = int64(1) << 52
)

// wlEnv runs the weighted log's scripts on one server.
type wlEnv struct {
	t      *testing.T
	c      *script.Client
	window int64 // µs
	rate   int64
	pf     int64 // prefetch, µs
}

func (e *wlEnv) do(args ...string) rueidis.RedisResult {
	return e.c.Do(context.Background(), e.c.B().Arbitrary(args...).Build())
}

// wlClock is ARGV[1]: now, or ” for Redis' TIME.
func wlClock(now int64) string {
	if now < 0 {
		return ""
	}
	return strconv.FormatInt(now, 10)
}

// grant asks for g slots at now under id, giving back backs (id, from,
// to), and returns the slots granted.
func (e *wlEnv) grant(now, g int64, id string, backs ...string) int64 {
	e.t.Helper()
	args := []string{wlClock(now), itoa(e.window), itoa(e.rate), itoa(g), id, itoa(e.pf), "1", "0", id, "0"}
	mark, err := e.do("GET", wlTomb).ToString()
	if rueidis.IsRedisNil(err) {
		mark = "0"
	}
	for i := 0; i+2 < len(backs); i += 3 {
		args = append(args, backs[i], backs[i+1], backs[i+2], mark, "0")
	}
	r, err := exactLogScripts.grant.Exec(context.Background(), e.c, []string{wlLog, wlTomb}, args).AsIntSlice()
	if err != nil {
		e.t.Fatalf("grant.lua %q: %v", args, err)
	}
	return r[0]
}

// allow is allow.lua for n events at now under id (n = 0 peeks): allowed,
// count, retry.
func (e *wlEnv) allow(now, n int64, id string) (bool, int64, int64) {
	e.t.Helper()
	args := []string{wlClock(now), itoa(e.window), itoa(e.rate), itoa(n), id}
	res := exactLogScripts.allow[0].Exec(context.Background(), e.c, []string{wlLog}, args)
	if c, err := res.AsInt64(); err == nil {
		return true, c, 0
	}
	r, err := res.AsIntSlice()
	if err != nil {
		e.t.Fatalf("allow.lua %q: %v", args, err)
	}
	return r[0] == 1, r[1], r[2]
}

// peek is the log's count at now.
func (e *wlEnv) peek(now int64) int64 {
	e.t.Helper()
	_, c, _ := e.allow(now, 0, "peek")
	return c
}

// state is the log's members (its ZCARD) and the sum in its sentinel
// (-1 when there is none).
func (e *wlEnv) state() (int64, int64) {
	e.t.Helper()
	n, err := e.do("ZCARD", wlLog).AsInt64()
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := e.do("ZSCORE", wlLog, wlSum).ToString()
	if rueidis.IsRedisNil(err) {
		return n, -1
	}
	v, perr := strconv.ParseInt(s, 10, 64)
	if err != nil || perr != nil {
		e.t.Fatalf("ZSCORE %s %s = %q, %v", wlLog, wlSum, s, err)
	}
	return n, v - wlBase
}

func (e *wlEnv) wantState(what string, members, sum int64) {
	e.t.Helper()
	if n, s := e.state(); n != members || s != sum {
		e.t.Errorf("%s: the log holds %d members, sum %d; want %d and %d", what, n, s, members, sum)
	}
}

// wlBackends are the servers the script tests run on: miniredis, and a
// redis-server unless -short.
func wlBackends(t *testing.T) map[string]func(t *testing.T) (*script.Client, *miniredis.Miniredis) {
	return map[string]func(t *testing.T) (*script.Client, *miniredis.Miniredis){
		"miniredis": func(t *testing.T) (*script.Client, *miniredis.Miniredis) {
			mr := miniredis.RunT(t)
			return scriptTestClient(t, mr.Addr()), mr
		},
		"redis-server": func(t *testing.T) (*script.Client, *miniredis.Miniredis) {
			if testing.Short() {
				t.Skip("-short: no redis-server is started")
			}
			return scriptTestClient(t, redistest.Start(t, redistest.Options{}).Addr()), nil
		},
	}
}

// TestWeightedLogScripts: on the caller's clock, a grant of 10,000 slots
// is one member (and the sentinel); a give-back of a suffix shortens it at
// its score, and a give-back sent again changes nothing; the retry walks
// weights; a grant's whole weight leaves at once when its stamp is a
// window old; the trim of a later call takes it and the sentinel out; a
// Reset, and a write-back's Reset, take the sum with what they remove.
func TestWeightedLogScripts(t *testing.T) {
	for name, start := range wlBackends(t) {
		t.Run(name, func(t *testing.T) {
			c, _ := start(t)
			e := &wlEnv{t: t, c: c, window: 1_000_000, rate: 100_000, pf: 20_000}
			const t0 = int64(1_700_000_000_000_000)
			if g := e.grant(t0, 10_000, "ag"); g != 10_000 {
				t.Fatalf("granted %d of 10,000", g)
			}
			e.wantState("after a grant of 10,000", 2, 9_999)
			if c := e.peek(t0); c != 10_000 {
				t.Errorf("count after a grant of 10,000 = %d", c)
			}
			// A give-back of the unused 6,001 .. 10,000 with the next
			// request (for 3 slots).
			e.grant(t0+1, 3, "bg", "ag", "6001", "10000")
			e.wantState("after a give-back of 4,000 and a grant of 3", 3, 5_999+2)
			if s, _ := e.do("ZSCORE", wlLog, "ag#6000").ToString(); s != itoa(t0+e.pf) {
				t.Errorf("the grant given back is at %q, want its stamp %d", s, t0+e.pf)
			}
			e.grant(t0+2, 0, "", "ag", "6001", "10000") // sent again
			e.wantState("after the give-back sent again", 3, 5_999+2)
			if c := e.peek(t0 + 2); c != 6_003 {
				t.Errorf("count = %d, want 6,003", c)
			}
			// A whole grant back: its member goes, and its weight.
			e.grant(t0+3, 0, "", "bg", "1", "3")
			e.wantState("after bg given back whole", 2, 5_999)

			// The retry walks weights: plain events at t0+5 (two), then
			// the grant (6,000 at t0+pf). Fill to the rate with a grant.
			if ok, _, _ := e.allow(t0+5, 2, "p"); !ok {
				t.Fatal("2 events rejected")
			}
			free := e.rate - 6_002
			if g := e.grant(t0+6, free, "cg"); g != free {
				t.Fatalf("granted %d of the %d free", g, free)
			}
			// The kth unit of weight to leave, by score: p:1, p:2 (t0+5),
			// ag's 6,000 (t0+pf), cg's (t0+6+pf).
			for _, c := range []struct{ n, at int64 }{
				{1, t0 + 5}, {2, t0 + 5}, {3, t0 + e.pf}, {6_002, t0 + e.pf}, {6_003, t0 + 6 + e.pf}, {e.rate, t0 + 6 + e.pf},
			} {
				ok, _, retry := e.allow(t0+10, c.n, "x")
				if want := c.at + e.window - (t0 + 10); ok || retry != want {
					t.Errorf("AllowN(%d) on a full log = %v, retry %d; want rejected, retry %d", c.n, ok, retry, want)
				}
			}
			// The grant ag leaves whole when its stamp is a window old.
			end := t0 + e.pf + e.window
			if c := e.peek(end - 1); c != e.rate-2 {
				t.Errorf("count 1µs before ag leaves = %d, want %d", c, e.rate-2)
			}
			if c := e.peek(end); c != e.rate-2-6_000 {
				t.Errorf("count as ag leaves = %d, want %d", c, e.rate-2-6_000)
			}
			// More live members than old ones still kept: the count walks
			// the old ones (ag's weight leaves the sum there).
			if ok, _, _ := e.allow(end, 3, "q"); !ok {
				t.Fatal("3 events rejected")
			}
			if c := e.peek(end); c != e.rate-2-6_000+3 {
				t.Errorf("count with 3 old members and 4 live = %d, want %d", c, e.rate-2-6_000+3)
			}
			// Two windows on, a call trims all (the caller's clock keeps
			// two windows): one member left, no sentinel.
			if ok, c, _ := e.allow(end+2*e.window, 1, "late"); !ok || c != 1 {
				t.Errorf("a call two windows on = %v, count %d; want allowed, 1", ok, c)
			}
			e.wantState("after the trim", 1, -1)

			// A write-back's Reset removes what was recorded before it,
			// the grants' weights with them.
			t1 := t0 + 10*e.window
			e.grant(t1, 500, "dg")
			wbKeys := []string{wlLog, "w:v1:{1:r:=k}:p", "w:v1:{1:r:=k}:w:b1", wlTomb, wlLog}
			wbArgs := []string{"b1", itoa(e.window), "2000", "1", itoa(t1 + e.pf + 1), "0", "0", "0", "0", "1000", itoa(t1 + e.pf + 1), "0", itoa(e.window), "0", "0"}
			e.grant(t1+1, 7, "eg") // stamped t1+1+pf: after the Reset's time
			e.wantState("before the write-back's Reset", 3, 499+6)
			if err := exactLogScripts.writeBack.Exec(context.Background(), e.c, wbKeys, wbArgs).Error(); err != nil {
				t.Fatalf("writeback.lua: %v", err)
			}
			e.wantState("after the write-back's Reset", 2, 6)
			if c := e.peek(t1 + e.pf + 2); c != 7 {
				t.Errorf("count after the write-back's Reset = %d, want 7", c)
			}

			// A Reset deletes the log, and the sum with it.
			if err := resetScript.Exec(context.Background(), e.c, []string{wlTomb, wlLog}, []string{itoa(t1 + e.pf + 3), "2000"}).Error(); err != nil {
				t.Fatal(err)
			}
			e.wantState("after a Reset", 0, -1)
			if g := e.grant(t1+e.pf+4, 3, "fg"); g != 3 {
				t.Errorf("granted %d after the Reset, want 3", g)
			}
			e.wantState("a grant after a Reset", 2, 2)
			e.grant(t1+e.pf+5, 0, "", "eg", "1", "7") // gone with the Reset: nothing
			e.wantState("a give-back of a grant the Reset took", 2, 2)
		})
	}
}

// TestWeightedLogRedisTime: with Redis' TIME the trim and the count use
// the same bound: a grant's weight leaves the sum when its member is
// trimmed, the sentinel with the last of it (miniredis, whose TIME the
// test sets).
func TestWeightedLogRedisTime(t *testing.T) {
	mr := miniredis.RunT(t)
	c := scriptTestClient(t, mr.Addr())
	e := &wlEnv{t: t, c: c, window: 1_000_000, rate: 1_000, pf: 20_000}
	t0 := time.UnixMicro(1_700_000_000_000_000)
	at := func(d int64) { mr.SetTime(t0.Add(time.Duration(d) * time.Microsecond)) }
	at(0)
	e.allow(-1, 1, "a")
	e.grant(-1, 300, "ag")
	at(10)
	e.grant(-1, 200, "bg")
	e.wantState("two grants and an event", 4, 299+199)
	if _, c, _ := e.allow(-1, 0, "peek"); c != 501 {
		t.Errorf("count = %d, want 501", c)
	}
	at(e.window) // the event at 0 leaves; the grants are stamped pf later
	if ok, c, _ := e.allow(-1, 1, "b"); !ok || c != 501 {
		t.Errorf("a call a window on = %v, count %d; want allowed, 501", ok, c)
	}
	at(e.pf + e.window) // ag leaves whole
	if ok, c, _ := e.allow(-1, 1, "c"); !ok || c != 202 {
		t.Errorf("a call as ag leaves = %v, count %d; want allowed, 202", ok, c)
	}
	e.wantState("after ag's trim", 4, 199)
	at(10 + e.pf + e.window) // bg leaves: the sentinel goes
	if ok, c, _ := e.allow(-1, 1, "d"); !ok || c != 3 {
		t.Errorf("a call as bg leaves = %v, count %d; want allowed, 3", ok, c)
	}
	e.wantState("after bg's trim", 3, -1)
	// The grant script trims as it counts.
	e.grant(-1, 50, "cg")
	at(10 + 2*e.window + 2*e.pf) // cg (stamped 10+2pf+W) a window old
	if g := e.grant(-1, 10, "dg"); g != 10 {
		t.Errorf("granted %d, want 10", g)
	}
	e.wantState("after a grant that trimmed cg", 2, 9)
}

// TestWeightedGrantCostFlat: on redis-server, a grant of 10,000 slots adds
// one member, and Redis' time per grant script (INFO commandstats) does not
// grow with the grant's size, where the plain log's grows with it.
func TestWeightedGrantCostFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no redis-server is started")
	}
	srv := redistest.Start(t, redistest.Options{})
	c := scriptTestClient(t, srv.Addr())
	e := &wlEnv{t: t, c: c, window: 1_000_000, rate: 1_000_000, pf: 20_000}
	ctx := context.Background()
	cost := func(scripts *kindScripts, g int64) float64 {
		t.Helper()
		const grants = 50
		// Loaded first, and each grant on a fresh pair: what is measured is
		// the grant's own work.
		if err := scripts.grant.Exec(ctx, c, []string{"warm", "warm:r"}, []string{"", "1000000", "1000000", "1", "w", "20000", "1", "0", "w", "0"}).Error(); err != nil {
			t.Fatal(err)
		}
		if err := e.do("CONFIG", "RESETSTAT").Error(); err != nil {
			t.Fatal(err)
		}
		for i := range grants {
			k := "{" + strconv.Itoa(i) + "}" + strconv.FormatInt(g, 10)
			r, err := scripts.grant.Exec(ctx, c, []string{k, k + ":r"}, []string{"", "1000000", "1000000", itoa(g), "id", "20000", "1", "0", "id", "0"}).AsIntSlice()
			if err != nil || r[0] != g {
				t.Fatalf("grant of %d = %v, %v", g, r, err)
			}
			if scripts == exactLogScripts {
				if n, _ := e.do("ZCARD", k).AsInt64(); n > 2 {
					t.Fatalf("a grant of %d left %d members, want 1 and the sentinel", g, n)
				}
			}
		}
		return evalshaMicros(t, e)
	}
	// A decision on Redis (allow.lua, Redis' TIME) on one key, 2,000
	// calls: the weighted log's reads the sentinel beside the plain log's
	// work.
	decide := func(scripts *kindScripts, key string) float64 {
		t.Helper()
		if err := e.do("CONFIG", "RESETSTAT").Error(); err != nil {
			t.Fatal(err)
		}
		for i := range 2000 {
			if err := scripts.allow[0].Exec(ctx, c, []string{key}, []string{"", "1000000", "1000000", "1", "m" + strconv.Itoa(i)}).Error(); err != nil {
				t.Fatal(err)
			}
		}
		return evalshaMicros(t, e)
	}
	t.Logf("µs per decision on Redis, 2,000 on one key: sliding.lua's unweighted pieces %.2f, the exact log's (weighted) %.2f", decide(slidingScripts, "{d}:l"), decide(exactLogScripts, "{d}:e"))
	small, large := cost(exactLogScripts, 10), cost(exactLogScripts, 10_000)
	plain := cost(slidingScripts, 10_000)
	t.Logf("µs per grant script: weighted log g=10 %.1f, g=10,000 %.1f; plain log g=10,000 %.1f", small, large, plain)
	if large > 3*small+20 {
		t.Errorf("a grant of 10,000 costs Redis %.1fµs, one of 10 %.1fµs: the weighted log's grant grows with its size", large, small)
	}
}

// evalshaMicros is Redis' usec_per_call of EVALSHA (INFO commandstats).
func evalshaMicros(t *testing.T, e *wlEnv) float64 {
	t.Helper()
	info, err := e.do("INFO", "commandstats").ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
					us, _ := strconv.ParseFloat(v, 64)
					return us
				}
			}
		}
	}
	t.Fatalf("no cmdstat_evalsha in %q", info)
	return 0
}

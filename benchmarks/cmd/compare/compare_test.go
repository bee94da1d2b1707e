package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// requireEnv turns a missing redis-server from a skipped test into a failed
// one when it is "1", as in the core module.
const requireEnv = "RATELIMIT_REQUIRE_REDIS"

// testRedis starts a redis-server for the test and stops it at the end. A
// missing binary skips the test, unless RATELIMIT_REQUIRE_REDIS=1.
func testRedis(t testing.TB) *env {
	t.Helper()
	if _, err := findRedisServer(); err != nil {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%v (%s=1 makes this a failure)", err, requireEnv)
		}
		t.Skipf("%v (or set %s=1 to fail instead of skipping)", err, requireEnv)
	}
	srv, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	admin, err := adminClient(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	return &env{addr: srv.addr, started: true, admin: admin}
}

// everyContender is every contender of every case, once.
func everyContender() []contender {
	seen := map[string]bool{}
	var all []contender
	for _, bc := range cases(defaultWindow) {
		for _, c := range bc.contenders {
			if bc.id == "R" && c.name != floorContender.name {
				continue // their ops take other costs: TestReserveContenders
			}
			if !seen[c.name] {
				seen[c.name] = true
				all = append(all, c)
			}
		}
	}
	return all
}

// TestContenders runs each adapter for a handful of calls under 3 per
// minute: three allowed, then rejected (the floor allows everything), and
// another key still allowed.
func TestContenders(t *testing.T) {
	e := testRedis(t)
	ctx := context.Background()
	for _, c := range everyContender() {
		t.Run(c.name, func(t *testing.T) {
			if err := flushAll(ctx, e.admin); err != nil {
				t.Fatal(err)
			}
			addr := ""
			if c.remote {
				addr = e.addr
			}
			l, closeFn, err := c.open(addr, spec{name: "t", rate: 3, window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			wantLast := c.name != floorContender.name
			for i, want := range []bool{true, true, true, !wantLast, !wantLast} {
				got, err := l.Allow(ctx, "k")
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if got != want {
					t.Fatalf("call %d: allowed %v, want %v", i+1, got, want)
				}
			}
			if got, err := l.Allow(ctx, "other"); err != nil || !got {
				t.Fatalf("another key: allowed %v, %v; want allowed", got, err)
			}
			if d, ok := l.(degrader); ok && d.Degraded() != 0 {
				t.Fatalf("%d decisions were degraded", d.Degraded())
			}
		})
	}
}

// TestLogKey checks the name case F reads MEMORY USAGE of.
func TestLogKey(t *testing.T) {
	e := testRedis(t)
	ctx := context.Background()
	l, closeFn, err := oursRemote.open(e.addr, spec{name: "mem", rate: 5, window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if _, err := l.Allow(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	key := logKey("mem", "user-1")
	n, err := e.admin.Do(ctx, e.admin.B().Exists().Key(key).Build()).AsInt64()
	if err != nil || n != 1 {
		t.Fatalf("EXISTS %s = %d, %v; want 1", key, n, err)
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}} {
		got := h.quantile(c.q)
		if got < c.want*96/100 || got > c.want*104/100 {
			t.Errorf("quantile(%v) = %v, want %v ± 4%%", c.q, got, c.want)
		}
	}
	for _, ns := range []int64{0, 1, 63, 64, 65, 1000, 123456789, 1 << 50} {
		mid := bucketMid(bucketOf(ns))
		if ns >= 64 && ns < 1<<45 && (mid < float64(ns)*0.96 || mid > float64(ns)*1.04) {
			t.Errorf("bucket of %d has middle %v", ns, mid)
		}
	}
}

// TestCompare runs the whole program briefly on the cases that are quick
// to run: the hot key, in-process, and Redis memory.
func TestCompare(t *testing.T) {
	e := testRedis(t)
	var out bytes.Buffer
	cfg := config{
		redisAddr: e.addr, measure: 100 * time.Millisecond, warmup: 20 * time.Millisecond,
		gs: []int{1, 4}, cases: "BDHMF", window: defaultWindow, only: regexp.MustCompile(""), rounds: 1,
		progress: io.Discard,
	}
	if err := compare(context.Background(), &out, cfg); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	for _, want := range []string{
		"### B — remote, one hot key", "### D — in-process", "### D — in-process memory per idle key",
		"### F — Redis memory per key", "| ratelimit | 100,000 |", "### Targets",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(report, "ERROR") || strings.Contains(report, "VOID") {
		t.Errorf("a cell failed:\n%s", report)
	}
	if testing.Verbose() {
		t.Log("\n" + report)
	}
}

// TestSpikePhase runs one small phase of case S: every call is decided
// (allowed, on Redis), timed, and the report and targets read it.
func TestSpikePhase(t *testing.T) {
	e := testRedis(t)
	r := spikePhase(context.Background(), e, 8, time.Millisecond, 200*time.Millisecond)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.calls == 0 || r.onRedis == 0 || r.worst <= 0 || r.p99 <= 0 {
		t.Fatalf("phase measured nothing: %+v", r)
	}
	sc := &spikeCase{capacity: r, spike: r, timeout: time.Hour}
	var out bytes.Buffer
	printSpike(&out, sc)
	if !strings.Contains(out.String(), "### S — a load spike") {
		t.Errorf("case S's table is missing:\n%s", out.String())
	}
	for _, tg := range spikeTargets(sc) {
		if v := tg.judge(results{}); v.state == "VOID" || v.state == "SKIPPED" {
			t.Errorf("%s: %s (%s)", tg.text, v.state, v.text)
		}
	}
}

// TestReserveContenders runs case R's adapters under 3 per minute (their
// rule holds 3 ops at the reserved cost): AllowN and a settle at the
// reserved cost allow 3 ops, a settle for half the cost 5 (the fifth fits
// whole before it gives half back), one for 1.5
// times it 2.
func TestReserveContenders(t *testing.T) {
	e := testRedis(t)
	ctx := context.Background()
	for _, cw := range []struct {
		c    contender
		want int
	}{{oursAllowN, 3}, {oursSettleEqual, 3}, {oursSettleLess, 5}, {oursSettleMore, 2}} {
		c, want := cw.c, cw.want
		t.Run(c.name, func(t *testing.T) {
			if err := flushAll(ctx, e.admin); err != nil {
				t.Fatal(err)
			}
			l, closeFn, err := c.open(e.addr, spec{name: "t", rate: 3, window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			for i := range want + 1 {
				got, err := l.Allow(ctx, "k")
				if err != nil {
					t.Fatalf("op %d: %v", i+1, err)
				}
				if got != (i < want) {
					t.Fatalf("op %d: allowed %v, want %v", i+1, got, i < want)
				}
			}
		})
	}
}

// Command compare measures github.com/ratelimit-go/ratelimit against other
// Go rate limiters and an EVALSHA floor, on the same keys for the same time
// at 1, 16 and 256 goroutines, and prints markdown tables.
//
// It lives in its own module so the peers never enter the core's
// dependencies. Run it from the repository root with
//
//	cd benchmarks && go run ./cmd/compare
//
// (or go -C benchmarks run ./cmd/compare). It starts its own redis-server
// on a free port of 127.0.0.1 (no persistence) and stops it at the end;
// -redis ADDR uses an existing server instead, which it empties with
// FLUSHALL before every cell.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// env is what the remote cells share: the server and the harness' own
// client.
type env struct {
	addr    string
	version string
	started bool // this program started the server
	admin   rueidis.Client
}

type config struct {
	redisAddr string
	measure   time.Duration
	warmup    time.Duration
	gs        []int
	cases     string
	window    time.Duration
	only      *regexp.Regexp
	rounds    int
	progress  io.Writer // where each cell is announced as it starts
	// primeWith, when above a cell's goroutines, primes the cell with
	// that many goroutines instead (see prime): for latency on a client
	// that has seen concurrent calls, as a long-running service's has.
	primeWith int
}

func main() {
	cfg := config{progress: os.Stderr}
	var quick bool
	var gs string
	flag.StringVar(&cfg.redisAddr, "redis", "", "use the redis-server at this address instead of starting one (it is FLUSHALLed before every cell)")
	flag.DurationVar(&cfg.measure, "d", 3*time.Second, "measured time per cell (one contender at one concurrency)")
	flag.DurationVar(&cfg.warmup, "warmup", time.Second, "warm-up time per cell, not measured")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds over every cell; each cell reports its round with the most ops/s")
	flag.IntVar(&cfg.primeWith, "prime", 0, "prime every cell with at least this many goroutines (16: measure 1 goroutine on a client that has seen concurrent calls, as rueidis then pipelines for good)")
	flag.BoolVar(&quick, "quick", false, "short cells: -d 500ms -warmup 200ms -rounds 1")
	flag.DurationVar(&cfg.window, "window", defaultWindow, "window of the mostly-allowed cases A, C and D (rate 1,000,000 per window; G keeps 1s)")
	only := flag.String("only", "", "measure only the contenders whose name matches this regular expression")
	flag.StringVar(&gs, "g", "1,16,256", "goroutine counts, comma-separated")
	flag.StringVar(&cfg.cases, "cases", "ABCDGHIFS", "cases to run: A B C D G H I R (throughput; G: GCRA against redis_rate; I: one hot key in process, mostly allowed; R: Reserve + Settle beside AllowN, P: one hot key with and without Prefetch; R and P are not run unless named), M (in-process memory, part of D), F (Redis memory), S (a load spike)")
	flag.Parse()
	if quick {
		cfg.measure, cfg.warmup, cfg.rounds = 500*time.Millisecond, 200*time.Millisecond, 1
	}
	for _, f := range strings.Split(gs, ",") {
		g, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || g < 1 {
			fmt.Fprintf(os.Stderr, "compare: bad goroutine count %q\n", f)
			os.Exit(2)
		}
		cfg.gs = append(cfg.gs, g)
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "compare: -only: %v\n", err)
		os.Exit(2)
	}
	cfg.only = re
	if strings.Contains(cfg.cases, "D") && !strings.Contains(cfg.cases, "M") {
		cfg.cases += "M"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = compare(ctx, os.Stdout, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// needsRedis reports whether any selected case talks to Redis.
func (c config) needsRedis() bool { return strings.ContainsAny(c.cases, "ABCFGPRS") }

// compare runs the selected cases and writes the report to w.
func compare(ctx context.Context, w io.Writer, cfg config) error {
	e := &env{}
	if cfg.needsRedis() {
		e.addr = cfg.redisAddr
		if e.addr == "" {
			srv, err := startRedis()
			if err != nil {
				return err
			}
			defer srv.stop()
			e.addr, e.started = srv.addr, true
		}
		admin, version, err := dialAdmin(ctx, e.addr)
		if err != nil {
			return err
		}
		defer admin.Close()
		e.admin, e.version = admin, version
	}
	printHeader(w, cfg, e)

	plan := cellPlan{warmup: cfg.warmup, measure: cfg.measure, primeWith: cfg.primeWith}
	res := results{}
	for _, bc := range cases(cfg.window) {
		if !strings.Contains(cfg.cases, bc.id) {
			continue
		}
		if err := measureCase(ctx, e, cfg, bc, plan, res); err != nil {
			return err
		}
		printCase(w, bc, cfg.gs, res)
		if bc.id == "D" && strings.Contains(cfg.cases, "M") {
			if err := printLocalMemory(w); err != nil {
				return err
			}
		}
	}
	if strings.Contains(cfg.cases, "F") {
		if err := printRedisMemory(ctx, w, e, cfg.progress); err != nil {
			return err
		}
	}
	var sc *spikeCase
	if strings.Contains(cfg.cases, "S") {
		sc = measureSpike(ctx, e, max(cfg.measure, spikeMinDuration), cfg.progress)
		printSpike(w, sc)
	}
	printTargets(w, append(targets(cfg.gs), spikeTargets(sc)...), res)
	return nil
}

// dialAdmin connects the harness' own client to the server at addr and
// returns it with the server's version (INFO server's redis_version).
func dialAdmin(ctx context.Context, addr string) (rueidis.Client, string, error) {
	admin, err := adminClient(addr)
	if err != nil {
		return nil, "", fmt.Errorf("connecting to %s: %w", addr, err)
	}
	info, err := admin.Do(ctx, admin.B().Info().Section("server").Build()).ToString()
	if err != nil {
		admin.Close()
		return nil, "", err
	}
	version, _ := infoField(info, "redis_version")
	return admin, version, nil
}

// measureCase measures every cell of bc that cfg selects, round after
// round, each round over cfg's goroutine counts and then bc's contenders,
// and keeps each cell's best round in res. It stops when ctx is done.
func measureCase(ctx context.Context, e *env, cfg config, bc benchCase, plan cellPlan, res results) error {
	for round := 1; round <= cfg.rounds; round++ {
		for _, g := range cfg.gs {
			for _, c := range bc.contenders {
				if !cfg.only.MatchString(c.name) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				fmt.Fprintf(cfg.progress, "case %s round %d: %s, %d goroutines...\n", bc.id, round, c.name, g)
				r := measureCell(ctx, e, c, bc.spec, bc.keys, g, plan)
				res.keepBest(bc.id, &r)
			}
		}
	}
	return nil
}

// printLocalMemory measures and writes case D's in-process memory table
// (case M).
func printLocalMemory(w io.Writer) error {
	rows, err := localMemory()
	if err != nil {
		return fmt.Errorf("in-process memory: %w", err)
	}
	printMemory(w, "D — in-process memory per idle key",
		fmt.Sprintf("%d keys each given Rate events (window 1h), then runtime.GC; MemStats.HeapAlloc delta / %d.", idleKeys, idleKeys),
		"bytes/key", rows)
	return nil
}

// printRedisMemory measures and writes case F's table, Redis memory per
// key, announcing it on progress.
func printRedisMemory(ctx context.Context, w io.Writer, e *env, progress io.Writer) error {
	fmt.Fprintln(progress, "case F: Redis memory...")
	rows, err := redisMemory(ctx, e)
	if err != nil {
		return fmt.Errorf("redis memory: %w", err)
	}
	printMemory(w, "F — Redis memory per key (MEMORY USAGE key SAMPLES 0)",
		"ratelimit: one key filled with Rate events (window 1h) by AllowN in chunks of at most 1,000 (members are `<id><seq>:<i>`), log key `rl:v1:{<len>:<rule>:=<key>}:l`. Peers: their one key after one call.",
		"bytes", rows)
	return nil
}

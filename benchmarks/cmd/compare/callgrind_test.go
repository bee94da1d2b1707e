package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
)

// TestCallgrindInstructions counts the instructions redis-server runs per
// decision, as BENCHMARKS.md counts them: a redis-server under
// `valgrind --tool=callgrind` (its address in RATELIMIT_CALLGRIND_ADDR, its
// pid in RATELIMIT_CALLGRIND_PID), per contender 2,000 calls to warm up on
// 1,000 keys, the counters zeroed (callgrind_control -z), 5,000 calls from 4
// goroutines, and the whole server's instructions (callgrind_control -d,
// then callgrind_annotate's total) divided by the calls. Skipped unless
// both are set. Every contender at 1,000,000 per hour, every call allowed:
// with an hour's window no event leaves a log during the count, so a log's
// length, and with it the count, does not depend on how fast the calls
// came (with a 1 s window it moved by ±3k from run to run).
func TestCallgrindInstructions(t *testing.T) {
	addr, pid := os.Getenv("RATELIMIT_CALLGRIND_ADDR"), os.Getenv("RATELIMIT_CALLGRIND_PID")
	if addr == "" || pid == "" {
		t.Skip("set RATELIMIT_CALLGRIND_ADDR and RATELIMIT_CALLGRIND_PID to a redis-server under callgrind")
	}
	out := os.Getenv("RATELIMIT_CALLGRIND_OUT") // the callgrind.out file prefix
	s := spec{name: "cg", rate: 1_000_000, window: time.Hour}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	openWith := func(opts ratelimit.Options, rule ratelimit.Rule) func() (limiter, func(), error) {
		return func() (limiter, func(), error) {
			c, err := rueidisClient(addr)
			if err != nil {
				return nil, nil, err
			}
			opts.Logger = ourOptions().Logger
			opts.Timeout = 30 * time.Second // valgrind slows Redis down many times
			l, err := ratelimit.New(c, opts)
			if err != nil {
				return nil, nil, err
			}
			return &ours{l: l, rule: rule}, func() { l.Close(); c.Close() }, nil
		}
	}
	plain := ratelimit.Rule{Name: "cg", Limit: ratelimit.PerHour(1_000_000)}
	gcra := ratelimit.Rule{Name: "cg-g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 1_000_000, Window: time.Hour, Burst: 1_000_000}}
	contenders := []struct {
		name string
		open func() (limiter, func(), error)
	}{
		{"naive sliding log (client's time)", func() (limiter, func(), error) { return openScript(naiveScript, "naive:")(addr, s) }},
		{"ratelimit plain, Options.Clock", openWith(ratelimit.Options{Clock: wallClock{}}, plain)},
		{"ratelimit plain, Redis' TIME", openWith(ratelimit.Options{}, plain)},
		{"ratelimit GCRA, Redis' TIME", openWith(ratelimit.Options{}, gcra)},
		{"ratelimit GCRA, Options.Clock", openWith(ratelimit.Options{Clock: wallClock{}}, gcra)},
	}
	total := regexp.MustCompile(`([\d,]+)\s+\(100.0%\)\s+PROGRAM TOTALS`)
	ctx := context.Background()
	for i, c := range contenders {
		l, closeFn, err := c.open()
		if err != nil {
			t.Fatal(err)
		}
		calls := func(n int) {
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := g; j < n; j += 4 {
						if _, err := l.Allow(ctx, keys[j%len(keys)]); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		}
		calls(2000)
		var deg0 int64
		dg, isDegrader := l.(degrader)
		if isDegrader {
			deg0 = dg.Degraded() // a first call may come before the client has connected
		}
		if b, err := exec.Command("callgrind_control", "-z", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -z: %v: %s", err, b)
		}
		calls(5000)
		if b, err := exec.Command("callgrind_control", "-d", fmt.Sprintf("c%d", i), pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -d: %v: %s", err, b)
		}
		closeFn()
		if isDegrader && dg.Degraded() > deg0 {
			t.Errorf("%s: %d counted decisions made without Redis: the count is void", c.name, dg.Degraded()-deg0)
		}
		if out == "" {
			continue
		}
		time.Sleep(500 * time.Millisecond)
		file := fmt.Sprintf("%s.%s.%d", out, pid, i+1)
		b, err := exec.Command("callgrind_annotate", file).CombinedOutput()
		if err != nil {
			t.Logf("callgrind_annotate %s: %v", file, err)
			continue
		}
		m := total.FindSubmatch(b)
		if m == nil {
			t.Logf("%s: no total in %s", c.name, file)
			continue
		}
		ir, _ := strconv.ParseInt(strings.ReplaceAll(string(m[1]), ",", ""), 10, 64)
		t.Logf("%-36s %6.1fk instructions per call", c.name, float64(ir)/5000/1000)
	}
}

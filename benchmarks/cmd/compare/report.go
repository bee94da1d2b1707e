package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// loadAvg returns the first three fields of /proc/loadavg, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func printHeader(w io.Writer, cfg config, e *env) {
	fmt.Fprintf(w, "## ratelimit vs peers — %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- machine: %s/%s, %d CPUs (GOMAXPROCS %d)", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if m := cpuModel(); m != "" {
		fmt.Fprintf(w, ", %s", m)
	}
	fmt.Fprintf(w, "; %s; load average at the start %s\n", runtime.Version(), loadAvg())
	if e.addr != "" {
		how := "started by this program on a free loopback port, --save \"\" --appendonly no"
		if !e.started {
			how = "given with -redis"
		}
		fmt.Fprintf(w, "- Redis %s at %s (%s), on the same machine as the client\n", e.version, e.addr, how)
	}
	fmt.Fprintf(w, "- each cell: a fresh limiter, FLUSHALL (remote), one Allow per key, %v warm-up at the same concurrency, GC, then %v measured; %d round(s) over all cells, each cell showing its round with the most ops/s\n", cfg.warmup, cfg.measure, cfg.rounds)
	fmt.Fprintf(w, "- latency: every %dth call of each goroutine timed (same for all), histogram of ~3%% buckets; allocs/op: MemStats.Mallocs delta over the whole measured run / ops, so it includes the clients' background goroutines\n", sampleEvery)
	fmt.Fprintln(w, "- Redis CPU/op: redis-server's used_cpu_sys + used_cpu_user (INFO cpu) over the measured run / ops; what the server spends per call, network I/O included")
	fmt.Fprintln(w, "- keys: each goroutine walks the key set round robin from its own offset; ratios are within this run (the machine is shared and noisy)")
	fmt.Fprintln(w)
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Microsecond:
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.3g µs", float64(d)/float64(time.Microsecond))
	default:
		return fmt.Sprintf("%.3g ms", float64(d)/float64(time.Millisecond))
	}
}

// fmtOps prints a rate with thousands separators.
func fmtOps(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtRatio(x, y float64) string {
	if y == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", x/y)
}

// status is what a cell's last column says about it.
func status(c *cellResult) string {
	switch {
	case c.err != nil:
		return "ERROR: " + strings.ReplaceAll(c.err.Error(), "|", "/")
	case c.degraded > 0:
		return fmt.Sprintf("VOID: %d degraded decisions", c.degraded)
	case c.ops == 0:
		return "VOID: no calls"
	case c.invalidRounds > 0:
		return fmt.Sprintf("%d other round(s) void (error or degraded)", c.invalidRounds)
	}
	return ""
}

// printCase writes one throughput case: its table of cells, the ratios of
// its own contender to each other one, and its notes.
func printCase(w io.Writer, bc benchCase, gs []int, res results) {
	fmt.Fprintf(w, "### %s — %s\n\n", bc.id, bc.title)
	printCells(w, bc, gs, res)
	printRatios(w, bc, gs, res)
	for _, n := range bc.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
}

// cellColumns says which optional columns a case's table has: Redis CPU/op
// when a contender is remote, ÷ floor when the floor is a contender.
type cellColumns struct {
	remote, floor bool
}

// columnsOf returns the optional columns of bc's table.
func columnsOf(bc benchCase) cellColumns {
	var cols cellColumns
	for _, c := range bc.contenders {
		cols.floor = cols.floor || c.name == floorContender.name
		cols.remote = cols.remote || c.remote
	}
	return cols
}

// printCells writes bc's table: one row per concurrency and contender
// measured, in the order of gs and of bc's contenders.
func printCells(w io.Writer, bc benchCase, gs []int, res results) {
	cols := columnsOf(bc)
	cols.printHeader(w)
	for _, g := range gs {
		f := res.get(bc.id, floorContender.name, g)
		for _, c := range bc.contenders {
			r := res.get(bc.id, c.name, g)
			if r == nil {
				continue
			}
			cols.printRow(w, c.name, g, r, f)
		}
	}
	fmt.Fprintln(w)
}

// printHeader writes the header and alignment lines of a case's table.
func (cols cellColumns) printHeader(w io.Writer) {
	fmt.Fprint(w, "| contender | goroutines | ops/s | p50 | p99 | allocs/op | allowed |")
	if cols.remote {
		fmt.Fprint(w, " Redis CPU/op |")
	}
	if cols.floor {
		fmt.Fprint(w, " ÷ floor |")
	}
	fmt.Fprintln(w, " note |")
	fmt.Fprint(w, "|---|---:|---:|---:|---:|---:|---:|")
	if cols.remote {
		fmt.Fprint(w, "---:|")
	}
	if cols.floor {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w, "---|")
}

// printRow writes the row of cell r, contender name at g goroutines; f is
// the floor's cell at g, nil when it was not measured.
func (cols cellColumns) printRow(w io.Writer, name string, g int, r, f *cellResult) {
	allowed := "—"
	if r.ops > 0 {
		allowed = fmt.Sprintf("%.1f%%", 100*float64(r.allowed)/float64(r.ops))
	}
	fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %.2f | %s |", name, g, fmtOps(r.opsPerSec()),
		fmtDur(r.p50), fmtDur(r.p99), r.allocsPerOp(), allowed)
	if cols.remote {
		fmt.Fprintf(w, " %s |", fmtDur(r.redisCPUPerOp()))
	}
	if cols.floor {
		if f != nil && f.valid() && r.valid() {
			fmt.Fprintf(w, " %s |", fmtRatio(r.opsPerSec(), f.opsPerSec()))
		} else {
			fmt.Fprint(w, " — |")
		}
	}
	fmt.Fprintf(w, " %s |\n", status(r))
}

// printRatios writes the table of bc's own contender's ops/s over each
// other contender's, with their p50s' ratio in brackets, one column per
// concurrency.
func printRatios(w io.Writer, bc benchCase, gs []int, res results) {
	fmt.Fprintf(w, "%s ÷ each other contender (ops/s; p50 in brackets: theirs ÷ ours):\n\n", bc.ours)
	fmt.Fprint(w, "| vs |")
	for _, g := range gs {
		fmt.Fprintf(w, " %d goroutines |", g)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|")
	for range gs {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, c := range bc.contenders {
		if c.name == bc.ours {
			continue
		}
		fmt.Fprintf(w, "| %s |", c.name)
		for _, g := range gs {
			o, p := res.get(bc.id, bc.ours, g), res.get(bc.id, c.name, g)
			if o == nil || p == nil || !o.valid() || !p.valid() {
				fmt.Fprint(w, " — |")
				continue
			}
			fmt.Fprintf(w, " %s (%s) |", fmtRatio(o.opsPerSec(), p.opsPerSec()), fmtRatio(float64(p.p50), float64(o.p50)))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func printMemory(w io.Writer, title, how, unit string, rows []memoryRow) {
	fmt.Fprintf(w, "### %s\n\n%s\n\n", title, how)
	fmt.Fprintf(w, "| contender | Rate | %s | note |\n|---|---:|---:|---|\n", unit)
	for _, r := range rows {
		rate := "any"
		if r.rate > 0 {
			rate = fmtOps(float64(r.rate))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.what, rate, fmtOps(r.bytes), r.note)
	}
	fmt.Fprintln(w)
}

func printTargets(w io.Writer, ts []target, res results) {
	fmt.Fprintln(w, "### Targets (ratios within this run)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```")
	for _, t := range ts {
		v := t.judge(res)
		fmt.Fprintf(w, "%-8s %s: %s\n", v.state, t.text, v.text)
	}
	fmt.Fprintln(w, "```")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Load average at the end: %s (on %d CPUs).\n\n", loadAvg(), runtime.NumCPU())
	fmt.Fprintln(w, "Case E (ours with vs without the per-call deadline and breaker) is not measured: the public API has no switch to bypass them.")
}

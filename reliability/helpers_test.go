package reliability_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// Helpers shared by the reliability tests (lua_precision_test.go,
// differential_test.go, fault_*_test.go, exactness_test.go,
// hostile_input_test.go, fuzz_test.go).

// layoutKeys returns the Redis keys of (rule, key) as docs/semantics.md documents
// them, written independently of keys.go so that the tests check the
// documented layout rather than repeat the code:
//
//	<prefix>v1:{<len>:<rule>:=<key>}:l    the sliding log
//	<prefix>v1:{<len>:<rule>:=<key>}:p    violations and ban
//
// '%' and '}' are escaped as %25 and %7D, <len> is the length of the escaped
// rule, and a key longer than MaxKeyLength is replaced by the hex SHA-256 of
// it, marked '#' instead of '='.
func layoutKeys(prefix, rule, key string) (log, pen string) {
	esc := strings.NewReplacer("%", "%25", "}", "%7D")
	r := esc.Replace(rule)
	kind, k := "=", esc.Replace(key)
	if len(key) > ratelimit.MaxKeyLength {
		sum := sha256.Sum256([]byte(key))
		kind, k = "#", hex.EncodeToString(sum[:])
	}
	base := prefix + "v1:{" + strconv.Itoa(len(r)) + ":" + r + ":" + kind + k + "}"
	return base + ":l", base + ":p"
}

// weightedCount returns the events an exact log holds (docs/semantics.md):
// its members less the sentinel '#', plus the sentinel's score less 2^52
// (the sum of (N - 1) over its grant members <id>#N).
func weightedCount(t *testing.T, s redisDoer, key string) int {
	t.Helper()
	n := mustInt(t, s, "ZCARD", key)
	if sum, err := s.Do("ZSCORE", key, "#"); err == nil {
		v, err := strconv.ParseInt(sum, 10, 64)
		if err != nil {
			t.Fatalf("ZSCORE %s # = %q", key, sum)
		}
		n += int(v-1<<52) - 1
	} else if !errors.Is(err, redistest.ErrNil) {
		t.Fatalf("ZSCORE %s #: %v", key, err)
	}
	return n
}

// redisDoer is a redis-server the test talks to directly (a Server, or a
// cluster node picked for a key).
type redisDoer interface {
	Do(args ...string) (string, error)
}

// mustDo runs a command on s and fails the test on any error.
func mustDo(t testing.TB, s redisDoer, args ...string) string {
	t.Helper()
	r, err := s.Do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return r
}

// mustInt runs a command whose reply is an integer.
func mustInt(t testing.TB, s redisDoer, args ...string) int {
	t.Helper()
	r := mustDo(t, s, args...)
	n, err := strconv.Atoi(r)
	if err != nil {
		t.Fatalf("%q answered %q, not an integer", args, r)
	}
	return n
}

// nodeFor returns the cluster node that serves key.
func nodeFor(t testing.TB, c *redistest.Cluster, key string) *redistest.Server {
	t.Helper()
	n, err := c.NodeForKey(key)
	if err != nil {
		t.Fatalf("NodeForKey(%q): %v", key, err)
	}
	return n
}

// commandCalls returns how many times the server ran cmd (lower case, e.g.
// "evalsha"), from INFO commandstats; 0 when it never ran.
func commandCalls(t testing.TB, s redisDoer, cmd string) int {
	t.Helper()
	info := mustDo(t, s, "INFO", "commandstats")
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		v, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("malformed commandstats line %q", line)
		}
		return v
	}
	return 0
}

// scriptCalls is how many times the server ran one of the limiter's
// scripts, by EVALSHA or by EVAL.
func scriptCalls(t testing.TB, s redisDoer) int {
	t.Helper()
	return commandCalls(t, s, "evalsha") + commandCalls(t, s, "eval")
}

// quietLogger keeps the limiter's log lines in buf instead of the test output.
func quietLogger(buf *testkit.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

// hangBound is the longest any call may take in a fault test: ten times the
// limiter's Timeout. It catches hangs; it is no speed check.
func hangBound(opts ratelimit.Options) time.Duration {
	return 10 * opts.Timeout
}

// latencies keeps the number of calls and the worst latency seen by many
// goroutines.
type latencies struct {
	calls, tooSlow, worst atomic.Int64
}

// observe records one call that took d and reports whether d is within bound.
func (l *latencies) observe(d, bound time.Duration) bool {
	l.calls.Add(1)
	for {
		old := l.worst.Load()
		if int64(d) <= old || l.worst.CompareAndSwap(old, int64(d)) {
			break
		}
	}
	if d > bound {
		l.tooSlow.Add(1)
		return false
	}
	return true
}

// Worst returns the longest call observed.
func (l *latencies) Worst() time.Duration { return time.Duration(l.worst.Load()) }

// realStore is a real Redis the test can reach both through limiters and
// directly, routing each direct command to the node that serves its key.
type realStore struct {
	name  string
	addrs []string
	// node returns the server holding key.
	node func(t testing.TB, key string) redisDoer
	// all are every server of the store.
	all []redisDoer
}

// singleStore is one redis-server.
func singleStore(s *redistest.Server) realStore {
	return realStore{name: "redis", addrs: []string{s.Addr()},
		node: func(testing.TB, string) redisDoer { return s }, all: []redisDoer{s}}
}

// clusterStore is a Redis Cluster.
func clusterStore(c *redistest.Cluster) realStore {
	return realStore{name: "cluster", addrs: c.Addrs(),
		node: func(t testing.TB, key string) redisDoer { return nodeFor(t, c, key) },
		all:  []redisDoer{c.Node(0), c.Node(1), c.Node(2)}}
}

// miniredisStore is an in-process miniredis, reached directly over RESP.
func miniredisStore(t testing.TB) realStore {
	mr := miniredis.RunT(t)
	d := addrDoer(mr.Addr())
	return realStore{name: "miniredis", addrs: []string{mr.Addr()},
		node: func(testing.TB, string) redisDoer { return d }, all: []redisDoer{d}}
}

// addrDoer sends each command on a new RESP connection to a server address.
type addrDoer string

func (a addrDoer) Do(args ...string) (string, error) {
	c, err := redistest.Dial(string(a), 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c.Do(args...)
}

// realStores starts a redis-server and a 3-master cluster for the test, or
// returns nil (after testkit.HaveRedis has said why) when the binaries are missing.
func realStores(t testing.TB) []realStore {
	t.Helper()
	if !testkit.HaveRedis(t) {
		return nil
	}
	return []realStore{
		singleStore(redistest.Start(t, redistest.Options{})),
		clusterStore(redistest.StartCluster(t)),
	}
}

// limiter returns a limiter on the store with a key prefix of its own, and
// that prefix.
func (s realStore) limiter(t testing.TB, opts ratelimit.Options) (*ratelimit.Limiter, string) {
	t.Helper()
	opts = testkit.Isolated(opts)
	return testkit.NewLimiter(t, testkit.NewClient(t, s.addrs...), opts), opts.KeyPrefix
}

// zcard returns the number of members of the sorted set key.
func (s realStore) zcard(t testing.TB, key string) int {
	t.Helper()
	return mustInt(t, s.node(t, key), "ZCARD", key)
}

// readings finds the time each call was decided at when many goroutines
// share one limiter and one clock. A Limiter reads its Clock once per call,
// on the caller's goroutine, and decides at that reading on every path
// (Redis, the shield, or without Redis; see route in ratelimit.go, and
// TestEachCallReadsTheClockOnce): so the reading a goroutine makes between
// begin and end is its call's time. Go has no goroutine-local storage;
// goid stands in for it.
type readings struct {
	m sync.Map // goroutine id → *reading
}

// reading is one goroutine's reading since begin, and how many it made.
type reading struct {
	at int64 // µs
	n  int
}

// note records t as the calling goroutine's reading.
func (r *readings) note(t time.Time) {
	if v, ok := r.m.Load(goid()); ok {
		p := v.(*reading)
		p.at, p.n = t.UnixMicro(), p.n+1
	}
}

// begin starts recording for the calling goroutine.
func (r *readings) begin() {
	v, _ := r.m.LoadOrStore(goid(), new(reading))
	*v.(*reading) = reading{}
}

// end returns the time the calling goroutine's call since begin was
// decided at, and fails the test unless the call read the clock once (a
// call rejected before any decision, with an error, reads it never: end
// returns 0).
func (r *readings) end(t testing.TB) int64 {
	v, _ := r.m.Load(goid())
	p := v.(*reading)
	if p.n > 1 {
		t.Errorf("one call read the clock %d times, want once", p.n)
	}
	return p.at
}

// goid returns the id of the calling goroutine, from the first line of its
// stack trace ("goroutine 42 [running]:").
func goid() int64 {
	var buf [40]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	b = b[:bytes.IndexByte(b, ' ')]
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}

// recClock is a fake clock that records the time each call was decided at.
type recClock struct {
	*ratelimittest.Clock
	readings
}

func newRecClock() *recClock { return &recClock{Clock: testkit.NewClock()} }

func (c *recClock) Now() time.Time {
	t := c.Clock.Now()
	c.note(t)
	return t
}

// mostInOneWindow returns the most events Redis' log at logKey holds within
// any one window-long interval: what Rate bounds. (The log itself keeps a
// window more than counting needs, see lua/sliding.lua.)
func mostInOneWindow(t testing.TB, s redisDoer, logKey string, window time.Duration) int {
	t.Helper()
	flat := strings.Split(mustDo(t, s, "ZRANGE", logKey, "0", "-1", "WITHSCORES"), "\n")
	var at []int64
	for k := 0; k+1 < len(flat); k += 2 {
		score, err := strconv.ParseInt(flat[k+1], 10, 64)
		if err != nil {
			t.Fatalf("score %q of %s: %v", flat[k+1], logKey, err)
		}
		at = append(at, score)
	}
	most, w := 0, window.Microseconds()
	for i, j := 0, 0; j < len(at); j++ {
		for at[j]-at[i] >= w {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

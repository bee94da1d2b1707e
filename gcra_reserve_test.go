package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/meter"
	"github.com/redis/rueidis"
)

// GCRA reservations beside the behaviour suite (internal/conformance): what
// a bucket keeps of them is forgotten once nothing can need it, in Redis'
// string and in this process' bucket, and give-backs that wait for Redis
// are exact once it takes them, and never twice. Same environment as
// writeback_test.go: miniredis, a fake clock.

var reservedBucket = Rule{Name: "bucket-res", Kind: GCRA, Limit: Limit{Rate: 10, Window: 10 * time.Second, Burst: 10}}

// outstanding returns how many reservations key's bucket keeps in Redis
// (the records after the TAT, see lua/gcra.lua) and in l's own bucket.
func (e *wbEnv) outstanding(l *Limiter, key string) (onRedis, local int) {
	e.t.Helper()
	onRedis = strings.Count(e.redisValue(meterKey(reservedBucket, key)), "|")
	k, _ := localKey(reservedBucket.Name, key)
	sh, h := l.local.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if b := metersOf[meter.Bucket](&sh.meters, bucketMeters).Peek(&k, h); b != nil {
		local = b.Outstanding()
	}
	return onRedis, local
}

func (e *wbEnv) wantOutstanding(l *Limiter, key string, want int, when string) {
	e.t.Helper()
	if r, lc := e.outstanding(l, key); r != want || lc != want {
		e.t.Fatalf("%s: %d reservations kept on Redis, %d in the process; want %d", when, r, lc, want)
	}
}

func (e *wbEnv) peek(l *Limiter, rule Rule, key string) Result {
	e.t.Helper()
	r, err := l.Peek(context.Background(), rule, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestGCRAReservationRecordsAreForgotten: a reservation settled at or over
// its cost, an allowed AllowAll's GCRA pair and every reservation of a
// bucket found full leave no record behind, so that a bucket keeps only
// what may still give something back; a reservation forgotten with a full
// bucket gives nothing back.
func TestGCRAReservationRecordsAreForgotten(t *testing.T) {
	e := newWBEnv(t, Options{})
	ctx := context.Background()
	reserve := func(n int) *Reservation {
		t.Helper()
		r, res, err := e.l.Reserve(ctx, reservedBucket, "k", n)
		if err != nil || !res.Allowed || res.Degraded {
			t.Fatalf("Reserve(%d) = %+v, %v", n, res, err)
		}
		return r
	}
	r := reserve(3)
	e.wantOutstanding(e.l, "k", 1, "reserved")
	if err := r.Settle(ctx, 3); err != nil {
		t.Fatal(err)
	}
	e.wantOutstanding(e.l, "k", 0, "settled at its cost")
	r = reserve(2)
	if err := r.Settle(ctx, 5); err != nil {
		t.Fatal(err)
	}
	e.wantOutstanding(e.l, "k", 0, "settled over its cost")
	if got, want := e.peek(e.l, reservedBucket, "k"), (Result{Allowed: true, Limit: 10, Remaining: 2, ResetAfter: 8 * time.Second}); got != want {
		t.Fatalf("after 3 and 5: %+v, want %+v", got, want)
	}
	rs, err := e.l.AllowAll(ctx, []Check{{Rule: reservedBucket, Key: "k", N: 1}, {Rule: Rule{Name: "other", Limit: PerMinute(10)}, Key: "o"}})
	if err != nil || len(rs) != 2 || !rs[1].Allowed {
		t.Fatalf("AllowAll = %+v, %v", rs, err)
	}
	e.wantOutstanding(e.l, "k", 0, "an allowed AllowAll")
	r = reserve(1)
	e.wantOutstanding(e.l, "k", 1, "reserved again")
	e.clk.advance(20 * time.Second) // the bucket is full again
	e.allow(e.l, reservedBucket, "k")
	e.wantOutstanding(e.l, "k", 0, "a call at a full bucket")
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := e.peek(e.l, reservedBucket, "k"), (Result{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second}); got != want {
		t.Fatalf("a cancel once the bucket was full gave back: %+v, want %+v", got, want)
	}
}

// TestGCRAGiveBackOwedWhileRedisRefuses: a reservation decided on Redis
// and cancelled while Redis refuses commands frees its tokens in this
// process at once, and on Redis once the give-back is sent; sent again (a
// lost reply) it gives back nothing more. Another process, which never
// saw the reservation, counts exactly the call that came between: the
// issue's example across an outage.
func TestGCRAGiveBackOwedWhileRedisRefuses(t *testing.T) {
	e := newWBEnv(t, Options{})
	ctx := context.Background()
	r, res, err := e.l.Reserve(ctx, reservedBucket, "k", 10)
	if err != nil || !res.Allowed || res.Degraded {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	e.clk.advance(5 * time.Second)
	if got := e.allow(e.l, reservedBucket, "k"); !got.Allowed || got.Degraded || got.Remaining != 4 {
		t.Fatalf("the call between = %+v", got)
	}
	e.refuse()
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.l.settles.backs.Pending() {
		t.Fatal("the give-back is not owed to Redis")
	}
	want := Result{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second}
	e.mr.SetError("")
	other := e.limiter(Options{ShieldMax: -1})
	if got := e.peek(other, reservedBucket, "k"); got.Remaining != 4 {
		t.Fatalf("another process before the give-back reached Redis: %+v, want Remaining 4", got)
	}
	e.back() // this process decides on Redis again; its write-back is the test's to run
	backs := e.l.settles.backs.Take()
	if len(backs) != 1 {
		t.Fatalf("%d give-backs owed, want 1", len(backs))
	}
	for range 2 { // the second as after a lost reply
		if !e.l.sendBack(ctx, &backs[0]) {
			t.Fatal("the give-back was not applied")
		}
		if got := e.peek(other, reservedBucket, "k"); got != want {
			t.Fatalf("another process after the give-back: %+v, want %+v", got, want)
		}
	}
	if got := e.peek(e.l, reservedBucket, "k"); got != want {
		t.Fatalf("this process after the give-back: %+v, want %+v", got, want)
	}
}

// TestGCRAReservationDecidedWithoutRedis: a reservation decided while
// Redis refuses commands is kept in this process' bucket; cancelled before
// the write-back, its tokens are never written back, and the call made
// between still is.
func TestGCRAReservationDecidedWithoutRedis(t *testing.T) {
	e := newWBEnv(t, Options{})
	ctx := context.Background()
	e.refuse()
	r, res, err := e.l.Reserve(ctx, reservedBucket, "k", 10)
	if err != nil || !res.Allowed || !res.Degraded {
		t.Fatalf("Reserve without Redis = %+v, %v", res, err)
	}
	e.clk.advance(5 * time.Second)
	if got := e.allow(e.l, reservedBucket, "k"); !got.Allowed || !got.Degraded {
		t.Fatalf("the call between = %+v", got)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	e.back()
	e.flush()
	other := e.limiter(Options{ShieldMax: -1})
	want := Result{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Second}
	for _, l := range []*Limiter{other, e.l} {
		if got := e.peek(l, reservedBucket, "k"); got != want {
			t.Fatalf("after the write-back: %+v, want %+v", got, want)
		}
	}
}

// afterReply is a client that runs a function once, right after Redis
// answered the next script call on the key key and before its caller sees
// the answer: what the function does lands between Redis' decision and the
// process' record of it. Other calls (the fleet's, the write-back's) do
// not run it.
type afterReply struct {
	rueidis.Client
	key  string
	next atomic.Pointer[func()]
}

func (c *afterReply) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands() // read before Do, which recycles cmd
	ours := strings.HasPrefix(strings.ToUpper(args[0]), "EVAL") && slices.Contains(args, c.key)
	res := c.Client.Do(ctx, cmd)
	if ours {
		if f := c.next.Swap(nil); f != nil {
			(*f)()
		}
	}
	return res
}

// TestGCRASettleBetweenDecisionAndRecord: a reservation settled while
// another call of the process is on its way, after Redis decided that call
// and before the process recorded Redis' answer, gives back in the
// process' bucket exactly what it gives back on Redis. Redis' answer, a
// TAT that still held the tokens given back, used to be copied into the
// bucket whole: the process then counted them again until a later settle
// recomputed its TAT, and held back calls Redis allows (the flaky
// TestConformance/ReserveHammer/miniredis/gcra). At a fake instant that
// stands still, so every count is exact.
func TestGCRASettleBetweenDecisionAndRecord(t *testing.T) {
	for _, c := range []struct {
		actual int
		want   int // the tokens in use afterwards: the 1 of the call between and actual
	}{
		{0, 1}, {2, 3}, {5, 6}, {7, 8},
	} {
		t.Run(fmt.Sprintf("settled at %d", c.actual), func(t *testing.T) {
			e := newWBEnv(t, Options{})
			client := &afterReply{Client: e.client, key: meterKey(reservedBucket, "k")}
			e.client = client
			l := e.limiter(Options{ShieldMax: -1, HeartbeatInterval: -1})
			ctx := context.Background()
			reserve := func(key string, n int) *Reservation {
				t.Helper()
				r, res, err := l.Reserve(ctx, reservedBucket, key, n)
				if err != nil || !res.Allowed || res.Degraded {
					t.Fatalf("Reserve(%d) = %+v, %v", n, res, err)
				}
				return r
			}
			if err := reserve("warm", 1).Cancel(ctx); err != nil { // the scripts are loaded
				t.Fatal(err)
			}
			r := reserve("k", 5)
			settle := func() {
				if err := r.Settle(ctx, c.actual); err != nil {
					t.Error(err)
				}
			}
			client.next.Store(&settle)
			reserve("k", 1)
			if client.next.Load() != nil {
				t.Fatal("the settle did not run between the call's decision and its record")
			}
			want := Result{Allowed: true, Limit: 10, Remaining: 10 - c.want, ResetAfter: time.Duration(c.want) * time.Second}
			if got := e.peek(l, reservedBucket, "k"); got != want {
				t.Fatalf("this process: %+v, want %+v", got, want)
			}
			if got := e.peek(e.limiter(Options{ShieldMax: -1}), reservedBucket, "k"); got != want {
				t.Fatalf("another process: %+v, want %+v", got, want)
			}
			// What is left is free for this process' next call.
			if got, err := l.AllowN(ctx, reservedBucket, "k", 10-c.want); err != nil || !got.Allowed || got.Degraded || got.Remaining != 0 {
				t.Fatalf("AllowN(%d) = %+v, %v; want allowed, Remaining 0", 10-c.want, got, err)
			}
		})
	}
}

// TestGCRASettleBetweenGrantAndRecord: as TestGCRASettleBetweenDecisionAndRecord,
// for a grant of slots (Rule.Prefetch) instead of a decision: a reservation
// settled after Redis made the grant and before the process merged Redis'
// bucket into its own (prefetch.go's askFor) gives back in the process'
// bucket what it gave back on Redis. Merged whole, Redis' TAT counted the
// tokens given back a second time in the process. At a fake instant that
// stands still, so the two TATs must be equal.
func TestGCRASettleBetweenGrantAndRecord(t *testing.T) {
	rule := reservedBucket
	rule.Name, rule.Prefetch = "bucket-pf", 500*time.Millisecond
	for _, actual := range []int{0, 2, 5} {
		t.Run(fmt.Sprintf("settled at %d", actual), func(t *testing.T) {
			e := newWBEnv(t, Options{})
			key := meterKey(rule, "k")
			client := &afterReply{Client: e.client, key: key}
			e.client = client
			var last atomic.Int64 // the last decision's Path
			l := e.limiter(Options{ShieldMax: -1, HeartbeatInterval: -1, OnDecision: func(d Decision) { last.Store(int64(d.Path)) }})
			ctx := context.Background()
			r, res, err := l.Reserve(ctx, rule, "k", 5)
			if err != nil || !res.Allowed || res.Degraded {
				t.Fatalf("Reserve(5) = %+v, %v", res, err)
			}
			// Two calls on Redis make the pair hot; the third asks for a grant.
			var path Path
			for i := 0; path != PathPrefetch; i++ {
				if i == 3 {
					t.Fatal("no call was allowed from a grant")
				}
				if i == 2 {
					settle := func() {
						if err := r.Settle(ctx, actual); err != nil {
							t.Error(err)
						}
					}
					client.next.Store(&settle)
				}
				got, err := l.Allow(ctx, rule, "k")
				if err != nil || !got.Allowed || got.Degraded {
					t.Fatalf("call %d = %+v, %v", i, got, err)
				}
				path = Path(last.Load())
			}
			if client.next.Load() != nil {
				t.Fatal("the settle did not run between the grant and its record")
			}
			k, _ := localKey(rule.Name, "k")
			sh, h := l.local.at(&k)
			sh.mu.Lock()
			tw, tr := metersOf[meter.Bucket](&sh.meters, bucketMeters).Peek(&k, h).TAT()
			sh.mu.Unlock()
			onRedis := strings.Fields(e.redisValue(key))
			if len(onRedis) < 2 || onRedis[0] != strconv.FormatInt(tw, 10) || onRedis[1] != strconv.FormatInt(tr, 10) {
				t.Fatalf("the process' TAT is %d µs + %d ticks; Redis' bucket holds %q", tw, tr, e.redisValue(key))
			}
		})
	}
}

package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
	"github.com/ratelimit-go/ratelimit/internal/ledger"
)

// The write-back of the other meter kinds (see writeback.go): a GCRA
// bucket's carry adds its tokens to Redis' TAT as of the cut, a
// calendar quota's count in the period they were stamped in. Same
// environment as writeback_test.go: miniredis, a fake clock, the
// write-back run by the test.

// redisValue returns the string Redis holds under key, "" for none.
func (e *wbEnv) redisValue(key string) string {
	e.t.Helper()
	v, err := e.mr.Get(key)
	if err != nil {
		return ""
	}
	return v
}

// meterKey returns the Redis key of the meter of rule and key (see
// redisKeys).
func meterKey(rule Rule, key string) string {
	k, _ := localKey(rule.Name, key)
	a, _ := algorithmOf(&rule)
	ks := redisKeys(DefaultKeyPrefix, k)
	return ks.Meter(a.redis.letter())
}

// TestWriteBackGCRAIssueRepro is the issue's repro for a GCRA bucket: 5
// per minute, bursts of 5 (one token per 12s); 3 calls on Redis, Redis
// refuses commands, 2 calls allowed locally 10s later, Redis back. Without
// the write-back Redis' TAT would still be 36s after the first calls, and
// another process would get 2 more tokens at once; with it, the TAT counts
// all 5, 60s after the first calls, and another process waits for the
// next token, as this one does.
func TestWriteBackGCRAIssueRepro(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "bucket", Kind: GCRA, Limit: Limit{Rate: 5, Window: time.Minute, Burst: 5}}
	t0 := e.clk.Now()
	e.outage(rule, "bob")
	tat := meterKey(rule, "bob")
	if v, want := e.redisValue(tat), strconv.FormatInt(t0.Add(time.Minute).UnixMicro(), 10); v != want {
		t.Fatalf("redis' TAT after the write-back = %q, want %q: the 2 local calls' 24s on top", v, want)
	}
	other := e.rejectedOnRedis(rule, "bob", 2*time.Second) // until the next token
	e.oneTokenBack(rule, "bob", 2*time.Second, other, e.l, other)
}

// oneTokenBack advances the clock by wait, until one token has come back,
// and checks that the calls of ls, in turn, on Redis, get exactly that one.
func (e *wbEnv) oneTokenBack(rule Rule, key string, wait time.Duration, ls ...*Limiter) {
	e.t.Helper()
	e.clk.advance(wait)
	allowed := 0
	for _, l := range ls {
		if r := e.allow(l, rule, key); r.Degraded {
			e.t.Fatalf("a call after the write-back degraded: %+v", r)
		} else if r.Allowed {
			allowed++
		}
	}
	if allowed != 1 {
		e.t.Fatalf("allowed %d when one token came back, want 1", allowed)
	}
}

// TestWriteBackQuotaIssueRepro is the issue's repro for a calendar quota:
// 5 a day, 3 calls on Redis, 2 allowed locally, Redis back: Redis' count of
// the day holds all 5, and another process waits for the next day. Events
// of a day that ended before Redis came back are not sent.
func TestWriteBackQuotaIssueRepro(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "daily", Kind: CalendarQuota, Limit: Limit{Rate: 5, Period: Day}}
	day, _ := rule.Limit.PeriodAt(e.clk.Now())
	e.outage(rule, "bob")
	quota := meterKey(rule, "bob")
	if v, want := e.redisValue(quota), strconv.FormatInt(day.UnixMicro(), 10)+" 5"; v != want {
		t.Fatalf("redis' quota after the write-back = %q, want %q", v, want)
	}
	_, midnight := rule.Limit.PeriodAt(e.clk.Now())
	other := e.rejectedOnRedis(rule, "bob", midnight.Sub(e.clk.Now()))

	// An event allowed without Redis on a day that ends before Redis comes
	// back counts in no period any more: neither sent nor dropped.
	fresh := Rule{Name: "fresh", Kind: CalendarQuota, Limit: Limit{Rate: 2, Period: Day}}
	e.refuse()
	if r := e.allow(e.l, fresh, "bob"); !r.Allowed || !r.Degraded {
		t.Fatalf("a call without redis = %+v", r)
	}
	e.clk.advance(midnight.Sub(e.clk.Now()))
	e.endedUnsent(other, fresh, "bob")
}

// endedUnsent brings Redis back after an event of rule and key was allowed
// without it in a window or period that has ended since: the event is
// neither written back nor dropped (the 2 of outage's before it are), and
// other finds the whole Rate of 2 on Redis.
func (e *wbEnv) endedUnsent(other *Limiter, rule Rule, key string) {
	e.t.Helper()
	e.back()
	e.flush()
	if v := e.redisValue(meterKey(rule, key)); v != "" {
		e.t.Fatalf("%q: an event of an ended period was written back: %q", rule.Name, v)
	}
	if s := e.l.Stats(); s.WriteBackPending != 0 || s.WrittenBack != 2 || s.WriteBackDropped != 0 {
		e.t.Fatalf("%q: Stats = %+v, want the ended period's event neither written back nor dropped", rule.Name, s)
	}
	for i := 0; i < 2; i++ {
		if r := e.allow(other, rule, key); !r.Allowed || r.Degraded {
			e.t.Fatalf("%q: call %d of the new period = %+v, want allowed on redis", rule.Name, i, r)
		}
	}
}

// TestWriteBackKindsReplayIgnored sends the same batches twice, as after
// a lost reply: Redis adds a bucket's and a quota's events once.
func TestWriteBackKindsReplayIgnored(t *testing.T) {
	e := newWBEnv(t, Options{})
	bucket := Rule{Name: "g", Kind: GCRA, Limit: Limit{Rate: 10, Window: time.Second, Burst: 10}} // 100ms a token
	quota := Rule{Name: "q", Kind: CalendarQuota, Limit: Limit{Rate: 10, Period: Month}}
	e.refuse()
	for i := 0; i < 3; i++ {
		e.allow(e.l, bucket, "k")
		e.allow(e.l, quota, "k")
	}
	e.back()
	now := e.l.localNow()
	e.sendTwice(2)
	if v, want := e.redisValue(meterKey(bucket, "k")), strconv.FormatInt(now+300_000, 10); v != want {
		t.Fatalf("redis' TAT after a replayed batch = %q, want %q (3 tokens of 100ms)", v, want)
	}
	month, _ := quota.Limit.PeriodAt(e.clk.Now())
	if v, want := e.redisValue(meterKey(quota, "k")), strconv.FormatInt(month.UnixMicro(), 10)+" 3"; v != want {
		t.Fatalf("redis' quota after a replayed batch = %q, want %q", v, want)
	}
	if s := e.l.Stats(); s.WrittenBack != 6 || s.WriteBackPending != 0 {
		t.Fatalf("Stats = %+v, want 6 written back", s)
	}
}

// TestWriteBackKindsReset: a Reset made while Redis refused it empties a
// full bucket and a spent quota on Redis before the events decided after
// it are added, which are all that Redis then counts.
func TestWriteBackKindsReset(t *testing.T) {
	e := newWBEnv(t, Options{})
	bucket := Rule{Name: "g", Kind: GCRA, Limit: Limit{Rate: 4, Window: time.Minute, Burst: 4}}
	quota := Rule{Name: "q", Kind: CalendarQuota, Limit: Limit{Rate: 4, Period: Week}}
	for _, rule := range []Rule{bucket, quota} {
		for i := 0; i < 4; i++ {
			e.allow(e.l, rule, "k")
		}
	}
	e.refuse()
	e.clk.advance(time.Second)
	for _, rule := range []Rule{bucket, quota} {
		if err := e.l.Reset(context.Background(), rule, "k"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Reset of %q without redis: %v, want ErrUnavailable", rule.Name, err)
		}
		for i := 0; i < 3; i++ {
			if r := e.allow(e.l, rule, "k"); !r.Allowed || !r.Degraded {
				t.Fatalf("%q: call %d after the Reset = %+v", rule.Name, i, r)
			}
		}
	}
	e.back()
	e.flush()
	other := e.limiter(Options{})
	for _, rule := range []Rule{bucket, quota} {
		if r := e.allow(other, rule, "k"); !r.Allowed || r.Degraded {
			t.Fatalf("%q: the fourth call since the Reset = %+v, want allowed on redis", rule.Name, r)
		}
		if r := e.allow(other, rule, "k"); r.Allowed || r.Degraded {
			t.Fatalf("%q: the fifth call since the Reset = %+v, want rejected on redis", rule.Name, r)
		}
	}
	if s := e.l.Stats(); s.WrittenBack != 6 {
		t.Fatalf("WrittenBack = %d, want 6", s.WrittenBack)
	}
}

// TestWriteBackKindsGroupAndUndo: a group's bucket and quota decided
// without Redis are written back under the group's hash tag, where
// AllowGroup finds them; tokens and quota AllowAll took back are not owed.
func TestWriteBackKindsGroupAndUndo(t *testing.T) {
	e := newWBEnv(t, Options{})
	bucket := Rule{Name: "g", Kind: GCRA, Limit: Limit{Rate: 3, Window: time.Hour, Burst: 3}}
	quota := Rule{Name: "q", Kind: CalendarQuota, Limit: Limit{Rate: 3, Period: Day}}
	tight := Rule{Name: "tight", Limit: PerMinute(1)}
	checks := []Check{{Rule: bucket, Key: "u"}, {Rule: quota, Key: "u"}}
	e.refuse()
	for i := 0; i < 3; i++ {
		if rs, err := e.l.AllowGroup(context.Background(), "u", checks); err != nil || !rs[1].Allowed || !rs[1].Degraded {
			t.Fatalf("group %d without redis = %+v, %v", i, rs, err)
		}
	}
	e.allow(e.l, tight, "u")
	rs, err := e.l.AllowAll(context.Background(), []Check{{Rule: bucket, Key: "u"}, {Rule: quota, Key: "u"}, {Rule: tight, Key: "u"}})
	if err != nil || len(rs) != 3 || rs[2].Allowed {
		t.Fatalf("AllowAll = %+v, %v; want denied at the tight rule", rs, err)
	}
	if s := e.l.Stats(); s.WriteBackPending != 7 {
		t.Fatalf("pending = %d, want 7: the group's 6 and the tight rule's 1, AllowAll's token and quota taken back", s.WriteBackPending)
	}
	e.back()
	e.flush()
	if s := e.l.Stats(); s.WrittenBack != 7 || s.WriteBackPending != 0 {
		t.Fatalf("Stats = %+v, want 7 written back", s)
	}
	other := e.limiter(Options{})
	rs, err = other.AllowGroup(context.Background(), "u", checks)
	if err != nil || len(rs) != 1 || rs[0].Allowed || rs[0].Degraded {
		t.Fatalf("another process's group = %+v, %v; want denied on redis at the full bucket", rs, err)
	}
	for _, rule := range []Rule{bucket, quota} {
		if r := e.allow(other, rule, "u"); !r.Allowed || r.Degraded || r.Remaining != 2 {
			t.Fatalf("%q outside the group = %+v, want allowed on redis with 2 left: AllowAll's event was taken back", rule.Name, r)
		}
	}
}

// TestWriteBackGCRACarry: a bucket kept full through an outage longer than
// its refill holds its earliest events in its TAT, and the write-back
// brings that carry to Redis: 10 a second, bursts of 10, the burst taken
// as Redis goes and one token every 100ms for 3s after it. The events of
// the last refill alone, added to Redis' empty bucket one by one, left its
// TAT 100ms ahead, 9 tokens free for another process; the bucket the
// process kept is full, its TAT 1s ahead, and so is Redis' once written
// back.
func TestWriteBackGCRACarry(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "carry", Kind: GCRA, Limit: Limit{Rate: 10, Window: time.Second, Burst: 10}}
	e.refuse()
	allowed := 0
	for i := 0; i <= 30; i++ {
		if i > 0 {
			e.clk.advance(100 * time.Millisecond)
		}
		for j := 0; j < 11; j++ {
			if r := e.allow(e.l, rule, "bob"); !r.Degraded {
				t.Fatalf("a call without redis = %+v", r)
			} else if r.Allowed {
				allowed++
			}
		}
	}
	if allowed != 40 {
		t.Fatalf("allowed %d without redis, want 10 + 30", allowed)
	}
	e.back()
	if r := e.allow(e.l, rule, "bob"); r.Allowed || r.Degraded {
		t.Fatalf("before the write-back: %+v, want rejected on redis (the process owes a full bucket)", r)
	}
	e.flush()
	if v, want := e.redisValue(meterKey(rule, "bob")), strconv.FormatInt(e.clk.Now().Add(time.Second).UnixMicro(), 10); v != want {
		t.Fatalf("redis' TAT after the write-back = %q, want %q: a full bucket", v, want)
	}
	other := e.rejectedOnRedis(rule, "bob", 100*time.Millisecond)
	e.oneTokenBack(rule, "bob", 100*time.Millisecond, other, e.l, other, e.l)
}

// TestWriteBackGCRACarryWhileOnItsWay: tokens taken while a batch of the
// bucket's carry is on its way stay owed once it lands, queued behind what
// it brought, and reach Redis with the next batch: 10 a second, bursts of
// 10, the whole burst taken at t0, cut into one batch; a token taken at
// t0+100ms, before the batch lands; Redis' TAT is t0+1s with the batch,
// t0+1.1s with the next, as one bucket's would be.
func TestWriteBackGCRACarryWhileOnItsWay(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "carry", Kind: GCRA, Limit: Limit{Rate: 10, Window: time.Second, Burst: 10}}
	p, _ := rule.compile()
	k, _ := localKey(rule.Name, "k")
	t0 := e.l.localNow()
	if d := e.l.local.admit(&k, &p, p.rate, t0, 10, false, &p, "", 0); !d.allowed {
		t.Fatalf("the burst without redis: %+v", d)
	}
	var bs []*batch
	for i := range e.l.local.shards.Len() {
		bs = append(bs, e.l.local.cut(i, t0, func() string { return "b1" })...)
	}
	if len(bs) != 1 || len(bs[0].Events) != 1 || bs[0].Events[0] != (eventlog.Event{At: t0, N: 10}) {
		t.Fatalf("cut %d batches (%+v), want one of 10 tokens at t0", len(bs), bs)
	}
	t1 := t0 + 100_000
	if d := e.l.local.admit(&k, &p, p.rate, t1, 1, false, &p, "", 0); !d.allowed {
		t.Fatalf("a token at t0+100ms: %+v", d)
	}
	if o := e.l.sendBatch(context.Background(), e.l.conn.Load(), bs[0], t0); o != ledger.Applied {
		t.Fatalf("the batch: outcome %d", o)
	}
	e.l.local.settle(bs[0], ledger.Applied)
	tat := meterKey(rule, "k")
	if v, want := e.redisValue(tat), strconv.FormatInt(t0+1_000_000, 10); v != want {
		t.Fatalf("redis' TAT with the batch = %q, want %q", v, want)
	}
	sh, h := e.l.local.at(&k)
	sh.mu.Lock()
	_, owed := sh.owedOf(&k, h, &p, t1)
	sh.mu.Unlock()
	if owed != 1 {
		t.Fatalf("owed at t0+100ms once the batch landed: %d, want the token taken since", owed)
	}
	e.clk.advance(100 * time.Millisecond)
	e.flush()
	if v, want := e.redisValue(tat), strconv.FormatInt(t0+1_100_000, 10); v != want {
		t.Fatalf("redis' TAT with the next batch = %q, want %q", v, want)
	}
	if s := e.l.Stats(); s.WriteBackPending != 0 || s.WrittenBack != 11 {
		t.Fatalf("Stats = %+v, want 11 tokens written back", s)
	}
}

// TestWriteBackGCRACarryOfTheFleet: two processes, each at half the rule
// while Redis refuses commands (DegradedShare 0.5: a bucket of 5 refilled
// at 5 a second), keep their buckets full for 3s; once both have written
// back, Redis' bucket is full, as the fleet's is: 5 tokens from each on
// top of now, a TAT 1s ahead. The last refill's events alone, added one by
// one, left it 400ms short: 4 tokens free at once.
func TestWriteBackGCRACarryOfTheFleet(t *testing.T) {
	e := newWBEnv(t, Options{DegradedShare: 0.5})
	e2 := e.unstarted(Options{DegradedShare: 0.5})
	rule := Rule{Name: "fleet-carry", Kind: GCRA, Limit: Limit{Rate: 10, Window: time.Second, Burst: 10}}
	e.refuse()
	probe := Rule{Name: "probe", Limit: PerSecond(1000)}
	peek := func(l *Limiter) Result {
		r, err := l.Peek(context.Background(), probe, "p")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := peek(e2); !r.Degraded {
		t.Fatalf("the second process on a refusing redis: %+v", r)
	}
	allowed := 0
	for i := 0; i <= 15; i++ {
		if i > 0 {
			e.clk.advance(200 * time.Millisecond)
		}
		for _, l := range []*Limiter{e.l, e2} {
			for j := 0; j < 6; j++ {
				if r := e.allow(l, rule, "bob"); !r.Degraded {
					t.Fatalf("a call without redis = %+v", r)
				} else if r.Allowed {
					allowed++
				}
			}
		}
	}
	if allowed != 2*(5+15) {
		t.Fatalf("the fleet allowed %d without redis, want 2 × (5 + 15)", allowed)
	}
	e.back()
	waitFor(t, "the second process back on redis", func() bool { return !peek(e2).Degraded })
	e.flush()
	for e2.writeBack(context.Background()) {
	}
	if s := e2.Stats(); s.WriteBackPending != 0 || s.WrittenBack != 5 {
		t.Fatalf("the second process' Stats = %+v, want its 5 tokens written back", s)
	}
	if v, want := e.redisValue(meterKey(rule, "bob")), strconv.FormatInt(e.clk.Now().Add(time.Second).UnixMicro(), 10); v != want {
		t.Fatalf("redis' TAT after both write-backs = %q, want %q: a full bucket", v, want)
	}
	other := e.rejectedOnRedis(rule, "bob", 100*time.Millisecond)
	e.oneTokenBack(rule, "bob", 100*time.Millisecond, other, e.l, e2, other)
}

package ratelimit

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit/internal/ledger"
	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/redis/rueidis"
)

// The write-back's unit tests run on miniredis and a fake clock, with the
// Limiter's write-back goroutine not started (newUnstarted): each test writes back
// when it says so (flush), so every count is exact.

// setClock is a fake clock the test moves.
type setClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *setClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *setClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// wbEnv is a Limiter on a miniredis whose commands the test can make fail.
type wbEnv struct {
	t      *testing.T
	mr     *miniredis.Miniredis
	client rueidis.Client
	clk    *setClock
	l      *Limiter
}

func newWBEnv(t *testing.T, opts Options) *wbEnv {
	t.Helper()
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	e := &wbEnv{t: t, mr: mr, client: client, clk: &setClock{at: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}}
	e.l = e.unstarted(opts)
	return e
}

// limiter returns another Limiter on the same Redis and clock: another
// process.
func (e *wbEnv) limiter(opts Options) *Limiter {
	e.t.Helper()
	l := e.unstarted(opts)
	l.startWriteBack()
	return l
}

// unstarted returns another Limiter on the same Redis and clock whose
// write-back runs only when the test calls it.
func (e *wbEnv) unstarted(opts Options) *Limiter {
	e.t.Helper()
	opts.Clock = e.clk
	opts.Timeout = 2 * time.Second
	opts.TripAfter = 1
	opts.ProbeAfter = 10 * time.Millisecond
	opts.Logger = discard
	l, err := newUnstarted(e.client, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(l.Close)
	return l
}

// pair returns the plan rule compiles to and the local key of its pair
// with key, for a test that holds or records a call by hand.
func (e *wbEnv) pair(rule Rule, key string) (plan, lkey) {
	e.t.Helper()
	p, err := rule.compile()
	if err != nil {
		e.t.Fatal(err)
	}
	k, err := localKey(rule.Name, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return p, k
}

func (e *wbEnv) allow(l *Limiter, rule Rule, key string) Result {
	e.t.Helper()
	r, err := l.Allow(context.Background(), rule, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// refuse makes Redis refuse every command as NOPERM does, and waits until
// the Limiter's breaker is open.
func (e *wbEnv) refuse() {
	e.t.Helper()
	e.mr.SetError("NOPERM this user has no permissions to run the 'evalsha' command")
	probe := Rule{Name: "probe", Limit: PerSecond(1000)}
	for {
		r, err := e.l.Peek(context.Background(), probe, "p")
		if err != nil {
			e.t.Fatal(err)
		}
		if r.Degraded && e.l.conn.Load().breakers.All()[0].Resting() {
			return
		}
	}
}

// back gives Redis back and waits until the Limiter decides on it again.
func (e *wbEnv) back() {
	e.t.Helper()
	e.mr.SetError("")
	probe := Rule{Name: "probe", Limit: PerSecond(1000)}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.l.Peek(context.Background(), probe, "p")
		if err != nil {
			e.t.Fatal(err)
		}
		if !r.Degraded {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal("redis did not come back")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// flush writes back everything owed, as the goroutine would.
func (e *wbEnv) flush() {
	for e.l.writeBack(context.Background()) {
	}
}

func (e *wbEnv) members(rule Rule, key string) []string {
	e.t.Helper()
	k, _ := localKey(rule.Name, key)
	m, err := e.mr.ZMembers(redisKeys(DefaultKeyPrefix, k).Meter(algSliding.redis.letter()))
	if err != nil && !errors.Is(err, miniredis.ErrKeyNotFound) {
		e.t.Fatal(err)
	}
	return m
}

// outage runs the issue's repro up to the write-back under rule, from an
// unused key: 3 calls on Redis, Redis refuses commands, 10s later 2 calls
// allowed locally and a third rejected, Redis back, everything written back.
func (e *wbEnv) outage(rule Rule, key string) {
	e.t.Helper()
	before := e.l.Stats()
	for i := 0; i < 3; i++ {
		if r := e.allow(e.l, rule, key); !r.Allowed || r.Degraded {
			e.t.Fatalf("%q: call %d on redis = %+v", rule.Name, i, r)
		}
	}
	e.refuse()
	e.clk.advance(10 * time.Second)
	for i := 0; i < 2; i++ {
		if r := e.allow(e.l, rule, key); !r.Allowed || !r.Degraded {
			e.t.Fatalf("%q: call %d without redis = %+v", rule.Name, i, r)
		}
	}
	if r := e.allow(e.l, rule, key); r.Allowed {
		e.t.Fatalf("%q: sixth call without redis = %+v, want rejected", rule.Name, r)
	}
	if s := e.l.Stats(); s.WriteBackPending != before.WriteBackPending+2 || s.WrittenBack != before.WrittenBack {
		e.t.Fatalf("%q: Stats before the write-back = %+v", rule.Name, s)
	}
	e.back()
	e.flush()
	if s := e.l.Stats(); s.WriteBackPending != 0 || s.WrittenBack != before.WrittenBack+2 || s.WriteBackDropped != before.WriteBackDropped {
		e.t.Fatalf("%q: Stats after the write-back = %+v, want 2 more written back", rule.Name, s)
	}
}

// rejectedOnRedis returns another process (Limiter) on the same Redis,
// after checking that it and this one are rejected on Redis under rule,
// the other with RetryAfter retry.
func (e *wbEnv) rejectedOnRedis(rule Rule, key string, retry time.Duration) *Limiter {
	e.t.Helper()
	other := e.limiter(Options{})
	if r := e.allow(other, rule, key); r.Allowed || r.Degraded || r.RetryAfter != retry {
		e.t.Fatalf("%q: another process = %+v, want rejected on redis for %v", rule.Name, r, retry)
	}
	if r := e.allow(e.l, rule, key); r.Allowed || r.Degraded {
		e.t.Fatalf("%q: this process = %+v, want rejected on redis", rule.Name, r)
	}
	return other
}

// sendTwice cuts every debt into batches (want of them), sends each, and
// sends each again as after a lost reply: the batches Redis may have
// applied come back as they were, under the same id.
func (e *wbEnv) sendTwice(want int) {
	e.t.Helper()
	now := e.l.localNow()
	var bs []*batch
	for i := range e.l.local.shards.Len() {
		bs = append(bs, e.l.local.cut(i, now, func() string { return e.l.id + "w" + strconv.Itoa(len(bs)) })...)
	}
	if len(bs) != want {
		e.t.Fatalf("cut %d batches, want %d", len(bs), want)
	}
	conn := e.l.conn.Load()
	for _, b := range bs {
		if o := e.l.sendBatch(context.Background(), conn, b, now); o != ledger.Applied {
			e.t.Fatalf("first send of %q: outcome %d", b.Key.Rule, o)
		}
		e.l.local.settle(b, ledger.Unsure) // as if the reply was lost
	}
	replayed := 0
	for i := range e.l.local.shards.Len() {
		for _, b := range e.l.local.cut(i, now, func() string { return "fresh" }) {
			if b.ID == "fresh" {
				e.t.Fatalf("an unsure batch of %q was cut afresh", b.Key.Rule)
			}
			if o := e.l.sendBatch(context.Background(), conn, b, now); o != ledger.Applied {
				e.t.Fatalf("replay of %q: outcome %d", b.Key.Rule, o)
			}
			e.l.local.settle(b, ledger.Applied)
			replayed++
		}
	}
	if replayed != want {
		e.t.Fatalf("replayed %d batches, want %d", replayed, want)
	}
	// As writeBack does once everything is on Redis: a heartbeat the
	// outage left saying this instance owes would have the other instances
	// reserve its share until the next beat (see Limiter.reserve).
	if e.l.local.owing.Events() == 0 && e.l.set.HeartbeatInterval > 0 {
		e.l.beat(conn, pair.FleetKey(e.l.set.KeyPrefix), true)
	}
}

// TestWriteBackIssueRepro is the issue's repro: rule 5 per minute, 3 calls
// on Redis, Redis refuses commands, 2 calls allowed locally, Redis back.
// Without the write-back Redis would then allow 2 more in the minute (7);
// with it, Redis' log holds all 5, another process gets nothing more, and
// this process, no longer counting its written-back events on top of
// Redis' count, gets exactly the room Redis has once the first 3 leave.
func TestWriteBackIssueRepro(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "claim", Limit: PerMinute(5)}
	e.outage(rule, "bob")
	if m := e.members(rule, "bob"); len(m) != 5 {
		t.Fatalf("redis' log holds %v, want 5 events", m)
	}
	e.rejectedOnRedis(rule, "bob", 50*time.Second) // until the first event leaves
	// At +60s the 3 events from before the outage left; the 2 written
	// back, at +10s, remain: 3 more fit, on Redis, and only 3.
	e.clk.advance(50 * time.Second)
	allowed := 0
	for i := 0; i < 5; i++ {
		r := e.allow(e.l, rule, "bob")
		if r.Degraded {
			t.Fatalf("call %d after the write-back degraded: %+v", i, r)
		}
		if r.Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("allowed %d once the first events left, want 3 (the written-back events count once)", allowed)
	}
}

// TestWriteBackReplayIgnored sends the same batch twice, as after a lost
// reply: Redis applies it once, for a log and for an approximate counter.
func TestWriteBackReplayIgnored(t *testing.T) {
	e := newWBEnv(t, Options{})
	exact := Rule{Name: "exact", Limit: PerMinute(10)}
	approx := Rule{Name: "approx", Limit: PerMinute(10), Approximate: true}
	e.allow(e.l, exact, "k")
	e.allow(e.l, approx, "k")
	e.refuse()
	e.clk.advance(time.Second)
	for i := 0; i < 3; i++ {
		e.allow(e.l, exact, "k")
		e.allow(e.l, approx, "k")
	}
	e.back()
	e.sendTwice(2)
	if m := e.members(exact, "k"); len(m) != 4 {
		t.Fatalf("log after a replayed batch holds %d events, want 4", len(m))
	}
	k, _ := localKey(approx.Name, "k")
	if c := e.mr.HGet(redisKeys(DefaultKeyPrefix, k).Meter(algCounter.redis.letter()), "c"); c != "4" {
		t.Fatalf("counter after a replayed batch = %q, want 4", c)
	}
	if s := e.l.Stats(); s.WrittenBack != 6 || s.WriteBackPending != 0 {
		t.Fatalf("Stats = %+v, want 6 written back", s)
	}
}

// TestWriteBackResetAndBanFirst: a Reset and a Ban made while Redis refused
// them are applied before the events decided after them, and the events
// before the Reset are not sent.
func TestWriteBackResetAndBanFirst(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "r", Limit: PerMinute(10), Penalty: &Penalty{BanAfter: 3, BanFor: time.Hour}}
	for i := 0; i < 3; i++ {
		e.allow(e.l, rule, "k")
	}
	e.refuse()
	e.clk.advance(time.Second)
	e.allow(e.l, rule, "k") // before the Reset: never sent
	if err := e.l.Reset(context.Background(), rule, "k"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Reset without redis: %v, want ErrUnavailable", err)
	}
	e.clk.advance(time.Second)
	e.allow(e.l, rule, "k")
	e.allow(e.l, rule, "k")
	if err := e.l.Ban(context.Background(), rule, "banned", time.Minute); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ban without redis: %v, want ErrUnavailable", err)
	}
	e.back()
	e.flush()
	if m := e.members(rule, "k"); len(m) != 2 {
		t.Fatalf("log after the write-back holds %v, want the 2 events after the Reset", m)
	}
	other := e.limiter(Options{})
	if r := e.allow(other, rule, "banned"); r.Allowed || !r.Banned || r.Degraded || r.BannedFor != time.Minute {
		t.Fatalf("another process on the key banned without redis = %+v, want banned on redis", r)
	}
	if s := e.l.Stats(); s.WrittenBack != 2 {
		t.Fatalf("WrittenBack = %d, want 2", s.WrittenBack)
	}
}

// TestWriteBackViolations: violations and a ban the ladder counted without
// Redis reach Redis' penalty state.
func TestWriteBackViolations(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "v", Limit: PerMinute(1), Penalty: &Penalty{WarnAfter: 1, BanAfter: 3, BanFor: time.Hour}}
	e.allow(e.l, rule, "k")
	e.refuse()
	for i := 0; i < 2; i++ {
		if r := e.allow(e.l, rule, "k"); r.Allowed || !r.Degraded {
			t.Fatalf("violation %d = %+v", i, r)
		}
	}
	e.back()
	e.flush()
	other := e.limiter(Options{})
	r := e.allow(other, rule, "k")
	if !r.Banned || r.Violations != 3 || r.Degraded {
		t.Fatalf("third violation in another process = %+v, want banned on redis with 3 violations", r)
	}
}

// TestWriteBackBound: over WriteBackMax the oldest events are dropped and
// counted; events that left the window are neither sent nor dropped.
func TestWriteBackBound(t *testing.T) {
	e := newWBEnv(t, Options{WriteBackMax: 3})
	rule := Rule{Name: "b", Limit: PerMinute(10)}
	e.refuse()
	for i := 0; i < 5; i++ {
		e.clk.advance(time.Second)
		e.allow(e.l, rule, "k")
	}
	if s := e.l.Stats(); s.WriteBackPending != 3 || s.WriteBackDropped != 2 {
		t.Fatalf("Stats = %+v, want 3 pending and 2 dropped", s)
	}
	e.back()
	e.flush()
	m := e.members(rule, "k")
	k, _ := localKey(rule.Name, "k")
	first, _ := e.mr.ZScore(redisKeys(DefaultKeyPrefix, k).Meter(algSliding.redis.letter()), m[0])
	if want := float64(e.clk.Now().Add(-2 * time.Second).UnixMicro()); len(m) != 3 || first != want {
		t.Fatalf("redis holds %v from %v, want the newest 3 from %v", m, first, want)
	}

	old := Rule{Name: "old", Limit: PerMinute(10)}
	e.refuse()
	e.allow(e.l, old, "k")
	e.clk.advance(time.Minute)
	e.back()
	e.flush()
	if m := e.members(old, "k"); len(m) != 0 {
		t.Fatalf("an event out of the window was written back: %v", m)
	}
	if s := e.l.Stats(); s.WrittenBack != 3 || s.WriteBackDropped != 2 || s.WriteBackPending != 0 {
		t.Fatalf("Stats = %+v, want 3 written back, 2 dropped, none pending", s)
	}
}

// TestWriteBackUndoneAndClose: events AllowAll took back are not owed;
// what is owed at Close is counted as dropped.
func TestWriteBackUndoneAndClose(t *testing.T) {
	e := newWBEnv(t, Options{})
	loose := Rule{Name: "loose", Limit: PerMinute(10)}
	tight := Rule{Name: "tight", Limit: PerMinute(1)}
	e.refuse()
	e.allow(e.l, tight, "k")
	rs, err := e.l.AllowAll(context.Background(), []Check{{Rule: loose, Key: "k"}, {Rule: tight, Key: "k"}})
	if err != nil || len(rs) != 2 || rs[1].Allowed {
		t.Fatalf("AllowAll = %+v, %v; want denied at the tight rule", rs, err)
	}
	if s := e.l.Stats(); s.WriteBackPending != 1 {
		t.Fatalf("pending = %d, want 1: the loose rule's event was taken back", s.WriteBackPending)
	}
	e.l.Close()
	if s := e.l.Stats(); s.WriteBackPending != 0 || s.WriteBackDropped != 1 {
		t.Fatalf("Stats after Close = %+v, want the pending event dropped", s)
	}
}

// TestWriteBackInBackground: the Limiter's own goroutine writes back once
// the breaker closes, without being asked.
func TestWriteBackInBackground(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "bg", Limit: PerMinute(5)}
	e.refuse()
	e.allow(e.l, rule, "k")
	e.l.startWriteBack()
	e.back()
	deadline := time.Now().Add(10 * time.Second)
	for e.l.Stats().WrittenBack != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the write-back did not run")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m := e.members(rule, "k"); len(m) != 1 {
		t.Fatalf("redis holds %v, want the event", m)
	}
}

// TestWriteBackGroup: the pairs of a group decided without Redis are
// written back under the group's hash tag, where AllowGroup finds them.
func TestWriteBackGroup(t *testing.T) {
	e := newWBEnv(t, Options{})
	second := Rule{Name: "s", Limit: PerSecond(5)}
	minute := Rule{Name: "m", Limit: PerMinute(3)}
	checks := []Check{{Rule: second, Key: "u"}, {Rule: minute, Key: "u"}}
	e.refuse()
	for i := 0; i < 3; i++ {
		if rs, err := e.l.AllowGroup(context.Background(), "u", checks); err != nil || !rs[1].Allowed || !rs[1].Degraded {
			t.Fatalf("group %d without redis = %+v, %v", i, rs, err)
		}
	}
	e.back()
	e.flush()
	for _, r := range []Rule{second, minute} {
		log := redisKeys(DefaultKeyPrefix, lkey{Rule: r.Name, Key: "u", Group: "u"}).Meter(algSliding.redis.letter())
		if m, err := e.mr.ZMembers(log); err != nil || len(m) != 3 {
			t.Fatalf("rule %q: redis holds %v (%v), want 3 events", r.Name, m, err)
		}
	}
	other := e.limiter(Options{})
	rs, err := other.AllowGroup(context.Background(), "u", checks)
	if err != nil || len(rs) != 2 || rs[1].Allowed || rs[1].Degraded {
		t.Fatalf("another process's group = %+v, %v; want denied on redis at the minute rule", rs, err)
	}
}

// TestWriteBackUnderTheCallsMember: a call whose script may have run on
// Redis (it timed out) and which was then allowed without Redis is written
// back under the member the script got, so Redis counts it once whether the
// script ran or not; the other events get members of their own.
func TestWriteBackUnderTheCallsMember(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "t", Limit: PerMinute(10)}
	p, _ := rule.compile()
	k, _ := localKey(rule.Name, "k")
	log := redisKeys(DefaultKeyPrefix, k).Meter(algSliding.redis.letter())
	now := e.l.localNow()
	ran, lost := e.l.id+"7", e.l.id+"8"
	e.l.local.admit(&k, &p, p.rate, now, 1, false, &p, ran, 0)  // its script ran, the reply was lost
	e.l.local.admit(&k, &p, p.rate, now, 2, false, &p, lost, 0) // its script never ran
	e.l.local.admit(&k, &p, p.rate, now, 1, false, &p, "", 0)   // never sent (breaker open)
	if _, err := e.mr.ZAdd(log, float64(now), ran); err != nil {
		t.Fatal(err)
	}
	e.flush()
	m, err := e.mr.ZMembers(log)
	if err != nil || len(m) != 4 {
		t.Fatalf("redis holds %v (%v), want 4 events: the one whose script ran counted once", m, err)
	}
	for _, want := range []string{ran, lost + ":1", lost + ":2"} {
		if !slices.Contains(m, want) {
			t.Errorf("redis lacks member %q: %v", want, m)
		}
	}
	if s := e.l.Stats(); s.WrittenBack != 4 || s.WriteBackPending != 0 {
		t.Fatalf("Stats = %+v, want 4 written back", s)
	}
}

// TestShieldAfterOutage: the first calls on Redis after an outage carry the
// events the process decided without it, which the write-back has not
// brought yet; Redis counts them without their times, as if they lasted a
// whole Window, so its rejection's RetryAfter is that Window. The shield
// must not cache such a rejection: once written back, the events leave at
// their own times, and Redis allows the calls after them. Cached, it
// turned those calls away for the rest of the Window (a 4s outage under a
// rule of 100 per 10s: nothing allowed for 5s after the written-back
// events had left).
func TestShieldAfterOutage(t *testing.T) {
	e := newWBEnv(t, Options{})
	rule := Rule{Name: "sale", Limit: Limit{Rate: 5, Window: 10 * time.Second}}
	for i := range 5 {
		if r := e.allow(e.l, rule, "k"); !r.Allowed || r.Degraded {
			t.Fatalf("call %d on redis = %+v", i, r)
		}
	}
	e.refuse()
	e.clk.advance(10 * time.Second) // the first five left
	for i := range 5 {
		if r := e.allow(e.l, rule, "k"); !r.Allowed || !r.Degraded {
			t.Fatalf("call %d without redis = %+v", i, r)
		}
	}
	e.back()
	e.clk.advance(2 * time.Second)
	if r := e.allow(e.l, rule, "k"); r.Allowed || r.Degraded {
		t.Fatalf("the call after the outage, carrying the five owed = %+v; want rejected on redis", r)
	}
	e.flush() // the five, stamped 10s in
	e.clk.advance(8 * time.Second)
	if r := e.allow(e.l, rule, "k"); !r.Allowed || r.Degraded {
		t.Fatalf("the call once the written-back events left = %+v; want allowed on redis", r)
	}
}

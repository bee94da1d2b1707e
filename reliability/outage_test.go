package reliability_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

func TestOutageFallsBackAndRecovers(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	clk := testkit.NewClock()
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.OutageOptions(clk, &logs, &states))
	rule := ratelimit.Rule{Name: "outage", Limit: ratelimit.PerMinute(5)}

	for i := 0; i < 2; i++ {
		if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || r.Degraded {
			t.Fatalf("call %d before the outage = %+v", i, r)
		}
	}

	mr.Close()
	// The local log mirrors the two events Redis allowed: three more fit.
	var allowed int
	for i := 0; i < 10; i++ {
		clk.Advance(time.Second)
		r := testkit.Allow(t, l, rule, "k")
		if !r.Degraded || r.Limit != 5 {
			t.Fatalf("call %d during the outage = %+v, want Degraded", i, r)
		}
		if r.Allowed {
			allowed++
		} else if r.RetryAfter <= 0 {
			t.Fatalf("a degraded rejection without RetryAfter: %+v", r)
		}
	}
	if allowed != 3 {
		t.Fatalf("allowed %d calls during the outage, want 3", allowed)
	}
	testkit.Eventually(t, "breaker opened", func() bool { return strings.Contains(states.String(), "closed->open") })

	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "decisions back on redis", func() bool {
		r, err := l.Peek(context.Background(), rule, "k")
		return err == nil && !r.Degraded
	})
	// The process allowed three events without Redis in the same window;
	// once Redis is back they are written back, so Redis counts five:
	// until then the process' own count, five, holds Redis' two back.
	testkit.Eventually(t, "events written back", func() bool { return l.Stats().WrittenBack == 3 })
	logKey, _ := layoutKeys(ratelimit.DefaultKeyPrefix, rule.Name, "k")
	if members, err := mr.ZMembers(logKey); err != nil || len(members) != 5 {
		t.Fatalf("Redis' log after the write-back holds %v (%v), want the 2 events from before the outage and the 3 during it", members, err)
	}
	if r := testkit.Allow(t, l, rule, "k"); r.Allowed || r.Degraded || r.Remaining != 0 || r.RetryAfter != 50*time.Second {
		t.Fatalf("first call on the original key after recovery = %+v, want rejected on redis, RetryAfter 50s", r)
	}
	clk.Advance(50 * time.Second) // the two events from before the outage leave
	if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || r.Degraded || r.Remaining != 1 {
		t.Fatalf("call once the first events left = %+v, want allowed on redis with 1 left", r)
	}
	testkit.Eventually(t, "breaker closed", func() bool {
		return strings.HasSuffix(states.String(), "open->half-open half-open->closed")
	})
	for _, want := range []string{"redis circuit breaker open", "redis circuit breaker closed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

func TestOutageKeepsBansAndPenalties(t *testing.T) {
	mr := miniredis.RunT(t)
	clk := testkit.NewClock()
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(clk, &logs, nil)
	opts.ShieldMax = -1 // this test is about the mirror, not the shield
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	rule := ratelimit.Rule{Name: "ban", Limit: ratelimit.PerMinute(1), Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: time.Hour}}
	testkit.Allow(t, l, rule, "bad")
	testkit.Allow(t, l, rule, "bad")
	if r := testkit.Allow(t, l, rule, "bad"); !r.Banned || r.Degraded {
		t.Fatalf("third call = %+v, want banned on redis", r)
	}
	testkit.Allow(t, l, rule, "warned") // one event
	if r := testkit.Allow(t, l, rule, "warned"); !r.Warned {
		t.Fatalf("want a warning, got %+v", r)
	}
	mr.Close()
	clk.Advance(10 * time.Minute)
	if r := testkit.Allow(t, l, rule, "bad"); !r.Banned || !r.Degraded || r.RetryAfter != 50*time.Minute || r.Violations != 2 {
		t.Fatalf("degraded call on a key banned in redis = %+v, want banned for 50m more", r)
	}
	// The warned key's violation travelled too: its next violation bans it.
	testkit.Allow(t, l, rule, "warned") // 10 minutes later: the window is free again
	if r := testkit.Allow(t, l, rule, "warned"); !r.Banned || !r.Degraded || r.Violations != 2 {
		t.Fatalf("degraded second violation = %+v, want banned", r)
	}
}

func TestUnavailableRepliesFallBack(t *testing.T) {
	for _, reply := range []string{
		"LOADING Redis is loading the dataset in memory",
		"BUSY Redis is busy running a script",
		"READONLY You can't write against a read only replica.",
		"MASTERDOWN Link with MASTER is down",
		"CLUSTERDOWN The cluster is down",
		"TRYAGAIN Multiple keys request during rehashing of slot",
		"OOM command not allowed when used memory > 'maxmemory'.",
		"NOAUTH Authentication required.",
		"WRONGPASS invalid username-password pair or user is disabled.",
		"NOPERM this user has no permissions to run the 'evalsha' command",
	} {
		code := strings.Fields(reply)[0]
		t.Run(code, func(t *testing.T) {
			mr := miniredis.RunT(t)
			var logs testkit.SyncBuffer
			var states testkit.StateLog
			l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.OutageOptions(testkit.NewClock(), &logs, &states))
			rule := ratelimit.Rule{Name: "reply", Limit: ratelimit.PerMinute(2)}
			testkit.Allow(t, l, rule, "k")
			mr.SetError(reply)
			for i := 0; i < 3; i++ {
				r := testkit.Allow(t, l, rule, "k")
				if !r.Degraded || r.Allowed != (i == 0) {
					t.Fatalf("call %d with every reply %q = %+v", i, code, r)
				}
			}
			testkit.Eventually(t, "breaker opened", func() bool { return strings.Contains(states.String(), "closed->open") })
			// What the log says Redis refused: credentials are not a
			// permission, and a permission is not a credential.
			wantLevel, wantMsg := "level=WARN", "redis call failed"
			switch code {
			case "NOAUTH", "WRONGPASS":
				wantLevel, wantMsg = "level=ERROR", "redis refused the credentials"
			case "NOPERM":
				wantLevel, wantMsg = "level=ERROR", "redis refused the permission for the limiter's commands (ACL)"
			}
			if !strings.Contains(logs.String(), wantLevel) || !strings.Contains(logs.String(), code) || !strings.Contains(logs.String(), wantMsg) {
				t.Errorf("log for %s lacks %s or %q:\n%s", code, wantLevel, wantMsg, logs.String())
			}
			if code == "NOPERM" && strings.Contains(logs.String(), "credentials") {
				t.Errorf("NOPERM logged as a refusal of the credentials:\n%s", logs.String())
			}
		})
	}
}

func TestMisuseIsAnErrorAndKeepsTheBreakerClosed(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.OutageOptions(testkit.NewClock(), &logs, &states))
	rule := ratelimit.Rule{Name: "m", Limit: ratelimit.PerMinute(2)}
	testkit.Allow(t, l, rule, "k")
	// Another program overwrites the log with a string.
	mr.Del("rl:v1:{1:m:=k}:l")
	if err := mr.Set("rl:v1:{1:m:=k}:l", "not a sorted set"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		r, err := l.Allow(context.Background(), rule, "k")
		if !errors.Is(err, ratelimit.ErrRedis) || !strings.Contains(err.Error(), "WRONGTYPE") || r.Degraded {
			t.Fatalf("call %d on a WRONGTYPE key = %+v, %v; want ErrRedis", i, r, err)
		}
	}
	if r := testkit.Allow(t, l, rule, "other"); r.Degraded || !r.Allowed {
		t.Fatalf("another key after misuse = %+v, want decided on redis", r)
	}
	if s := states.String(); s != "" {
		t.Fatalf("misuse changed the breaker: %s", s)
	}
}

func TestCallerContextEnded(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	var states testkit.StateLog
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.OutageOptions(testkit.NewClock(), &logs, &states))
	rule := ratelimit.Rule{Name: "ctx", Limit: ratelimit.PerMinute(2)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 5; i++ {
		if _, err := l.Allow(ctx, rule, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Allow with a cancelled context: %v, want context.Canceled", err)
		}
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := l.Allow(expired, rule, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Allow with an expired deadline: %v, want context.DeadlineExceeded", err)
	}
	if err := l.Reset(ctx, rule, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reset with a cancelled context: %v", err)
	}
	if r := testkit.Allow(t, l, rule, "k"); r.Degraded || r.Remaining != 1 {
		t.Fatalf("after cancelled calls = %+v, want the first event recorded on redis", r)
	}
	if s := states.String(); s != "" {
		t.Fatalf("the caller's context changed the breaker: %s", s)
	}
}

// TestOutageKeepsKindsState: an outage starts from the bucket and the quota
// Redis last answered (the mirror copies them), at the degraded share.
func TestOutageKeepsKindsState(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	clk := testkit.NewClock()
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.OutageOptions(clk, &logs, nil))
	bucket := ratelimit.Rule{Name: "o-g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 3, Window: time.Second}}
	daily := ratelimit.Rule{Name: "o-q", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 2, Period: ratelimit.Day}}
	ctx := context.Background()
	if r, err := l.AllowN(ctx, bucket, "k", 3); err != nil || !r.Allowed || r.Degraded {
		t.Fatalf("bucket on redis = %+v, %v", r, err)
	}
	if r, err := l.AllowN(ctx, daily, "k", 2); err != nil || !r.Allowed || r.Degraded {
		t.Fatalf("quota on redis = %+v, %v", r, err)
	}
	mr.Close()
	clk.Advance(time.Second / 3) // 333333µs: the first token is due 333333⅓µs after the calls
	want := ratelimit.Result{Limit: 3, RetryAfter: time.Microsecond, ResetAfter: 666667 * time.Microsecond, Degraded: true}
	if r := testkit.Allow(t, l, bucket, "k"); r != want {
		t.Fatalf("bucket during the outage = %+v\nwant %+v", r, want)
	}
	clk.Advance(time.Microsecond)
	if r := testkit.Allow(t, l, bucket, "k"); !r.Allowed || !r.Degraded || r.Remaining != 0 {
		t.Fatalf("bucket a token later = %+v", r)
	}
	if r := testkit.Allow(t, l, daily, "k"); r.Allowed || !r.Degraded || r.RetryAfter != 12*time.Hour-123456*time.Microsecond-333334*time.Microsecond {
		t.Fatalf("spent quota during the outage = %+v", r)
	}
}

func TestResetDuringOutage(t *testing.T) {
	mr := miniredis.RunT(t)
	var logs testkit.SyncBuffer
	clk := testkit.NewClock()
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), testkit.OutageOptions(clk, &logs, nil))
	rule := ratelimit.Rule{Name: "reset", Limit: ratelimit.PerMinute(1)}
	testkit.Allow(t, l, rule, "k")
	mr.Close()
	if r := testkit.Allow(t, l, rule, "k"); r.Allowed || !r.Degraded {
		t.Fatalf("degraded call on a full key = %+v", r)
	}
	err := l.Reset(context.Background(), rule, "k")
	if !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("Reset during an outage: %v, want ErrUnavailable", err)
	}
	if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || !r.Degraded {
		t.Fatalf("degraded call after Reset = %+v, want allowed: the local state was cleared", r)
	}
}

func TestDegradedPolicies(t *testing.T) {
	ctx := context.Background()
	rule := ratelimit.Rule{Name: "p", Limit: ratelimit.PerMinute(10)}
	gcraRule := ratelimit.Rule{Name: "p-g", Kind: ratelimit.GCRA, Limit: ratelimit.Limit{Rate: 10, Window: time.Second, Burst: 8}}
	quotaRule := ratelimit.Rule{Name: "p-q", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 10, Period: ratelimit.Day}}
	for _, c := range []struct {
		name     string
		opts     ratelimit.Options
		rule     ratelimit.Rule
		n        int
		want     ratelimit.Result
		wantDeny bool // RetryAfter is the time to the next probe: only its sign is checked
	}{
		{name: "local at share 1", rule: rule, n: 10, want: ratelimit.Result{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: time.Minute, Degraded: true}},
		{name: "local at share 0.25", opts: ratelimit.Options{DegradedShare: 0.25}, rule: rule, n: 3, want: ratelimit.Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: time.Minute, Degraded: true}},
		{name: "above the share is a rejection", opts: ratelimit.Options{DegradedShare: 0.25}, rule: rule, n: 4, want: ratelimit.Result{Limit: 3, Remaining: 3, RetryAfter: time.Minute, Degraded: true}},
		{name: "a tiny share keeps 1", opts: ratelimit.Options{DegradedShare: 0.001}, rule: rule, n: 1, want: ratelimit.Result{Allowed: true, Limit: 1, ResetAfter: time.Minute, Degraded: true}},
		// The share scales GCRA's Rate and Burst: 10 per second, burst 8,
		// at 0.25 is 3 per second, burst 2 (T = 333333⅓µs).
		{name: "gcra at share 0.25", opts: ratelimit.Options{DegradedShare: 0.25}, rule: gcraRule, n: 2, want: ratelimit.Result{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: 666667 * time.Microsecond, Degraded: true}},
		{name: "gcra above the share's burst", opts: ratelimit.Options{DegradedShare: 0.25}, rule: gcraRule, n: 3, want: ratelimit.Result{Limit: 2, Remaining: 2, RetryAfter: 333334 * time.Microsecond, Degraded: true}},
		{name: "quota at share 0.25", opts: ratelimit.Options{DegradedShare: 0.25}, rule: quotaRule, n: 3, want: ratelimit.Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 12*time.Hour - 123456*time.Microsecond, Degraded: true}},
		{name: "allow all", opts: ratelimit.Options{Degraded: ratelimit.DegradedAllow}, rule: rule, n: 10, want: ratelimit.Result{Allowed: true, Limit: 10, Degraded: true}},
		{name: "deny all", opts: ratelimit.Options{Degraded: ratelimit.DegradedDeny}, rule: rule, n: 1, want: ratelimit.Result{Limit: 10, Degraded: true}, wantDeny: true},
		{name: "a rule overrides the limiter", opts: ratelimit.Options{Degraded: ratelimit.DegradedAllow},
			rule: ratelimit.Rule{Name: "p", Limit: ratelimit.PerMinute(10), Degraded: ratelimit.DegradedDeny}, n: 1, want: ratelimit.Result{Limit: 10, Degraded: true}, wantDeny: true},
		{name: "a rule asks for local", opts: ratelimit.Options{Degraded: ratelimit.DegradedDeny},
			rule: ratelimit.Rule{Name: "p", Limit: ratelimit.PerMinute(10), Degraded: ratelimit.DegradedLocal}, n: 2, want: ratelimit.Result{Allowed: true, Limit: 10, Remaining: 8, ResetAfter: time.Minute, Degraded: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			c.opts.Clock = testkit.NewClock()
			c.opts.Logger = slog.New(slog.NewTextHandler(&testkit.SyncBuffer{}, nil))
			l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), c.opts)
			mr.Close()
			for i := 0; i < 2; i++ { // the second call finds the breaker counting
				got, err := l.AllowN(ctx, c.rule, "k"+c.name, c.n)
				if err != nil {
					t.Fatalf("AllowN: %v", err)
				}
				if c.wantDeny {
					if got.Allowed || got.RetryAfter <= 0 {
						t.Fatalf("deny policy gave %+v", got)
					}
					got.RetryAfter = 0
				}
				if i == 0 && got != c.want {
					t.Fatalf("got  %+v\nwant %+v", got, c.want)
				}
			}
		})
	}
}

func TestDialWhileRedisIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var logs testkit.SyncBuffer
	l, err := ratelimit.Dial(testkit.ClientOption(addr), testkit.OutageOptions(testkit.NewClock(), &logs, nil))
	if err != nil {
		t.Fatalf("Dial with redis down: %v", err)
	}
	defer l.Close()
	rule := ratelimit.Rule{Name: "dial", Limit: ratelimit.PerMinute(3)}
	if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || !r.Degraded || r.Remaining != 2 {
		t.Fatalf("first call with redis down = %+v, want a local decision", r)
	}
	if err := l.Reset(context.Background(), rule, "k"); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("Reset before connecting: %v, want ErrUnavailable", err)
	}

	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr(addr); err != nil {
		t.Skipf("port %s taken again before miniredis could bind it: %v", addr, err)
	}
	defer mr.Close()
	testkit.Eventually(t, "dialled in the background", func() bool { return !testkit.Allow(t, l, rule, "probe").Degraded })
	if r := testkit.Allow(t, l, rule, "k"); !r.Allowed || r.Degraded || r.Remaining != 2 {
		t.Fatalf("first call on redis = %+v", r)
	}
	// Once connected, the limiter announces itself to the fleet; Close
	// withdraws it.
	instances := "rl:v1:{instances}"
	testkit.Eventually(t, "the first heartbeat after connecting", func() bool { return l.Stats().Instances == 1 })
	if m, err := mr.ZMembers(instances); err != nil || len(m) != 1 {
		t.Fatalf("the instances set holds %v, %v; want the limiter", m, err)
	}
	l.Close()
	if m, _ := mr.ZMembers(instances); len(m) != 0 {
		t.Fatalf("the instances set holds %v after Close, want nothing", m)
	}
	if _, err := l.Allow(context.Background(), rule, "k"); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestDialNeedsAnAddress(t *testing.T) {
	if _, err := ratelimit.Dial(testkit.ClientOption(), ratelimit.Options{}); !errors.Is(err, ratelimit.ErrInvalidOptions) {
		t.Fatalf("Dial without an address: %v, want ErrInvalidOptions", err)
	}
}

package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// KindsTogether: GCRA buckets and calendar quotas in AllowAll and
// AllowGroup beside sliding logs: a denied request takes back exactly the
// tokens and the quota it used, a denied group records nothing for any
// pair, and every Result is the kind's own.
func KindsTogether(t *testing.T, backends []Backend) {
	for _, b := range backends {
		t.Run(b.Name+"/AllowAll", func(t *testing.T) { kindsInAllowAll(t, b) })
		t.Run(b.Name+"/AllowGroup", func(t *testing.T) { kindsInAllowGroup(t, b) })
	}
}

// kindsInAllowAll: a request of a GCRA bucket, a calendar quota and a
// sliding log that the log denies takes back exactly the bucket's tokens
// and the quota it used.
func kindsInAllowAll(t *testing.T, b Backend) {
	ctx := context.Background()
	bucket := gcra("all-bucket", 10, sec, 5)
	daily := quotaRule("all-daily", 100, ratelimit.Day, nil)
	user := ratelimit.Rule{Name: "all-user", Limit: ratelimit.PerMinute(1)}
	l := b.New(t, testkit.Options(testkit.NewClock()))
	checks := []ratelimit.Check{{Rule: bucket, Key: "all", N: 2}, {Rule: daily, Key: "all"}, {Rule: user, Key: "u"}}
	if rs, err := l.AllowAll(ctx, checks); err != nil || len(rs) != 3 ||
		rs[0] != ok(5, 3, 200*ms) || rs[1] != ok(100, 99, midnight) || rs[2] != ok(1, 0, time.Minute) {
		t.Fatalf("first request: %+v, %v", rs, err)
	}
	if rs, err := l.AllowAll(ctx, checks); err != nil || len(rs) != 3 || rs[2].Allowed {
		t.Fatalf("second request: %+v, %v; want denied by the user rule", rs, err)
	}
	// The denied request's two tokens and its quota are back.
	if r := peekAt(t, l, bucket, "all"); r != ok(5, 3, 200*ms) {
		t.Errorf("bucket after the denied request: %+v", r)
	}
	if r := peekAt(t, l, daily, "all"); r != ok(100, 99, midnight) {
		t.Errorf("quota after the denied request: %+v", r)
	}
}

// kindsInAllowGroup: a group of a GCRA bucket, a calendar quota and a
// sliding log that the bucket or the quota denies records nothing for any
// pair, and every Result is the kind's own.
func kindsInAllowGroup(t *testing.T, b Backend) {
	clk := testkit.NewClock()
	l := b.New(t, testkit.Options(clk))
	pairs := []ratelimit.Check{
		{Rule: gcra("g-bucket", 1, sec, 2), Key: "u7"},
		{Rule: quotaRule("g-daily", 3, ratelimit.Day, nil), Key: "u7"},
		{Rule: ratelimit.Rule{Name: "g-minute", Limit: ratelimit.PerMinute(10)}, Key: "u7"},
	}
	want := [][]R{
		{ok(2, 1, sec), ok(3, 2, midnight), ok(10, 9, time.Minute)},
		{ok(2, 0, 2*sec), ok(3, 1, midnight), ok(10, 8, time.Minute)},
		{no(2, 0, sec, 2*sec)}, // the bucket is empty: nothing recorded
	}
	for i, w := range want {
		if rs := mustAllowGroup(t, l, "u7", pairs...); !equalResults(rs, w) {
			t.Fatalf("group %d: %+v, want %+v", i, rs, w)
		}
	}
	clk.Advance(sec)
	if rs := mustAllowGroup(t, l, "u7", pairs...); !equalResults(rs, []R{ok(2, 0, 2*sec), ok(3, 0, midnight-sec), ok(10, 7, time.Minute)}) {
		t.Fatalf("a second later: %+v", rs)
	}
	clk.Advance(sec)
	// The quota is spent: the bucket's token is not taken.
	if rs := mustAllowGroup(t, l, "u7", pairs...); !equalResults(rs, []R{ok(2, 0, 2*sec), no(3, 0, midnight-2*sec, midnight-2*sec)}) {
		t.Fatalf("quota spent: %+v", rs)
	}
	if rs := mustAllowGroup(t, l, "u7", pairs[:1]...); !equalResults(rs, []R{ok(2, 0, 2*sec)}) {
		t.Fatalf("bucket after the denied group: %+v, want its token still there", rs)
	}
}

// w0End is the end of the fixed ten-second window that holds
// testkit.Epoch (see w0): testkit.Epoch is 123456µs into it.
const w0End = 10*sec + w0

// FixedTogether: fixed windows in AllowAll and AllowGroup beside sliding
// logs: a denied request takes back exactly the events it counted, a
// denied group counts nothing, whichever rule denies it.
func FixedTogether(t *testing.T, backends []Backend) {
	for _, b := range backends {
		t.Run(b.Name+"/AllowAll", func(t *testing.T) { fixedInAllowAll(t, b) })
		t.Run(b.Name+"/AllowGroup", func(t *testing.T) { fixedInAllowGroup(t, b) })
	}
}

// fixedInAllowAll: a request of a fixed window and a sliding log that the
// log denies takes back exactly the event the window counted.
func fixedInAllowAll(t *testing.T, b Backend) {
	ctx := context.Background()
	l := b.New(t, testkit.Options(testkit.NewClock()))
	win := fixed("all-fixed", 2, 10*sec)
	user := ratelimit.Rule{Name: "all-fixed-user", Limit: ratelimit.PerMinute(1)}
	checks := []ratelimit.Check{{Rule: win, Key: "all"}, {Rule: user, Key: "u"}}
	if rs, err := l.AllowAll(ctx, checks); err != nil || !equalResults(rs, []R{ok(2, 1, w0End), ok(1, 0, time.Minute)}) {
		t.Fatalf("first request: %+v, %v", rs, err)
	}
	if rs, err := l.AllowAll(ctx, checks); err != nil || len(rs) != 2 || rs[1].Allowed {
		t.Fatalf("second request: %+v, %v; want denied by the user rule", rs, err)
	}
	if r := peekAt(t, l, win, "all"); r != ok(2, 1, w0End) {
		t.Errorf("fixed window after the denied request: %+v, want its event back", r)
	}
}

// fixedInAllowGroup: a group of a fixed window and a sliding log that the
// log denies counts nothing in the window, which then spends its events
// alone until the next window.
func fixedInAllowGroup(t *testing.T, b Backend) {
	clk := testkit.NewClock()
	l := b.New(t, testkit.Options(clk))
	win := ratelimit.Check{Rule: fixed("g-fixed", 2, 10*sec), Key: "f7"}
	minute := ratelimit.Check{Rule: ratelimit.Rule{Name: "g-fixed-minute", Limit: ratelimit.PerMinute(1)}, Key: "f7"}
	if rs := mustAllowGroup(t, l, "f7", win, minute); !equalResults(rs, []R{ok(2, 1, w0End), ok(1, 0, time.Minute)}) {
		t.Fatalf("first group: %+v", rs)
	}
	// The minute rule denies: the window counts nothing.
	if rs := mustAllowGroup(t, l, "f7", win, minute); !equalResults(rs, []R{ok(2, 0, w0End), no(1, 0, time.Minute, time.Minute)}) {
		t.Fatalf("second group: %+v", rs)
	}
	if rs := mustAllowGroup(t, l, "f7", win); !equalResults(rs, []R{ok(2, 0, w0End)}) {
		t.Fatalf("the window after the denied group: %+v, want one event left", rs)
	}
	if rs := mustAllowGroup(t, l, "f7", win); !equalResults(rs, []R{no(2, 0, w0End, w0End)}) {
		t.Fatalf("the spent window: %+v", rs)
	}
	clk.Advance(w0End)
	if rs := mustAllowGroup(t, l, "f7", win); !equalResults(rs, []R{ok(2, 1, 10*sec)}) {
		t.Fatalf("the next window: %+v", rs)
	}
}

// peekAt is l's Peek of rule and key; an error ends the test.
func peekAt(t *testing.T, l *ratelimit.Limiter, rule ratelimit.Rule, key string) R {
	t.Helper()
	r, err := l.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// equalResults reports whether got and want hold the same Results in the
// same order.
func equalResults(got, want []R) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

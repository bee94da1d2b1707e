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
	ctx := context.Background()
	bucket := gcra("all-bucket", 10, sec, 5)
	daily := quotaRule("all-daily", 100, ratelimit.Day, nil)
	user := ratelimit.Rule{Name: "all-user", Limit: ratelimit.PerMinute(1)}
	for _, b := range backends {
		t.Run(b.Name+"/AllowAll", func(t *testing.T) {
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
		})
		t.Run(b.Name+"/AllowGroup", func(t *testing.T) {
			clk := testkit.NewClock()
			l := b.New(t, testkit.Options(clk))
			pairs := []ratelimit.Check{
				{Rule: gcra("g-bucket", 1, sec, 2), Key: "u7"},
				{Rule: quotaRule("g-daily", 3, ratelimit.Day, nil), Key: "u7"},
				{Rule: ratelimit.Rule{Name: "g-minute", Limit: ratelimit.PerMinute(10)}, Key: "u7"},
			}
			group := func(checks []ratelimit.Check) []ratelimit.Result {
				t.Helper()
				rs, err := l.AllowGroup(ctx, "u7", checks)
				if err != nil {
					t.Fatal(err)
				}
				return rs
			}
			want := [][]R{
				{ok(2, 1, sec), ok(3, 2, midnight), ok(10, 9, time.Minute)},
				{ok(2, 0, 2*sec), ok(3, 1, midnight), ok(10, 8, time.Minute)},
				{no(2, 0, sec, 2*sec)}, // the bucket is empty: nothing recorded
			}
			for i, w := range want {
				if rs := group(pairs); !equalResults(rs, w) {
					t.Fatalf("group %d: %+v, want %+v", i, rs, w)
				}
			}
			clk.Advance(sec)
			if rs := group(pairs); !equalResults(rs, []R{ok(2, 0, 2*sec), ok(3, 0, midnight-sec), ok(10, 7, time.Minute)}) {
				t.Fatalf("a second later: %+v", rs)
			}
			clk.Advance(sec)
			// The quota is spent: the bucket's token is not taken.
			if rs := group(pairs); !equalResults(rs, []R{ok(2, 0, 2*sec), no(3, 0, midnight-2*sec, midnight-2*sec)}) {
				t.Fatalf("quota spent: %+v", rs)
			}
			if rs := group(pairs[:1]); !equalResults(rs, []R{ok(2, 0, 2*sec)}) {
				t.Fatalf("bucket after the denied group: %+v, want its token still there", rs)
			}
		})
	}
}

// FixedTogether: fixed windows in AllowAll and AllowGroup beside sliding
// logs: a denied request takes back exactly the events it counted, a
// denied group counts nothing, whichever rule denies it.
func FixedTogether(t *testing.T, backends []Backend) {
	ctx := context.Background()
	end := 10*sec + w0 // testkit.Epoch is 123456µs into a 10s window
	for _, b := range backends {
		t.Run(b.Name+"/AllowAll", func(t *testing.T) {
			l := b.New(t, testkit.Options(testkit.NewClock()))
			win := fixed("all-fixed", 2, 10*sec)
			user := ratelimit.Rule{Name: "all-fixed-user", Limit: ratelimit.PerMinute(1)}
			checks := []ratelimit.Check{{Rule: win, Key: "all"}, {Rule: user, Key: "u"}}
			if rs, err := l.AllowAll(ctx, checks); err != nil || !equalResults(rs, []R{ok(2, 1, end), ok(1, 0, time.Minute)}) {
				t.Fatalf("first request: %+v, %v", rs, err)
			}
			if rs, err := l.AllowAll(ctx, checks); err != nil || len(rs) != 2 || rs[1].Allowed {
				t.Fatalf("second request: %+v, %v; want denied by the user rule", rs, err)
			}
			if r := peekAt(t, l, win, "all"); r != ok(2, 1, end) {
				t.Errorf("fixed window after the denied request: %+v, want its event back", r)
			}
		})
		t.Run(b.Name+"/AllowGroup", func(t *testing.T) {
			clk := testkit.NewClock()
			l := b.New(t, testkit.Options(clk))
			win := fixed("g-fixed", 2, 10*sec)
			minute := ratelimit.Rule{Name: "g-fixed-minute", Limit: ratelimit.PerMinute(1)}
			group := func(checks ...ratelimit.Check) []ratelimit.Result {
				t.Helper()
				rs, err := l.AllowGroup(ctx, "f7", checks)
				if err != nil {
					t.Fatal(err)
				}
				return rs
			}
			if rs := group(ratelimit.Check{Rule: win, Key: "f7"}, ratelimit.Check{Rule: minute, Key: "f7"}); !equalResults(rs, []R{ok(2, 1, end), ok(1, 0, time.Minute)}) {
				t.Fatalf("first group: %+v", rs)
			}
			// The minute rule denies: the window counts nothing.
			if rs := group(ratelimit.Check{Rule: win, Key: "f7"}, ratelimit.Check{Rule: minute, Key: "f7"}); !equalResults(rs, []R{ok(2, 0, end), no(1, 0, time.Minute, time.Minute)}) {
				t.Fatalf("second group: %+v", rs)
			}
			if rs := group(ratelimit.Check{Rule: win, Key: "f7"}); !equalResults(rs, []R{ok(2, 0, end)}) {
				t.Fatalf("the window after the denied group: %+v, want one event left", rs)
			}
			if rs := group(ratelimit.Check{Rule: win, Key: "f7"}); !equalResults(rs, []R{no(2, 0, end, end)}) {
				t.Fatalf("the spent window: %+v", rs)
			}
			clk.Advance(end)
			if rs := group(ratelimit.Check{Rule: win, Key: "f7"}); !equalResults(rs, []R{ok(2, 1, 10*sec)}) {
				t.Fatalf("the next window: %+v", rs)
			}
		})
	}
}

func peekAt(t *testing.T, l *ratelimit.Limiter, rule ratelimit.Rule, key string) R {
	t.Helper()
	r, err := l.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

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

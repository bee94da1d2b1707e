package ratelimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// TestWeightedLogEveryEntry: every entry of a rule with Prefetch, on the
// weighted log (lua/weighted.lua) beside a grant: a decision and a Peek
// under a penalty, a Reserve settled for less (undo.lua), AllowAll taken
// back at a later rule, AllowGroup, and a cold pair's calls. The log's
// count (its members but the sentinel, plus the sentinel's sum) is what
// was allowed and not given back, and the calls decide as the plain log
// would. On miniredis (the caller's clock) and redis-server.
func TestWeightedLogEveryEntry(t *testing.T) {
	starts := map[string]func(t *testing.T) string{
		"miniredis": func(t *testing.T) string { return miniredis.RunT(t).Addr() },
		"redis-server": func(t *testing.T) string {
			if testing.Short() {
				t.Skip("-short: no redis-server is started")
			}
			return redistest.Start(t, redistest.Options{}).Addr()
		},
	}
	for name, start := range starts {
		t.Run(name, func(t *testing.T) {
			addr := start(t)
			c := testkit.NewClient(t, addr)
			clk := testkit.NewClock()
			l := testkit.NewLimiter(t, c, testkit.Options(clk))
			ctx := context.Background()
			pen := &ratelimit.Penalty{BanAfter: 100, BanFor: time.Second}
			rule := ratelimit.Rule{Name: "w", Limit: ratelimit.Limit{Rate: 50, Window: time.Second}, Prefetch: 20 * time.Millisecond, Penalty: pen}
			other := ratelimit.Rule{Name: "o", Limit: ratelimit.Limit{Rate: 1, Window: time.Second}}
			count := func() int64 {
				t.Helper()
				key := "rl:v1:{1:w:=k}:l"
				n, err := c.Do(ctx, c.B().Zcard().Key(key).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				if s, err := c.Do(ctx, c.B().Zscore().Key(key).Member("#").Build()).ToString(); err == nil {
					v, _ := strconv.ParseInt(s, 10, 64)
					n += v - 1<<52 - 1
				} else if !rueidis.IsRedisNil(err) {
					t.Fatal(err)
				}
				return n
			}
			allowed := int64(0)
			for i := range 6 { // hot: a grant
				if r, err := l.Allow(ctx, rule, "k"); err != nil || !r.Allowed {
					t.Fatalf("call %d = %+v, %v", i, r, err)
				}
				allowed++
			}
			if st := l.Stats(); st.PrefetchGrants == 0 {
				t.Fatalf("no grant after 6 calls at one instant: %+v", st)
			}
			granted := int64(l.Stats().PrefetchSlotsGranted)
			onRedis := allowed - int64(l.Stats().PrefetchSlotsUsed)
			if got, want := count(), onRedis+granted; got != want {
				t.Errorf("the log counts %d, want %d on Redis + %d granted", got, onRedis, granted)
			}
			if r, err := l.Peek(ctx, rule, "k"); err != nil || int64(r.Remaining) != 50-count() {
				t.Errorf("Peek = %+v, %v; want Remaining %d", r, err, 50-count())
			}
			before := count()
			// A Reserve of 5 settled at 2: 3 go back.
			res, r, err := l.Reserve(ctx, rule, "k", 5)
			if err != nil || !r.Allowed {
				t.Fatalf("Reserve = %+v, %v", r, err)
			}
			if err := res.Settle(ctx, 2); err != nil {
				t.Fatal(err)
			}
			if got := count(); got != before+2 {
				t.Errorf("after a Reserve of 5 settled at 2 the log counts %d, want %d", got, before+2)
			}
			// AllowAll: the second rule's only slot taken first, so the
			// request is denied and the first pair taken back.
			if r, err := l.Allow(ctx, other, "k"); err != nil || !r.Allowed {
				t.Fatalf("other = %+v, %v", r, err)
			}
			if rs, err := l.AllowAll(ctx, []ratelimit.Check{{Rule: rule, Key: "k", N: 3}, {Rule: other, Key: "k"}}); err != nil || rs[0].Allowed && rs[1].Allowed {
				t.Fatalf("AllowAll = %+v, %v; want denied", rs, err)
			}
			if got := count(); got != before+2 {
				t.Errorf("after a denied AllowAll the log counts %d, want %d", got, before+2)
			}
			// AllowGroup of the rule alone, 4 events (a group's pair has
			// keys of its own: this checks its script decides).
			if rs, err := l.AllowGroup(ctx, "k", []ratelimit.Check{{Rule: rule, Key: "k", N: 4}}); err != nil || !rs[0].Allowed {
				t.Fatalf("AllowGroup = %+v, %v", rs, err)
			}
			// Fill to the Rate on Redis and find it full.
			n := 50 - count()
			if n > 0 {
				if rs, err := l.AllowAll(ctx, []ratelimit.Check{{Rule: rule, Key: "k", N: int(n)}}); err != nil || !rs[0].Allowed {
					t.Fatalf("AllowAll(%d) to the Rate = %+v, %v", n, rs, err)
				}
			}
			if r, err := l.Peek(ctx, rule, "k"); err != nil || r.Allowed || r.RetryAfter <= 0 {
				t.Errorf("Peek of a full log = %+v, %v; want rejected with a RetryAfter", r, err)
			}
		})
	}
}

package reliability_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestRealRedisManyEventsAtOneMicrosecond guards against the Lua number
// trap that only a real redis-server shows (miniredis prints every digit):
// Lua 5.1 turns a number into a string with %.14g, so a microsecond
// timestamp of 2026 (1.795e15) written through tostring or '..' loses its
// last two digits, and members or hash fields built from it collide or
// drift. Many calls at one microsecond, from two limiters (two processes)
// and with AllowN, must each leave their own member, every score and every
// penalty field must be the exact microsecond, and Redis' own count (ZCARD)
// must equal what the calls were told.
func TestRealRedisManyEventsAtOneMicrosecond(t *testing.T) {
	stores := realStores(t)
	if stores == nil {
		t.Skip("needs redis-server and redis-cli")
	}
	const rate = 1000
	nowUS := testkit.Epoch().UnixMicro()
	if nowUS < 1e15 {
		t.Fatalf("epoch %v is %d µs: too small to show the %%.14g trap", testkit.Epoch(), nowUS)
	}
	exact := strconv.FormatInt(nowUS, 10)
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			clk := testkit.NewClock()
			a, prefix := st.limiter(t, testkit.Options(clk))
			// A second process on the same keys, at the same instant.
			b := testkit.NewLimiter(t, testkit.NewClient(t, st.addrs...), ratelimit.Options{Clock: clk, Timeout: 10 * time.Second, KeyPrefix: prefix})
			rule := ratelimit.Rule{Name: "instant", Limit: ratelimit.PerMinute(rate)}
			logKey, _ := layoutKeys(prefix, rule.Name, "k")

			// 64 goroutines × 5 Allow on each limiter: 640 events.
			var events atomic.Int64
			var wg sync.WaitGroup
			call := func(l *ratelimit.Limiter, n int) {
				defer wg.Done()
				for i := 0; i < 5; i++ {
					r, err := l.AllowN(ctx, rule, "k", n)
					if err != nil || r.Degraded || !r.Allowed {
						t.Errorf("AllowN(%d) = %+v, %v; want allowed on redis", n, r, err)
						return
					}
					events.Add(int64(n))
				}
			}
			for g := 0; g < 64; g++ {
				wg.Add(2)
				go call(a, 1)
				go call(b, 1)
			}
			wg.Wait()
			if got := st.zcard(t, logKey); got != int(events.Load()) || got != 640 {
				t.Fatalf("after 640 Allow at one µs: ZCARD %s = %d, calls allowed %d", logKey, got, events.Load())
			}
			// AllowN with n > 1 at the same instant: 8 goroutines × 5 × n=7.
			for g := 0; g < 4; g++ {
				wg.Add(2)
				go call(a, 7)
				go call(b, 7)
			}
			wg.Wait()
			if got := st.zcard(t, logKey); got != int(events.Load()) || got != 920 {
				t.Fatalf("after AllowN(7) at one µs: ZCARD = %d, events allowed %d, want 920", got, events.Load())
			}
			// The last 80 fit, 81 do not, and a rejection records nothing.
			if r, err := a.AllowN(ctx, rule, "k", 81); err != nil || r.Allowed || r.Remaining != 80 {
				t.Fatalf("AllowN(81) with 80 left = %+v, %v", r, err)
			}
			if r, err := b.AllowN(ctx, rule, "k", 80); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Fatalf("AllowN(80) with 80 left = %+v, %v", r, err)
			}
			if r, err := a.Allow(ctx, rule, "k"); err != nil || r.Allowed || r.RetryAfter != time.Minute {
				t.Fatalf("Allow on a full window = %+v, %v", r, err)
			}
			if got := st.zcard(t, logKey); got != rate {
				t.Fatalf("ZCARD after filling the window = %d, want %d", got, rate)
			}
			// Every score is the exact microsecond.
			flat := strings.Split(mustDo(t, st.node(t, logKey), "ZRANGE", logKey, "0", "-1", "WITHSCORES"), "\n")
			members := map[string]bool{}
			for i := 0; i+1 < len(flat); i += 2 {
				if flat[i+1] != exact {
					t.Fatalf("member %q has score %q, want %s", flat[i], flat[i+1], exact)
				}
				members[flat[i]] = true
			}
			if len(members) != rate {
				t.Fatalf("%d distinct members, want %d", len(members), rate)
			}

			// The penalty hash holds exact times too: l is now, b is now + BanFor.
			pen := ratelimit.Rule{Name: "instant-pen", Limit: ratelimit.PerMinute(1),
				Penalty: &ratelimit.Penalty{BanAfter: 2, BanFor: 1234567 * time.Microsecond}}
			_, penKey := layoutKeys(prefix, pen.Name, "k")
			for i, want := range []bool{true, false, false} {
				r, err := a.Allow(ctx, pen, "k")
				if err != nil || r.Allowed != want || r.Degraded {
					t.Fatalf("penalty call %d = %+v, %v", i, r, err)
				}
			}
			fields := strings.Split(mustDo(t, st.node(t, penKey), "HMGET", penKey, "v", "l", "b"), "\n")
			want := []string{"2", exact, strconv.FormatInt(nowUS+1234567, 10)}
			if strings.Join(fields, " ") != strings.Join(want, " ") {
				t.Fatalf("HMGET %s v l b = %q, want %q", penKey, fields, want)
			}
			// One µs before the ban ends it still holds; at its end it is over.
			clk.Set(testkit.Epoch().Add(1234566 * time.Microsecond))
			if r, _ := a.Peek(ctx, pen, "k"); !r.Banned || r.RetryAfter != 58765434*time.Microsecond {
				t.Fatalf("Peek 1µs before the ban ends = %+v", r)
			}
			clk.Set(testkit.Epoch().Add(1234567 * time.Microsecond))
			if r, _ := a.Peek(ctx, pen, "k"); r.Banned || r.Violations != 2 {
				t.Fatalf("Peek when the ban ends = %+v, want not banned, 2 violations", r)
			}
		})
	}
}

// TestRedisTimeWindowSlides: without a Clock the scripts read Redis' TIME,
// trim the log to the window and count it with ZCARD (calls reach the log
// in the order of their times). Events must still leave the window exactly
// a Window after they happened, and the log must hold only live events.
// The margins are hundreds of milliseconds on a one-second window: nothing
// depends on how fast the machine is.
func TestRedisTimeWindowSlides(t *testing.T) {
	stores := realStores(t)
	if stores == nil {
		t.Skip("needs redis-server and redis-cli")
	}
	if testing.Short() {
		t.Skip("waits for a one-second window to slide")
	}
	rule := ratelimit.Rule{Name: "slide", Limit: ratelimit.Limit{Rate: 3, Window: time.Second}}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l, prefix := st.limiter(t, ratelimit.Options{Timeout: 10 * time.Second})
			logKey, _ := layoutKeys(prefix, rule.Name, "k")
			start := time.Now()
			if r, err := l.AllowN(ctx, rule, "k", 2); err != nil || !r.Allowed || r.Remaining != 1 {
				t.Fatalf("AllowN(2) at 0 = %+v, %v; want allowed, Remaining 1", r, err)
			}
			time.Sleep(500*time.Millisecond - time.Since(start))
			if r, err := l.Allow(ctx, rule, "k"); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Fatalf("Allow at 0.5s = %+v, %v; want allowed, Remaining 0", r, err)
			}
			if r, err := l.Allow(ctx, rule, "k"); err != nil || r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > time.Second-time.Since(start)+50*time.Millisecond {
				t.Fatalf("Allow at 0.5s = %+v, %v; want rejected until the first events leave, at 1s", r, err)
			}
			time.Sleep(1200*time.Millisecond - time.Since(start))
			if time.Since(start) >= 1400*time.Millisecond {
				t.Skip("the machine stalled past the margins: nothing to conclude")
			}
			// The two events of 0 left at 1s; the one of 0.5s is live.
			if r, err := l.Allow(ctx, rule, "k"); err != nil || !r.Allowed || r.Remaining != 1 {
				t.Fatalf("Allow at 1.2s = %+v, %v; want allowed, Remaining 1", r, err)
			}
			if got := st.zcard(t, logKey); got != 2 {
				t.Fatalf("ZCARD of the log at 1.2s = %d, want 2: only live events are kept", got)
			}
		})
	}
}

package reliability_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// The fault tests of reservations (issue 29) on a real redis-server: a
// settle while Redis cannot be used changes this process' count at once
// and is owed to Redis, which gets it once it can be used again; a
// give-back Redis applied whose reply was lost, sent again, takes nothing
// more; after Redis lost its data a give-back takes nothing and an extra
// is recorded. Every test runs each kind that takes reservations on one
// pair of its own, at one fake instant, and checks Redis' own count (read
// directly, see redisCount) and what another instance sees there.

// faultReserveRules are the rules of every kind that takes reservations,
// ten events each at one instant. A GCRA bucket joins with one line, once
// it gives tokens back exactly (and redisCount reads its TAT).
var faultReserveRules = []ratelimit.Rule{
	{Name: "res-log", Limit: ratelimit.Limit{Rate: 10, Window: time.Minute}},
	{Name: "res-approx", Approximate: true, Limit: ratelimit.Limit{Rate: 10, Window: time.Minute}},
	{Name: "res-quota", Kind: ratelimit.CalendarQuota, Limit: ratelimit.Limit{Rate: 10, Period: ratelimit.Day}},
	{Name: "res-fixed", Kind: ratelimit.FixedWindow, Limit: ratelimit.Limit{Rate: 10, Window: time.Hour}},
}

// The reservations each test makes of each rule, and what it settles them
// at: the first for less (4 given back), the second for more (1 charged).
// Redis counts 8 before the settles, kept after.
const (
	firstN, firstActual   = 5, 1
	secondN, secondActual = 3, 4
	kept                  = firstActual + secondActual
)

// redisCount is what Redis itself holds of (rule, key) under prefix, at
// one instant: a log's events, an approximate counter's current window, a
// quota's or a fixed window's count (docs/semantics.md's key layout).
func redisCount(t testing.TB, s redisDoer, prefix string, r ratelimit.Rule, key string) int {
	t.Helper()
	logKey, _ := layoutKeys(prefix, r.Name, key)
	base := strings.TrimSuffix(logKey, ":l")
	var v string
	var err error
	switch {
	case r.Approximate:
		v, err = s.Do("HGET", base+":c", "c")
	case r.Kind == ratelimit.CalendarQuota:
		v, err = s.Do("GET", base+":q")
	case r.Kind == ratelimit.FixedWindow:
		v, err = s.Do("GET", base+":f")
	default:
		return mustInt(t, s, "ZCARD", logKey)
	}
	if errors.Is(err, redistest.ErrNil) {
		return 0
	}
	if err != nil {
		t.Fatalf("reading %s: %v", base, err)
	}
	if f := strings.Fields(v); len(f) >= 2 { // "period_start count", "window count", and " g" once a give-back took from it
		v = f[1]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s holds %q, not a count", base, v)
	}
	return n
}

// reservedPair is the two reservations a test holds of one rule.
type reservedPair struct {
	rule          ratelimit.Rule
	first, second *ratelimit.Reservation
}

// reserveEach makes the two reservations of every rule on Redis.
func reserveEach(t *testing.T, l *ratelimit.Limiter) []reservedPair {
	t.Helper()
	var held []reservedPair
	for _, r := range faultReserveRules {
		held = append(held, reserveOf(t, l, r))
	}
	return held
}

// reserveOf makes the two reservations of r on Redis.
func reserveOf(t *testing.T, l *ratelimit.Limiter, r ratelimit.Rule) reservedPair {
	t.Helper()
	p := reservedPair{rule: r}
	for _, n := range []int{firstN, secondN} {
		res, got, err := l.Reserve(context.Background(), r, "k", n)
		if err != nil || res == nil || got.Degraded {
			t.Fatalf("%s: Reserve(%d) = %v, %+v, %v; want a reservation decided on Redis", r.Name, n, res, got, err)
		}
		if p.first == nil {
			p.first = res
		} else {
			p.second = res
		}
	}
	return p
}

// settleEach settles every pair's reservations (first for less, second
// for more), each returning nil.
func settleEach(t *testing.T, held []reservedPair) {
	t.Helper()
	ctx := context.Background()
	for _, p := range held {
		if err := p.first.Settle(ctx, firstActual); err != nil {
			t.Fatalf("%s: Settle(%d) of %d = %v", p.rule.Name, firstActual, firstN, err)
		}
		if err := p.second.Settle(ctx, secondActual); err != nil {
			t.Fatalf("%s: Settle(%d) of %d = %v", p.rule.Name, secondActual, secondN, err)
		}
	}
}

// checkLocalCounts checks that l counts kept events of every rule now,
// without Redis (degraded).
func checkLocalCounts(t *testing.T, l *ratelimit.Limiter) {
	t.Helper()
	for _, r := range faultReserveRules {
		got, err := l.Peek(context.Background(), r, "k")
		if err != nil || !got.Degraded || got.Remaining != r.Limit.Rate-kept {
			t.Errorf("%s: Peek while Redis cannot be used = %+v, %v; want degraded, Remaining %d (the settles counted at once)",
				r.Name, got, err, r.Limit.Rate-kept)
		}
	}
}

// waitRedisCounts polls until Redis itself holds want events of every
// rule (a bound on a hang, not a wait for timing), then checks that an
// instance of its own (which knows nothing but Redis) sees them.
func waitRedisCounts(t *testing.T, srv *redistest.Server, prefix string, want int) {
	t.Helper()
	for _, r := range faultReserveRules {
		testkit.Eventually(t, r.Name+": Redis holds "+strconv.Itoa(want)+" events", func() bool {
			return redisCount(t, srv, prefix, r, "k") == want
		})
	}
	opts := testkit.Options(testkit.NewClock())
	opts.KeyPrefix = prefix
	other := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
	for _, r := range faultReserveRules {
		got, err := other.Peek(context.Background(), r, "k")
		if err != nil || got.Degraded || got.Remaining != r.Limit.Rate-want {
			t.Errorf("%s: another instance's Peek = %+v, %v; want Remaining %d on Redis", r.Name, got, err, r.Limit.Rate-want)
		}
	}
}

// reservationStats sums the reservation counts and the dropped
// write-backs of ls.
func reservationStats(ls ...*ratelimit.Limiter) ratelimit.Stats {
	var sum ratelimit.Stats
	for _, l := range ls {
		s := l.Stats()
		sum.Reservations += s.Reservations
		sum.ReservationsSettled += s.ReservationsSettled
		sum.ReservedGivenBack += s.ReservedGivenBack
		sum.ReservedCharged += s.ReservedCharged
		sum.ReservationDebts += s.ReservationDebts
		sum.WriteBackDropped += s.WriteBackDropped
	}
	return sum
}

// checkSettleStats checks the reservation counts of ls, together, since
// they stood at base, after the two settles of every rule, and that no
// write-back was dropped.
func checkSettleStats(t *testing.T, base ratelimit.Stats, ls ...*ratelimit.Limiter) {
	t.Helper()
	s := reservationStats(ls...)
	got := ratelimit.Stats{Reservations: s.Reservations - base.Reservations, ReservationsSettled: s.ReservationsSettled - base.ReservationsSettled,
		ReservedGivenBack: s.ReservedGivenBack - base.ReservedGivenBack, ReservedCharged: s.ReservedCharged - base.ReservedCharged,
		ReservationDebts: s.ReservationDebts - base.ReservationDebts, WriteBackDropped: s.WriteBackDropped}
	rules := uint64(len(faultReserveRules))
	want := ratelimit.Stats{Reservations: 2 * rules, ReservationsSettled: 2 * rules,
		ReservedGivenBack: (firstN - firstActual) * rules, ReservedCharged: (secondActual - secondN) * rules, ReservationDebts: rules}
	if got != want {
		t.Errorf("Stats:\n got %+v\nwant %+v", got, want)
	}
}

// TestFaultSettleWhileRedisUnusable: reservations made on Redis are
// settled while Redis cannot be used, killed (and restarted with its data,
// from an append-only file) or refusing the limiter's commands (NOPERM).
// Each Settle returns nil, and this process counts the settle at once; once
// Redis can be used again, the give-back and the extra owed to it reach
// it: Redis holds exactly what the reservations kept, and another instance
// sees it.
func TestFaultSettleWhileRedisUnusable(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	for _, f := range []struct {
		name           string
		inject, remove func(*redistest.Server)
	}{
		{"kill", (*redistest.Server).Kill, (*redistest.Server).Restart},
		{"noperm", func(s *redistest.Server) { s.Forbid(true) }, func(s *redistest.Server) { s.Forbid(false) }},
	} {
		t.Run(f.name, func(t *testing.T) {
			srv := redistest.Start(t, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
			var logs testkit.SyncBuffer
			opts := testkit.OutageOptions(testkit.NewClock(), &logs, nil)
			opts.KeyPrefix = "settle-" + f.name + ":"
			opts.HeartbeatInterval = -1
			l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
			held := reserveEach(t, l)
			for _, r := range faultReserveRules {
				if got := redisCount(t, srv, opts.KeyPrefix, r, "k"); got != firstN+secondN {
					t.Fatalf("%s: Redis holds %d events after the reserves, want %d", r.Name, got, firstN+secondN)
				}
			}

			f.inject(srv)
			settleEach(t, held)
			checkLocalCounts(t, l)
			f.remove(srv)

			waitRedisCounts(t, srv, opts.KeyPrefix, kept)
			checkSettleStats(t, ratelimit.Stats{}, l)
			if t.Failed() {
				t.Logf("limiter's log:\n%s", logs.String())
			}
		})
	}
}

// TestFaultSettleReplyLost: the replies of settles' Redis calls are lost
// (a proxy drops them after Redis ran the scripts): each give-back and
// each extra is applied once, its call times out, Settle returns nil and
// owes it to Redis, and the write-back's loop sends it again once replies
// come back. Applied twice, a give-back takes nothing more (the log's
// members are gone, the other kinds' record is deleted) and an extra is
// counted once (a write-back batch of its own): Redis holds exactly what
// the reservations kept, after each settle's first run and after its
// second. Each rule has a limiter of its own, so that its settle is the
// first call its breaker and admission control see time out, and is sent.
func TestFaultSettleReplyLost(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	proxy := redistest.NewProxy(t, srv.Addr())
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(testkit.NewClock(), &logs, nil)
	opts.Timeout = 300 * time.Millisecond
	opts.KeyPrefix = "settle-lost:"
	opts.HeartbeatInterval = -1
	ctx := context.Background()
	ls := make([]*ratelimit.Limiter, len(faultReserveRules))
	held := make([]reservedPair, len(faultReserveRules))
	for i, r := range faultReserveRules {
		ls[i] = testkit.NewLimiter(t, testkit.NewClient(t, proxy.Addr()), opts)
		// Redis runs every script once on another key first: a script it
		// never ran answers NOSCRIPT, and with that reply lost the client
		// never sends it whole (it would not run at all).
		for _, actual := range []int{0, 3} {
			res, _, err := ls[i].Reserve(ctx, r, "warm", 2)
			if err != nil || res == nil {
				t.Fatalf("%s: Reserve on another key = %v, %v", r.Name, res, err)
			}
			if err := res.Settle(ctx, actual); err != nil {
				t.Fatalf("%s: Settle on another key = %v", r.Name, err)
			}
		}
	}
	warm := reservationStats(ls...)
	for i, r := range faultReserveRules {
		held[i] = reserveOf(t, ls[i], r)
	}
	lose := func(what string, settle func(reservedPair) error, want int) {
		t.Helper()
		proxy.DropReplies(true)
		for _, p := range held {
			if err := settle(p); err != nil {
				t.Fatalf("%s: %s with its reply lost = %v, want nil (owed to Redis)", p.rule.Name, what, err)
			}
			// Redis ran it (and the other limiters' write-back loops
			// may have sent theirs again meanwhile, their replies lost
			// too); once: a call admission control shed under the
			// lost replies' timeouts is sent by the write-back instead.
			testkit.Eventually(t, p.rule.Name+": "+what+" run on Redis", func() bool {
				got := redisCount(t, srv, opts.KeyPrefix, p.rule, "k")
				if got > want {
					t.Fatalf("%s: Redis holds %d events after %s whose reply was lost, want %d: it ran more than once\n%s",
						p.rule.Name, got, what, want, logs.String())
				}
				return got == want
			})
		}
		calls := scriptCalls(t, srv)
		proxy.DropReplies(false)
		proxy.ResetAll() // the streams lost replies: the clients reconnect
		// The write-back's loops, the only callers now, send them again.
		testkit.Eventually(t, what+" sent again", func() bool { return scriptCalls(t, srv)-calls >= len(held) })
		for i, p := range held {
			if got := redisCount(t, srv, opts.KeyPrefix, p.rule, "k"); got != want {
				t.Fatalf("%s: Redis holds %d events after it ran %s twice, want %d", p.rule.Name, got, what, want)
			}
			onRedisAgain(t, ls[i], p.rule, "k") // the breaker closed again, if the lost reply opened it
		}
	}
	lose("a settle for less", func(p reservedPair) error { return p.first.Settle(ctx, firstActual) }, firstActual+secondN)
	lose("a settle for more", func(p reservedPair) error { return p.second.Settle(ctx, secondActual) }, kept)
	waitRedisCounts(t, srv, opts.KeyPrefix, kept)
	checkSettleStats(t, warm, ls...)
	if t.Failed() {
		t.Logf("limiters' log:\n%s", logs.String())
	}
}

// TestFaultSettleAfterRedisLostData: redis-server is killed and restarts
// without persistence, losing the reservations' events; the reservations
// are settled after the restart, or while Redis is down (owed to it). The
// give-back then takes nothing (not from the extra, nor from anything
// recorded since: the reservation's events are gone), and the extra is
// recorded: Redis holds the extra alone.
func TestFaultSettleAfterRedisLostData(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	for _, whileDown := range []bool{false, true} {
		name := "after_the_restart"
		if whileDown {
			name = "while_down"
		}
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t, redistest.Options{})
			var logs testkit.SyncBuffer
			opts := testkit.OutageOptions(testkit.NewClock(), &logs, nil)
			opts.KeyPrefix = "settle-lostdata:"
			opts.HeartbeatInterval = -1
			l := testkit.NewLimiter(t, testkit.NewClient(t, srv.Addr()), opts)
			held := reserveEach(t, l)
			// The extra first: a give-back that took from what the pair
			// holds, not from the reservation's own events, would take it.
			settle := func() {
				ctx := context.Background()
				for _, p := range held {
					if err := p.second.Settle(ctx, secondActual); err != nil {
						t.Fatalf("%s: Settle(%d) of %d = %v", p.rule.Name, secondActual, secondN, err)
					}
					if err := p.first.Settle(ctx, firstActual); err != nil {
						t.Fatalf("%s: Settle(%d) of %d = %v", p.rule.Name, firstActual, firstN, err)
					}
				}
			}

			srv.Kill()
			if whileDown {
				settle()
				checkLocalCounts(t, l)
			}
			srv.Restart()
			if !whileDown {
				onRedisAgain(t, l, faultReserveRules[0], "other")
				for _, r := range faultReserveRules {
					if got := redisCount(t, srv, opts.KeyPrefix, r, "k"); got != 0 {
						t.Fatalf("%s: Redis holds %d events after a restart without persistence, want none", r.Name, got)
					}
				}
				settle()
			}
			waitRedisCounts(t, srv, opts.KeyPrefix, secondActual-secondN)
			checkSettleStats(t, ratelimit.Stats{}, l)
			if t.Failed() {
				t.Logf("limiter's log:\n%s", logs.String())
			}
		})
	}
}

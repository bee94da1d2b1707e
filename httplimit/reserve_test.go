package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// backend is a Limiter and its fake clock.
type backend struct {
	lim *ratelimit.Limiter
	clk *ratelimittest.Clock
}

// backends returns a Limiter with a fake clock at epoch on each backend:
// miniredis, and this process alone.
func backends(t *testing.T) map[string]backend {
	t.Helper()
	clk := ratelimittest.NewClock(epoch)
	local, err := ratelimit.New(nil, ratelimit.Options{Clock: clk, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	e := newEnv(t)
	return map[string]backend{"miniredis": {e.lim, e.clk}, "local": {local, clk}}
}

// peekLeft returns what rule has left for key.
func peekLeft(t *testing.T, lim *ratelimit.Limiter, rule ratelimit.Rule, key string) int {
	t.Helper()
	res, err := lim.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatalf("Peek %s %s: %v", rule.Name, key, err)
	}
	return res.Remaining
}

// estimate is the Cost of the tests' reserving policies: the X-Estimate
// header's value.
func estimate(r *http.Request) int {
	n, _ := strconv.Atoi(r.Header.Get("X-Estimate"))
	return n
}

// settler is a handler that settles its request's reservations at the
// X-Actual header's value, as many times as the header is given, and
// keeps what each Settle returned.
type settler struct {
	mu   sync.Mutex
	errs []error
}

func (s *settler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, v := range r.Header.Values("X-Actual") {
		n, _ := strconv.Atoi(v)
		err := httplimit.Settle(r.Context(), n)
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
	}
	io.WriteString(w, "ok\n")
}

// took returns the errors of the Settles since the last call, and forgets
// them.
func (s *settler) took() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.errs
	s.errs = nil
	return errs
}

// TestReserve runs requests through a route that reserves an estimate of
// tokens per user and limits calls per IP, and checks what the client is
// told and what each policy has left once the handler settled.
func TestReserve(t *testing.T) {
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	perIP := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(4)}
	const pol = `"tokens";q=1000;w=60, "ip";q=4;w=60`
	type step struct {
		at       time.Duration
		estimate string
		actual   []string // X-Actual values: a Settle each
		want     want
		settled  []error // errors.Is each Settle's error (nil: none)
		left     int     // tokens left for alice afterwards
	}
	steps := []step{
		{estimate: "100", actual: []string{"40"}, settled: []error{nil}, left: 960,
			want: want{status: 200, policy: pol, limit: `"tokens";r=900;t=60, "ip";r=3;t=60`}},
		{at: time.Second, estimate: "100", actual: []string{"250"}, settled: []error{nil}, left: 710,
			want: want{status: 200, policy: pol, limit: `"tokens";r=860;t=60, "ip";r=2;t=60`}},
		// Not settled: the estimate stands.
		{at: 2 * time.Second, estimate: "100", left: 610,
			want: want{status: 200, policy: pol, limit: `"tokens";r=610;t=60, "ip";r=1;t=60`}},
		// Settled twice: the second is ErrSettled and changes nothing.
		{at: 3 * time.Second, estimate: "100", actual: []string{"10", "500"}, settled: []error{nil, ratelimit.ErrSettled}, left: 600,
			want: want{status: 200, policy: pol, limit: `"tokens";r=510;t=60, "ip";r=0;t=60`}},
		// Denied by ip, asked after the reserving policy: its reservation
		// is cancelled, and the fields count it as left.
		{at: 4 * time.Second, estimate: "100", actual: []string{"1"}, left: 600,
			want: want{status: 429, policy: pol, limit: `"tokens";r=600;t=60, "ip";r=0;t=56`, retryAfter: "56"}},
		// The first events leave the windows (tokens gets 40 back): more
		// than the estimate is settled, past what tokens has left.
		{at: 60 * time.Second, estimate: "600", actual: []string{"900"}, settled: []error{nil}, left: 0,
			want: want{status: 200, policy: pol, limit: `"tokens";r=40;t=60, "ip";r=0;t=60`}},
		// tokens is in debt (1010 in its window at 61s): denied until 910
		// is, at 62s, when the 100 of 2s leave.
		{at: 61 * time.Second, estimate: "1", left: 0,
			want: want{status: 429, policy: `"tokens";q=1000;w=60`, limit: `"tokens";r=0;t=1`, retryAfter: "1"}},
	}
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			lim := b.lim
			s := &settler{}
			h := httplimit.Stack(lim, []httplimit.Policy{
				{Rule: perIP, Key: httplimit.IP(httplimit.IPOptions{})},
				{Rule: tokens, Key: httplimit.Header("X-User"), Cost: estimate},
			}, httplimit.Options{})(s)
			for i, st := range steps {
				b.clk.Set(epoch.Add(st.at))
				header := []string{"X-User", "alice", "X-Estimate", st.estimate}
				for _, a := range st.actual {
					header = append(header, "X-Actual", a)
				}
				res := get(h, peer, header...)
				t.Run(fmt.Sprint("step ", i), func(t *testing.T) { check(t, res, st.want) })
				errs := s.took()
				if len(errs) != len(st.settled) {
					t.Fatalf("step %d: %d Settles, want %d", i, len(errs), len(st.settled))
				}
				for j, err := range errs {
					if st.settled[j] == nil && err != nil || !errors.Is(err, st.settled[j]) {
						t.Errorf("step %d: Settle %d: %v, want %v", i, j, err, st.settled[j])
					}
				}
				if st.left >= 0 {
					if got := peekLeft(t, lim, tokens, "header:X-User:alice"); got != st.left {
						t.Errorf("step %d: tokens has %d left, want %d", i, got, st.left)
					}
				}
				if t.Failed() {
					t.FailNow()
				}
			}
		})
	}
}

// TestReserveErrors: an estimate outside 1..Rate goes to OnError with
// ratelimit.ErrInvalidN (500 by default), and records nothing; a Cost on
// a Concurrency rule is a setup mistake.
func TestReserveErrors(t *testing.T) {
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	perIP := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(10)}
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			var got []error
			opts := httplimit.Options{Logger: discard}
			s := &settler{}
			route := func(opts httplimit.Options) http.Handler {
				return httplimit.Stack(b.lim, []httplimit.Policy{
					{Rule: perIP, Key: httplimit.IP(httplimit.IPOptions{})},
					{Rule: tokens, Key: httplimit.Global(), Cost: estimate},
				}, opts)(s)
			}
			for _, e := range []string{"0", "-5", "1001"} {
				check(t, get(route(opts), peer, "X-Estimate", e), want{status: 500})
			}
			opts.OnError = func(w http.ResponseWriter, r *http.Request, err error) {
				got = append(got, err)
				w.WriteHeader(http.StatusBadRequest)
			}
			check(t, get(route(opts), peer, "X-Estimate", "1001"), want{status: 400})
			if len(got) != 1 || !errors.Is(got[0], ratelimit.ErrInvalidN) {
				t.Fatalf("OnError got %v, want an error wrapping ErrInvalidN", got)
			}
			if a, b := peekLeft(t, b.lim, tokens, "global"), peekLeft(t, b.lim, perIP, "203.0.113.7"); a != 1000 || b != 10 {
				t.Errorf("after the invalid estimates: tokens %d, ip %d left; want 1000, 10", a, b)
			}
			if errs := s.took(); len(errs) != 0 {
				t.Errorf("the handler ran: %v", errs)
			}
		})
	}
	e := newEnv(t)
	slots := ratelimit.Rule{Name: "slots", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 2, Window: time.Minute}}
	err := httplimit.Validate(e.lim, []httplimit.Policy{{Rule: slots, Key: httplimit.Global(), Cost: estimate}}, httplimit.Options{})
	if !errors.Is(err, httplimit.ErrInvalidSetup) {
		t.Fatalf("Validate of a Cost on a Concurrency rule: %v", err)
	}
}

// TestSettleWithoutReservation: a handler whose request the middleware
// reserved nothing for gets ratelimit.ErrNoReservation from Settle.
func TestSettleWithoutReservation(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(100)}
	s := &settler{}
	for _, h := range []http.Handler{
		s, // no middleware
		httplimit.Limit(e.lim, rule, httplimit.Global(), httplimit.Options{})(s), // no Cost
		httplimit.Stack(e.lim, []httplimit.Policy{{Rule: rule, Key: httplimit.Header("X-User"), Cost: estimate}}, // skipped: no key
			httplimit.Options{NoKey: httplimit.NoKeyAllow})(s),
	} {
		get(h, peer, "X-Estimate", "5", "X-Actual", "3")
	}
	errs := s.took()
	if len(errs) != 3 {
		t.Fatalf("%d Settles, want 3", len(errs))
	}
	for i, err := range errs {
		if !errors.Is(err, ratelimit.ErrNoReservation) {
			t.Errorf("Settle %d: %v, want ErrNoReservation", i, err)
		}
	}
	if got := httplimit.Reservations(context.Background()); got != nil {
		t.Errorf("Reservations of a bare context: %v", got)
	}
}

// TestReserveNested: the reservations of nested middlewares on one request
// are settled together, and Reservations lists them, outermost first; a
// concurrency policy beside a reserving one holds its slot as usual.
func TestReserveNested(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			daily := ratelimit.Rule{Name: "daily", Limit: ratelimit.Limit{Rate: 5000, Window: 24 * time.Hour}}
			tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
			slots := ratelimit.Rule{Name: "slots", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1, Window: time.Minute}}
			var names []string
			inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, o := range httplimit.Reservations(r.Context()) {
					names = append(names, fmt.Sprintf("%s:%d", o.Name, o.Reservation.Reserved()))
				}
				if err := httplimit.Settle(r.Context(), 7); err != nil {
					t.Errorf("Settle: %v", err)
				}
			})
			outer := httplimit.Stack(b.lim, []httplimit.Policy{{Rule: daily, Key: httplimit.Global(), Cost: func(*http.Request) int { return 50 }}}, httplimit.Options{})
			mid := httplimit.Stack(b.lim, []httplimit.Policy{
				{Rule: slots, Key: httplimit.Global()},
				{Rule: tokens, Key: httplimit.Global(), Cost: estimate},
			}, httplimit.Options{})
			check(t, get(outer(mid(inner)), peer, "X-Estimate", "200"), want{status: 200,
				policy: `"daily";q=5000;w=86400 | "tokens";q=1000;w=60, "slots";q=1;w=60`,
				limit:  `"daily";r=4950;t=86400 | "tokens";r=800;t=60, "slots";r=0;t=60`})
			if fmt.Sprint(names) != "[daily:50 tokens:200]" {
				t.Errorf("Reservations: %v", names)
			}
			if a, c := peekLeft(t, b.lim, daily, "global"), peekLeft(t, b.lim, tokens, "global"); a != 4993 || c != 993 {
				t.Errorf("after settling at 7: daily %d, tokens %d left; want 4993, 993", a, c)
			}
			if got := peekLeft(t, b.lim, slots, "global"); got != 1 {
				t.Errorf("the slot was not given back: %d free", got)
			}
		})
	}
}

// TestReserveConcurrentSettles: requests served at once, each reserving
// and settling less, leave exactly what they used recorded.
func TestReserveConcurrentSettles(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerHour(10000)}
			h := httplimit.Stack(b.lim, []httplimit.Policy{{Rule: tokens, Key: httplimit.Global(), Cost: estimate}}, httplimit.Options{})(&settler{})
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := httptest.NewRequest(http.MethodPost, "/", nil)
					r.Header.Set("X-Estimate", "100")
					r.Header.Set("X-Actual", strconv.Itoa(i%5))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						t.Errorf("request %d: %d", i, w.Code)
					}
				}()
			}
			wg.Wait()
			if got := peekLeft(t, b.lim, tokens, "global"); got != 10000-8*(0+1+2+3+4) {
				t.Errorf("%d left, want %d", got, 10000-80)
			}
		})
	}
}

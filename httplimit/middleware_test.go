package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/policy"
)

// want is what a response must carry; empty fields must be absent.
type want struct {
	status     int
	policy     string // RateLimit-Policy
	limit      string // RateLimit
	retryAfter string
	warning    string
	degraded   string
	dryRun     string
	body       string // exact, when not ""
}

func check(t *testing.T, res *http.Response, w want) {
	t.Helper()
	if res.StatusCode != w.status {
		t.Errorf("status %d, want %d", res.StatusCode, w.status)
	}
	for _, f := range []struct{ name, want string }{
		{httplimit.HeaderPolicy, w.policy},
		{httplimit.HeaderRateLimit, w.limit},
		{httplimit.HeaderRetryAfter, w.retryAfter},
		{httplimit.HeaderWarning, w.warning},
		{httplimit.HeaderDegraded, w.degraded},
		{httplimit.HeaderDryRun, w.dryRun},
	} {
		if got := strings.Join(res.Header.Values(f.name), " | "); got != f.want {
			t.Errorf("%s: %q, want %q", f.name, got, f.want)
		}
	}
	if b := body(t, res); w.body != "" && b != w.body {
		t.Errorf("body:\n%s\nwant:\n%s", b, w.body)
	}
}

const (
	peer    = "203.0.113.7:5555"
	problem = "application/problem+json"
)

func quotaBody(name, detail string) string {
	return `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",` +
		`"title":"Request cannot be satisfied as assigned quota has been exceeded",` +
		`"status":429,"detail":"` + detail + `","violated-policies":["` + name + `"]}` + "\n"
}

// step is one request at an exact time since epoch.
type step struct {
	at   time.Duration
	want want
}

func TestResponses(t *testing.T) {
	coupon := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	ladder := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 3, BanFor: 10 * time.Minute}}
	cases := []struct {
		name  string
		rule  ratelimit.Rule
		opts  httplimit.Options
		steps []step
	}{
		{
			name: "allowed, then denied with Retry-After rounded up",
			rule: coupon,
			steps: []step{
				{0, want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=2;t=60`, body: "ok\n"}},
				{2 * time.Second, want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=1;t=60`}},
				{2 * time.Second, want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=60`}},
				{3 * time.Second, want{status: 429, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=57`, retryAfter: "57",
					body: quotaBody("coupon", "Too many requests, try again later.")}},
				// 56.5s left: never announce a retry earlier than the truth.
				{3500 * time.Millisecond, want{status: 429, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=57`, retryAfter: "57"}},
				{60*time.Second - time.Microsecond, want{status: 429, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=1`, retryAfter: "1"}},
				{60 * time.Second, want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=60`}},
			},
		},
		{
			name: "custom message",
			rule: coupon,
			opts: httplimit.Options{Message: `Slow down, "friend"`},
			steps: []step{
				{0, want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=2;t=60`}},
				{0, want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=1;t=60`}},
				{0, want{status: 200, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=60`}},
				{0, want{status: 429, policy: `"coupon";q=3;w=60`, limit: `"coupon";r=0;t=60`, retryAfter: "60",
					body: quotaBody("coupon", `Slow down, \"friend\"`)}},
			},
		},
		{
			name: "warned, then banned",
			rule: ladder,
			steps: []step{
				{0, want{status: 200, policy: `"coupon";q=1;w=60`, limit: `"coupon";r=0;t=60`}},
				{1 * time.Second, want{status: 429, policy: `"coupon";q=1;w=60`, limit: `"coupon";r=0;t=59`, retryAfter: "59",
					warning: `"coupon";violations=1;ban-after=3`}},
				{2 * time.Second, want{status: 429, policy: `"coupon";q=1;w=60`, limit: `"coupon";r=0;t=58`, retryAfter: "58",
					warning: `"coupon";violations=2;ban-after=3`}},
				{3 * time.Second, want{status: 429, policy: `"coupon";q=1;w=60`, limit: `"coupon";r=0;t=600`, retryAfter: "600",
					body: `{"type":"https://iana.org/assignments/http-problem-types#abnormal-usage-detected",` +
						`"title":"Request not satisfied due to detection of abnormal request pattern",` +
						`"status":429,"detail":"Too many requests: this client is blocked for a while, try again later.",` +
						`"violated-policies":["coupon"]}` + "\n"}},
				// The ban's remaining time, in seconds rounded up.
				{4*time.Minute + 30500*time.Millisecond, want{status: 429, policy: `"coupon";q=1;w=60`, limit: `"coupon";r=0;t=333`, retryAfter: "333"}},
				{13 * time.Minute, want{status: 200, policy: `"coupon";q=1;w=60`, limit: `"coupon";r=0;t=60`}},
			},
		},
		{
			name: "policy names are sf-strings",
			rule: ratelimit.Rule{Name: `a"b\c é%`, Limit: ratelimit.Limit{Rate: 2, Window: 1500 * time.Millisecond}},
			steps: []step{
				{0, want{status: 200, policy: `"a\"b\\c %C3%A9%25";q=2;w=2`, limit: `"a\"b\\c %C3%A9%25";r=1;t=2`}},
			},
		},
		{
			name: "a sub-second window is announced as 1s",
			rule: ratelimit.Rule{Name: "burst", Limit: ratelimit.Limit{Rate: 1, Window: 200 * time.Millisecond}},
			steps: []step{
				{0, want{status: 200, policy: `"burst";q=1;w=1`, limit: `"burst";r=0;t=1`}},
				{100 * time.Millisecond, want{status: 429, policy: `"burst";q=1;w=1`, limit: `"burst";r=0;t=1`, retryAfter: "1"}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			h := httplimit.Limit(e.lim, c.rule, httplimit.IP(httplimit.IPOptions{}), c.opts)(ok)
			for i, s := range c.steps {
				e.clk.Set(epoch.Add(s.at))
				res := get(h, peer)
				if s.want.status != 200 && res.Header.Get("Content-Type") != problem && s.want.body != "" {
					t.Errorf("step %d: Content-Type %q", i, res.Header.Get("Content-Type"))
				}
				t.Run("", func(t *testing.T) { check(t, res, s.want) })
				if t.Failed() {
					t.Fatalf("step %d (at %v) failed", i, s.at)
				}
			}
		})
	}
}

func TestLegacyHeaders(t *testing.T) {
	e := newEnv(t)
	perIP := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(5)}
	perUser := ratelimit.Rule{Name: "user", Limit: ratelimit.PerMinute(2)}
	h := httplimit.Stack(e.lim, []httplimit.Policy{
		{Rule: perIP, Key: httplimit.IP(httplimit.IPOptions{})},
		{Rule: perUser, Key: httplimit.Header("X-User")},
	}, httplimit.Options{LegacyHeaders: true})(ok)
	for i, w := range []struct {
		status                 int
		limit, remaining, rset string
	}{
		{200, "2", "1", "60"}, // the user policy has less left
		{200, "2", "0", "60"},
		{429, "2", "0", "60"}, // the denying policy
	} {
		res := get(h, peer, "X-User", "u1")
		got := [4]string{strconv.Itoa(res.StatusCode), res.Header.Get(httplimit.HeaderLegacyLimit), res.Header.Get(httplimit.HeaderLegacyRemaining), res.Header.Get(httplimit.HeaderLegacyReset)}
		if want := [4]string{strconv.Itoa(w.status), w.limit, w.remaining, w.rset}; got != want {
			t.Fatalf("request %d: %q, want %q", i, got, want)
		}
	}
	res := get(httplimit.Limit(e.lim, perIP, httplimit.Global(), httplimit.Options{})(ok), peer)
	if v := res.Header.Get(httplimit.HeaderLegacyLimit); v != "" {
		t.Fatalf("legacy header without LegacyHeaders: %q", v)
	}
}

// TestStackStopsAtFirstDenial checks that a denial leaves later policies
// untouched, and that earlier ones take back the event they recorded, as
// ratelimit.Limiter.AllowAll does: a denied request costs nothing.
func TestStackStopsAtFirstDenial(t *testing.T) {
	e := newEnv(t)
	perUser := ratelimit.Rule{Name: "user", Limit: ratelimit.PerMinute(1)}
	perIP := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(10)}
	global := ratelimit.Rule{Name: "global", Limit: ratelimit.PerMinute(100)}
	h := httplimit.Stack(e.lim, []httplimit.Policy{
		{Rule: global, Key: httplimit.Global(), Name: "route"},
		{Rule: perUser, Key: httplimit.Header("X-User")},
		{Rule: perIP, Key: httplimit.IP(httplimit.IPOptions{})},
	}, httplimit.Options{})(ok)

	check(t, get(h, peer, "X-User", "u1"), want{status: 200,
		policy: `"route";q=100;w=60, "user";q=1;w=60, "ip";q=10;w=60`,
		limit:  `"route";r=99;t=60, "user";r=0;t=60, "ip";r=9;t=60`})
	e.clk.Advance(time.Second)
	check(t, get(h, peer, "X-User", "u1"), want{status: 429,
		policy:     `"route";q=100;w=60, "user";q=1;w=60`,
		limit:      `"route";r=99;t=60, "user";r=0;t=59`,
		retryAfter: "59",
		body:       quotaBody("user", "Too many requests, try again later.")})

	ctx := context.Background()
	if r, _ := e.lim.Peek(ctx, perIP, "203.0.113.7"); r.Remaining != 9 {
		t.Errorf("ip policy after the denial: Remaining %d, want 9 (nothing recorded)", r.Remaining)
	}
	if r, _ := e.lim.Peek(ctx, global, "global"); r.Remaining != 99 {
		t.Errorf("global policy after the denial: Remaining %d, want 99 (its event taken back)", r.Remaining)
	}
}

func TestNoKey(t *testing.T) {
	perUser := ratelimit.Rule{Name: "user", Limit: ratelimit.PerMinute(1)}
	perIP := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(10)}
	noKeyBody := `{"type":"https://pkg.go.dev/github.com/ratelimit-go/ratelimit/httplimit#ErrNoKey",` +
		`"title":"Request does not identify its caller","status":%d,` +
		`"detail":"This route is rate limited per caller, and the request does not say who is calling."}` + "\n"
	user := httplimit.User(func(r *http.Request) (string, bool) {
		id, ok := r.Context().Value(userKey{}).(string)
		return id, ok
	})

	t.Run("deny by default, recording nothing", func(t *testing.T) {
		e := newEnv(t)
		h := httplimit.Stack(e.lim, []httplimit.Policy{
			{Rule: perIP, Key: httplimit.IP(httplimit.IPOptions{})},
			{Rule: perUser, Key: user},
		}, httplimit.Options{})(ok)
		res := get(h, peer)
		check(t, res, want{status: 403, body: strings.Replace(noKeyBody, "%d", "403", 1)})
		if ct := res.Header.Get("Content-Type"); ct != problem {
			t.Errorf("Content-Type %q", ct)
		}
		if r, _ := e.lim.Peek(context.Background(), perIP, "203.0.113.7"); r.Remaining != 10 {
			t.Errorf("ip policy recorded an event for a request refused for want of a key")
		}
	})
	t.Run("deny with a chosen status", func(t *testing.T) {
		e := newEnv(t)
		h := httplimit.Limit(e.lim, perUser, user, httplimit.Options{NoKeyStatus: 401})(ok)
		check(t, get(h, peer), want{status: 401, body: strings.Replace(noKeyBody, "%d", "401", 1)})
	})
	t.Run("allow skips the policy", func(t *testing.T) {
		e := newEnv(t)
		h := httplimit.Stack(e.lim, []httplimit.Policy{
			{Rule: perIP, Key: httplimit.IP(httplimit.IPOptions{})},
			{Rule: perUser, Key: user},
		}, httplimit.Options{NoKey: httplimit.NoKeyAllow})(ok)
		check(t, get(h, peer), want{status: 200, policy: `"ip";q=10;w=60`, limit: `"ip";r=9;t=60`})
		alone := httplimit.Limit(e.lim, perUser, user, httplimit.Options{NoKey: httplimit.NoKeyAllow})(ok)
		check(t, get(alone, peer), want{status: 200, body: "ok\n"})
	})
	t.Run("fallback keys by IP", func(t *testing.T) {
		e := newEnv(t)
		h := withUser(httplimit.Limit(e.lim, perUser, user, httplimit.Options{
			NoKey: httplimit.NoKeyFallback, Fallback: httplimit.IP(httplimit.IPOptions{}),
		})(ok))
		check(t, get(h, peer), want{status: 200, policy: `"user";q=1;w=60`, limit: `"user";r=0;t=60`})
		check(t, get(h, "198.51.100.1:1"), want{status: 200, policy: `"user";q=1;w=60`, limit: `"user";r=0;t=60`})
		check(t, get(h, peer), want{status: 429, policy: `"user";q=1;w=60`, limit: `"user";r=0;t=60`, retryAfter: "60"})
		// A logged-in user has a bucket of its own, apart from any IP's.
		check(t, get(h, peer, "X-Test-User", "203.0.113.7"), want{status: 200, policy: `"user";q=1;w=60`, limit: `"user";r=0;t=60`})
		if r, _ := e.lim.Peek(context.Background(), perUser, "203.0.113.7"); r.Remaining != 0 {
			t.Errorf("the fallback key is not the client's IP")
		}
	})
	t.Run("fallback without a key denies", func(t *testing.T) {
		e := newEnv(t)
		h := httplimit.Limit(e.lim, perUser, user, httplimit.Options{
			NoKey: httplimit.NoKeyFallback, Fallback: httplimit.Header("X-Api-Key"),
		})(ok)
		check(t, get(h, peer), want{status: 403})
		check(t, get(h, peer, "X-Api-Key", "k1"), want{status: 200, policy: `"user";q=1;w=60`, limit: `"user";r=0;t=60`})
	})
	t.Run("empty key is no key", func(t *testing.T) {
		e := newEnv(t)
		empty := func(*http.Request) (string, error) { return "", nil }
		check(t, get(httplimit.Limit(e.lim, perUser, empty, httplimit.Options{})(ok), peer), want{status: 403})
	})
}

type userKey struct{}

// withUser stands in for authentication: it stores the X-Test-User
// header, when present, as the request's user.
func withUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-Test-User"); u != "" {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		}
		next.ServeHTTP(w, r)
	})
}

func TestErrors(t *testing.T) {
	errorBody := `{"type":"about:blank","title":"Internal Server Error","status":500,` +
		`"detail":"The rate limiter could not decide on this request."}` + "\n"
	bad := ratelimit.Rule{Name: "bad", Limit: ratelimit.Limit{Rate: 0, Window: time.Minute}}
	good := ratelimit.Rule{Name: "good", Limit: ratelimit.PerMinute(5)}
	broken := func(*http.Request) (string, error) { return "", errors.New("session store down") }

	t.Run("default answers 500", func(t *testing.T) {
		e := newEnv(t)
		check(t, get(httplimit.Limit(e.lim, bad, httplimit.Global(), httplimit.Options{Logger: discard})(ok), peer),
			want{status: 500, body: errorBody})
		check(t, get(httplimit.Limit(e.lim, good, broken, httplimit.Options{Logger: discard})(ok), peer),
			want{status: 500, body: errorBody})
	})
	t.Run("OnError gets the cause", func(t *testing.T) {
		e := newEnv(t)
		var got []error
		opts := httplimit.Options{OnError: func(w http.ResponseWriter, r *http.Request, err error) {
			got = append(got, err)
			http.Error(w, "sorry", http.StatusServiceUnavailable)
		}}
		check(t, get(httplimit.Limit(e.lim, bad, httplimit.Global(), opts)(ok), peer), want{status: 503, body: "sorry\n"})
		check(t, get(httplimit.Limit(e.lim, good, broken, opts)(ok), peer), want{status: 503})
		e.lim.Close()
		check(t, get(httplimit.Limit(e.lim, good, httplimit.Global(), opts)(ok), peer), want{status: 503})
		if len(got) != 3 || !errors.Is(got[0], ratelimit.ErrInvalidRule) || got[1].Error() != "session store down" || !errors.Is(got[2], ratelimit.ErrClosed) {
			t.Fatalf("OnError got %v", got)
		}
	})
}

func TestOnDenied(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1)}
	var got policy.Outcome
	h := httplimit.Limit(e.lim, rule, httplimit.Global(), httplimit.Options{
		OnDenied: func(w http.ResponseWriter, r *http.Request, d policy.Outcome) {
			got = d
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte("slow down\n"))
		},
	})(ok)
	get(h, peer)
	check(t, get(h, peer), want{status: 429, policy: `"r";q=1;w=60`, limit: `"r";r=0;t=60`, retryAfter: "60", body: "slow down\n"})
	if got.Name != "r" || got.Key != "global" || got.Result.Allowed || got.Result.RetryAfter != time.Minute {
		t.Fatalf("OnDenied got %+v", got)
	}
}

// TestDegraded checks that decisions made while Redis is down are served
// as usual, still limited, and marked only on request.
func TestDegraded(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(2)}
	plain := httplimit.Limit(e.lim, rule, httplimit.Global(), httplimit.Options{})(ok)
	marked := httplimit.Limit(e.lim, rule, httplimit.Global(), httplimit.Options{DegradedHeader: true})(ok)
	check(t, get(marked, peer), want{status: 200, policy: `"r";q=2;w=60`, limit: `"r";r=1;t=60`})
	e.mr.Close()
	check(t, get(plain, peer), want{status: 200, policy: `"r";q=2;w=60`, limit: `"r";r=0;t=60`})
	check(t, get(marked, peer), want{status: 429, policy: `"r";q=2;w=60`, limit: `"r";r=0;t=60`, retryAfter: "60", degraded: `"r"`})
}

// TestDryRun: a policy in dry run serves every request, and names itself in
// RateLimit-Dry-Run when enforcing it would have denied.
func TestDryRun(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "new-rule", Limit: ratelimit.PerMinute(1), DryRun: true}
	h := httplimit.Limit(e.lim, rule, httplimit.Global(), httplimit.Options{})(ok)
	first := get(h, peer)
	if first.StatusCode != http.StatusOK || first.Header.Get(httplimit.HeaderDryRun) != "" {
		t.Fatalf("first request: %d, dry run %q", first.StatusCode, first.Header.Get(httplimit.HeaderDryRun))
	}
	e.clk.Advance(15 * time.Second)
	second := get(h, peer)
	if second.StatusCode != http.StatusOK || second.Header.Get(httplimit.HeaderDryRun) != `"new-rule";t=45` || second.Header.Get("Retry-After") != "" {
		t.Fatalf("second request: %d, dry run %q, Retry-After %q", second.StatusCode, second.Header.Get(httplimit.HeaderDryRun), second.Header.Get("Retry-After"))
	}
}

// TestDryRunNeverLowersWhatClientsAreTold: a policy in dry run is left out
// of RateLimit-Policy, RateLimit, the legacy fields and the warning, so a
// client is told only about the limits that are enforced.
func TestDryRunNeverLowersWhatClientsAreTold(t *testing.T) {
	e := newEnv(t)
	enforced := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(5)}
	watched := ratelimit.Rule{Name: "strict", Limit: ratelimit.PerMinute(1), DryRun: true,
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: time.Hour}}
	h := httplimit.Stack(e.lim, []httplimit.Policy{
		{Rule: watched, Key: httplimit.Global()},
		{Rule: enforced, Key: httplimit.Global()},
	}, httplimit.Options{LegacyHeaders: true})(ok)
	steps := []struct {
		want      want
		remaining string // X-RateLimit-Remaining
	}{
		{want{status: 200, policy: `"coupon";q=5;w=60`, limit: `"coupon";r=4;t=60`}, "4"},
		{want{status: 200, policy: `"coupon";q=5;w=60`, limit: `"coupon";r=3;t=60`, dryRun: `"strict";t=60`}, "3"},
		{want{status: 200, policy: `"coupon";q=5;w=60`, limit: `"coupon";r=2;t=60`, dryRun: `"strict";t=3600;banned`}, "2"},
	}
	for i, s := range steps {
		res := get(h, peer)
		t.Logf("request %d", i)
		if got := res.Header.Get(httplimit.HeaderLegacyRemaining); got != s.remaining {
			t.Errorf("%s: %q, want %q", httplimit.HeaderLegacyRemaining, got, s.remaining)
		}
		check(t, res, s.want)
	}
	// Only policies in dry run: no field claims a limit.
	only := httplimit.Limit(e.lim, watched, httplimit.Global(), httplimit.Options{LegacyHeaders: true})(ok)
	res := get(only, peer)
	check(t, res, want{status: 200, dryRun: `"strict";t=3600;banned`})
	if got := res.Header.Get(httplimit.HeaderLegacyRemaining); got != "" {
		t.Errorf("%s: %q with only a dry run", httplimit.HeaderLegacyRemaining, got)
	}
}

// TestViolatedPoliciesNameAsTheFields: the problem body names the denying
// policy exactly as the RateLimit field does, whatever bytes the name holds.
func TestViolatedPoliciesNameAsTheFields(t *testing.T) {
	for _, name := range []string{"coupon", "50% off", "café", `say "hi" \ now`, "\xff\x00"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1)}
			h := httplimit.Stack(e.lim, []httplimit.Policy{{Name: name, Rule: rule, Key: httplimit.Global()}}, httplimit.Options{})(ok)
			get(h, peer)
			res := get(h, peer)
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %d, want 429", res.StatusCode)
			}
			var p struct {
				Violated []string `json:"violated-policies"`
			}
			if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
				t.Fatal(err)
			}
			item, _, _ := strings.Cut(res.Header.Get(httplimit.HeaderRateLimit), ";")
			unquoted, err := strconv.Unquote(item) // an sf-string's escapes are Go's for '"' and '\'
			if err != nil {
				t.Fatalf("field item %s: %v", item, err)
			}
			if len(p.Violated) != 1 || p.Violated[0] != unquoted || p.Violated[0] != policy.Encode(name) {
				t.Errorf("violated-policies %q; the field names the policy %q, policy.Encode %q", p.Violated, unquoted, policy.Encode(name))
			}
		})
	}
}

func TestNestedMiddlewaresShareTheFields(t *testing.T) {
	e := newEnv(t)
	outer := httplimit.Limit(e.lim, ratelimit.Rule{Name: "site", Limit: ratelimit.PerSecond(50)}, httplimit.Global(), httplimit.Options{})
	inner := httplimit.Limit(e.lim, ratelimit.Rule{Name: "page", Limit: ratelimit.PerMinute(5)}, httplimit.IP(httplimit.IPOptions{}), httplimit.Options{})
	check(t, get(outer(inner(ok)), peer), want{status: 200,
		policy: `"site";q=50;w=1 | "page";q=5;w=60`,
		limit:  `"site";r=49;t=1 | "page";r=4;t=60`})
}

// TestConcurrentRequests sends many requests at once: exactly Rate pass.
func TestConcurrentRequests(t *testing.T) {
	for _, backend := range []string{"miniredis", "local"} {
		t.Run(backend, func(t *testing.T) {
			lim := newEnv(t).lim
			if backend == "local" {
				var err error
				if lim, err = ratelimit.New(nil, ratelimit.Options{}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(lim.Close)
			}
			const rate, workers, each = 37, 16, 10
			h := httplimit.Limit(lim, ratelimit.Rule{Name: "flash", Limit: ratelimit.PerHour(rate)}, httplimit.Global(), httplimit.Options{DegradedHeader: true})(ok)
			var allowed, denied, degraded atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range each {
						r := httptest.NewRequest(http.MethodGet, "/", nil)
						r.RemoteAddr = "198.51.100." + strconv.Itoa(w) + ":" + strconv.Itoa(1000+i)
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, r)
						if rec.Header().Get(httplimit.HeaderDegraded) != "" {
							degraded.Add(1)
						}
						switch rec.Code {
						case 200:
							allowed.Add(1)
						case 429:
							denied.Add(1)
						default:
							t.Errorf("status %d", rec.Code)
						}
					}
				}()
			}
			wg.Wait()
			if degraded.Load() != 0 {
				t.Fatalf("%d decisions were made without Redis", degraded.Load())
			}
			if allowed.Load() != rate || denied.Load() != workers*each-rate {
				t.Fatalf("allowed %d, denied %d; want %d, %d", allowed.Load(), denied.Load(), rate, workers*each-rate)
			}
		})
	}
}

// TestSetupMistakesFailClosed: a route set up wrongly neither panics nor
// serves unlimited: Validate reports the mistake, and every request goes to the
// error handler with an error wrapping ErrInvalidSetup.
func TestSetupMistakesFailClosed(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(1)}
	global := []httplimit.Policy{{Rule: rule, Key: httplimit.Global()}}
	for _, c := range []struct {
		name     string
		lim      *ratelimit.Limiter
		policies []httplimit.Policy
		opts     httplimit.Options
		wantRule bool // the error wraps ratelimit.ErrInvalidRule too
	}{
		{name: "nil limiter", policies: global},
		{name: "nil key", lim: e.lim, policies: []httplimit.Policy{{Rule: rule}}},
		{name: "no policies", lim: e.lim},
		{name: "invalid rule", lim: e.lim, policies: []httplimit.Policy{{Rule: ratelimit.Rule{Name: "r"}, Key: httplimit.Global()}}, wantRule: true},
		{name: "fallback without func", lim: e.lim, policies: global, opts: httplimit.Options{NoKey: httplimit.NoKeyFallback}},
		{name: "unknown NoKey", lim: e.lim, policies: global, opts: httplimit.Options{NoKey: 7}},
		{name: "NoKeyStatus 200", lim: e.lim, policies: global, opts: httplimit.Options{NoKeyStatus: 200}},
	} {
		err := httplimit.Validate(c.lim, c.policies, c.opts)
		if !errors.Is(err, httplimit.ErrInvalidSetup) || c.wantRule != errors.Is(err, ratelimit.ErrInvalidRule) {
			t.Errorf("%s: Validate = %v", c.name, err)
		}
		var got error
		c.opts.Logger = discard
		c.opts.OnError = func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			w.WriteHeader(http.StatusInternalServerError)
		}
		res := get(httplimit.Stack(c.lim, c.policies, c.opts)(ok), "192.0.2.1:1234")
		if res.StatusCode != http.StatusInternalServerError || !errors.Is(got, httplimit.ErrInvalidSetup) {
			t.Errorf("%s: a request was answered %d with error %v", c.name, res.StatusCode, got)
		}
	}
	if err := httplimit.Validate(e.lim, global, httplimit.Options{}); err != nil {
		t.Errorf("a valid setup: %v", err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for name, key := range map[string]httplimit.KeyFunc{"User(nil)": httplimit.User(nil), `Header("")`: httplimit.Header("")} {
		if k, err := key(r); !errors.Is(err, httplimit.ErrInvalidSetup) || k != "" {
			t.Errorf("%s keyed a request: %q, %v", name, k, err)
		}
	}
}

package grpclimit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// want is what a call must show its client; empty metadata fields must be
// absent.
type want struct {
	code    codes.Code
	message string        // exact, when not ""
	retry   time.Duration // RetryInfo's delay, exact (0: none)
	quota   string        // QuotaFailure, exact, when not ""
	policy  string        // ratelimit-policy
	limit   string        // ratelimit
	warning string
	dryRun  string
	degrade string
}

func checkOutcome(t *testing.T, o outcome, w want) {
	t.Helper()
	if o.code != w.code {
		t.Errorf("code %v, want %v (%q)", o.code, w.code, o.message)
	}
	if w.message != "" && o.message != w.message {
		t.Errorf("message %q, want %q", o.message, w.message)
	}
	if o.retry != w.retry {
		t.Errorf("RetryInfo delay %v, want %v", o.retry, w.retry)
	}
	if w.quota != "" && o.quota != w.quota {
		t.Errorf("QuotaFailure %q, want %q", o.quota, w.quota)
	}
	for _, f := range []struct{ key, want string }{
		{grpclimit.HeaderPolicy, w.policy},
		{grpclimit.HeaderRateLimit, w.limit},
		{grpclimit.HeaderWarning, w.warning},
		{grpclimit.HeaderDryRun, w.dryRun},
		{grpclimit.HeaderDegraded, w.degrade},
	} {
		if got := field(o.header, f.key); got != f.want {
			t.Errorf("%s: %q, want %q", f.key, got, f.want)
		}
	}
}

// step is one call at an exact time since epoch.
type step struct {
	at   time.Duration
	want want
}

const quotaDenied = "quota \"coupon\" exceeded: 3 per 1m0s"

func TestResponses(t *testing.T) {
	coupon := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	ladder := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(1),
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 3, BanFor: 10 * time.Minute}}
	dry := ladder
	dry.DryRun = true
	const (
		pol3 = `"coupon";q=3;w=60`
		pol1 = `"coupon";q=1;w=60`
	)
	cases := []struct {
		name  string
		rule  ratelimit.Rule
		opts  grpclimit.Options
		steps []step
	}{
		{
			name: "allowed, then denied with RetryInfo rounded up to the millisecond",
			rule: coupon,
			steps: []step{
				{0, want{code: codes.OK, policy: pol3, limit: `"coupon";r=2;t=60`}},
				{2 * time.Second, want{code: codes.OK, policy: pol3, limit: `"coupon";r=1;t=60`}},
				{2 * time.Second, want{code: codes.OK, policy: pol3, limit: `"coupon";r=0;t=60`}},
				{3 * time.Second, want{code: codes.ResourceExhausted, message: "Too many requests, try again later.",
					retry: 57 * time.Second, quota: `id=coupon value=3 ` + quotaDenied,
					policy: pol3, limit: `"coupon";r=0;t=57`}},
				{3500 * time.Millisecond, want{code: codes.ResourceExhausted, retry: 56500 * time.Millisecond,
					policy: pol3, limit: `"coupon";r=0;t=57`}},
				// 999.5µs left: never announce a retry earlier than the truth.
				{60*time.Second - 999500*time.Nanosecond, want{code: codes.ResourceExhausted, retry: time.Millisecond,
					policy: pol3, limit: `"coupon";r=0;t=1`}},
				{60*time.Second - 1001*time.Microsecond, want{code: codes.ResourceExhausted, retry: 2 * time.Millisecond,
					policy: pol3, limit: `"coupon";r=0;t=1`}},
				{60 * time.Second, want{code: codes.OK, policy: pol3, limit: `"coupon";r=0;t=60`}},
			},
		},
		{
			name: "custom message",
			rule: coupon,
			opts: grpclimit.Options{Message: "Slow down, \"friend\""},
			steps: []step{
				{0, want{code: codes.OK, policy: pol3, limit: `"coupon";r=2;t=60`}},
				{0, want{code: codes.OK, policy: pol3, limit: `"coupon";r=1;t=60`}},
				{0, want{code: codes.OK, policy: pol3, limit: `"coupon";r=0;t=60`}},
				{0, want{code: codes.ResourceExhausted, message: "Slow down, \"friend\"", retry: time.Minute,
					policy: pol3, limit: `"coupon";r=0;t=60`}},
			},
		},
		{
			name: "warned, then banned",
			rule: ladder,
			opts: grpclimit.Options{BanMessage: "Blocked."},
			steps: []step{
				{0, want{code: codes.OK, policy: pol1, limit: `"coupon";r=0;t=60`}},
				{1 * time.Second, want{code: codes.ResourceExhausted, message: "Too many requests, try again later.",
					retry: 59 * time.Second, quota: `id=coupon value=1 quota "coupon" exceeded: 1 per 1m0s`,
					policy: pol1, limit: `"coupon";r=0;t=59`, warning: `"coupon";violations=1;ban-after=3`}},
				{2 * time.Second, want{code: codes.ResourceExhausted, retry: 58 * time.Second,
					policy: pol1, limit: `"coupon";r=0;t=58`, warning: `"coupon";violations=2;ban-after=3`}},
				{3 * time.Second, want{code: codes.ResourceExhausted, message: "Blocked.", retry: 10 * time.Minute,
					quota:  `id=coupon value=1 quota "coupon": banned for repeated violations`,
					policy: pol1, limit: `"coupon";r=0;t=600`}},
				// The ban's remaining time: 5m32.5s.
				{4*time.Minute + 30500*time.Millisecond, want{code: codes.ResourceExhausted, message: "Blocked.",
					retry: 5*time.Minute + 32500*time.Millisecond, policy: pol1, limit: `"coupon";r=0;t=333`}},
				{10*time.Minute + 3*time.Second, want{code: codes.OK, policy: pol1, limit: `"coupon";r=0;t=60`}},
			},
		},
		{
			name: "dry run lets everything through, is never advertised, and says what enforcing would have answered",
			rule: dry,
			steps: []step{
				{0, want{code: codes.OK}},
				{10 * time.Second, want{code: codes.OK, dryRun: `"coupon";t=50`}},
				{20 * time.Second, want{code: codes.OK, dryRun: `"coupon";t=40`}},
				{30 * time.Second, want{code: codes.OK, dryRun: `"coupon";t=600;banned`}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			client := unaryServer(t, e, "", grpclimit.Methods{check: {{Rule: c.rule, Key: grpclimit.Global()}}}, c.opts)
			for i, s := range c.steps {
				e.clk.Set(epoch.Add(s.at))
				t.Logf("step %d at %v", i, s.at)
				checkOutcome(t, call(t, client), s.want)
			}
		})
	}
}

// TestStopsAtFirstDenial checks that policies after a denying one record
// nothing, and that policies before it take back what they recorded, as
// ratelimit.Limiter.AllowAll does: a denied call costs nothing.
func TestStopsAtFirstDenial(t *testing.T) {
	e := newEnv(t)
	perUser := ratelimit.Rule{Name: "per-user", Limit: ratelimit.PerSecond(2)}
	global := ratelimit.Rule{Name: "global", Limit: ratelimit.PerSecond(1000)}
	tight := ratelimit.Rule{Name: "tight", Limit: ratelimit.PerSecond(1)}
	user := grpclimit.Metadata("x-user")
	client := unaryServer(t, e, "", grpclimit.Methods{
		check: {{Name: "user", Rule: perUser, Key: user}, {Rule: global, Key: grpclimit.Global()}},
		// The second policy denies: the first takes its event back.
		"/grpc.health.v1.Health/List": {{Rule: global, Key: grpclimit.Global()}, {Rule: tight, Key: user}},
	}, grpclimit.Options{})

	steps := []want{
		{code: codes.OK, policy: `"user";q=2;w=1, "global";q=1000;w=1`, limit: `"user";r=1;t=1, "global";r=999;t=1`},
		{code: codes.OK, policy: `"user";q=2;w=1, "global";q=1000;w=1`, limit: `"user";r=0;t=1, "global";r=998;t=1`},
		{code: codes.ResourceExhausted, retry: time.Second, quota: `id=user value=2 quota "user" exceeded: 2 per 1s`,
			policy: `"user";q=2;w=1`, limit: `"user";r=0;t=1`},
	}
	for _, w := range steps {
		checkOutcome(t, call(t, client, "x-user", "alice"), w)
	}
	peek(t, e, global, "global", 998)

	var header metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user", "bob")
	for i, code := range []codes.Code{codes.OK, codes.ResourceExhausted} {
		_, err := client.List(ctx, &healthpb.HealthListRequest{}, grpc.Header(&header))
		o := outcomeOf(t, err, header)
		if o.code != code {
			t.Errorf("List %d: %v, want %v", i, o.code, code)
		}
	}
	if got, want := field(header, grpclimit.HeaderRateLimit), `"global";r=997;t=1, "tight";r=0;t=1`; got != want {
		t.Errorf("ratelimit %q, want %q", got, want)
	}
	peek(t, e, global, "global", 997)
}

// peek checks the quota left for key under rule.
func peek(t *testing.T, e *env, rule ratelimit.Rule, key string, remaining int) {
	t.Helper()
	res, err := e.lim.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatalf("Peek(%s, %q): %v", rule.Name, key, err)
	}
	if res.Remaining != remaining {
		t.Errorf("Peek(%s, %q).Remaining = %d, want %d", rule.Name, key, res.Remaining, remaining)
	}
}

// TestMethods checks that the most specific entry applies alone, that an
// empty entry exempts, and that unmatched methods are not limited.
func TestMethods(t *testing.T) {
	rule := func(name string) ratelimit.Rule {
		return ratelimit.Rule{Name: name, Limit: ratelimit.PerHour(10)}
	}
	for _, c := range []struct {
		name    string
		methods grpclimit.Methods
		method  string
		policy  string // the policy that must have recorded, "" for none
	}{
		{"exact beats service", grpclimit.Methods{check: {{Rule: rule("exact"), Key: grpclimit.Global()}},
			"/grpc.health.v1.Health/*": {{Rule: rule("service"), Key: grpclimit.Global()}}, "*": {{Rule: rule("any"), Key: grpclimit.Global()}}},
			check, "exact"},
		{"service beats any", grpclimit.Methods{check: {{Rule: rule("exact"), Key: grpclimit.Global()}},
			"/grpc.health.v1.Health/*": {{Rule: rule("service"), Key: grpclimit.Global()}}, "*": {{Rule: rule("any"), Key: grpclimit.Global()}}},
			watch, "service"},
		{"any", grpclimit.Methods{check: {{Rule: rule("exact"), Key: grpclimit.Global()}},
			"/grpc.health.v1.Health/*": {{Rule: rule("service"), Key: grpclimit.Global()}}, "*": {{Rule: rule("any"), Key: grpclimit.Global()}}},
			"/shop.Coupons/Claim", "any"},
		{"another service's method of the same name", grpclimit.Methods{check: {{Rule: rule("exact"), Key: grpclimit.Global()}}},
			"/grpc.health.v2.Health/Check", ""},
		{"exempt", grpclimit.Methods{check: nil, "*": {{Rule: rule("any"), Key: grpclimit.Global()}}},
			check, ""},
		{"unmatched", grpclimit.Methods{"/grpc.health.v1.Health/*": {{Rule: rule("service"), Key: grpclimit.Global()}}},
			"/shop.Coupons/Claim", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ic := grpclimit.UnaryServerInterceptor(e.lim, c.methods, grpclimit.Options{Logger: discard})
			reached := false
			_, err := ic(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: c.method},
				func(context.Context, any) (any, error) { reached = true; return nil, nil })
			if err != nil || !reached {
				t.Fatalf("err %v, handler reached %v", err, reached)
			}
			for _, name := range []string{"exact", "service", "any"} {
				want := 10
				if name == c.policy {
					want = 9
				}
				peek(t, e, rule(name), "global", want)
			}
		})
	}
}

func TestStream(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "watch", Limit: ratelimit.PerMinute(2)}
	methods := grpclimit.Methods{watch: {{Rule: rule, Key: grpclimit.Global()}}}
	client := serve(t, "", nil, grpclimit.StreamServerInterceptor(e.lim, methods, grpclimit.Options{Logger: discard}))

	open := func() outcome { o, _ := openWatch(t, client); return o }
	for i, w := range []want{
		{code: codes.OK, policy: `"watch";q=2;w=60`, limit: `"watch";r=1;t=60`},
		{code: codes.OK, policy: `"watch";q=2;w=60`, limit: `"watch";r=0;t=60`},
		{code: codes.ResourceExhausted, message: grpclimit.DefaultMessage, retry: 45 * time.Second,
			quota:  `id=watch value=2 quota "watch" exceeded: 2 per 1m0s`,
			policy: `"watch";q=2;w=60`, limit: `"watch";r=0;t=45`},
	} {
		t.Logf("stream %d", i)
		if i == 2 {
			e.clk.Advance(15 * time.Second)
		}
		checkOutcome(t, open(), w)
	}
	// Unary calls are not the stream interceptor's.
	if o := call(t, client); o.code != codes.OK || field(o.header, grpclimit.HeaderRateLimit) != "" {
		t.Errorf("unary call: %v %v", o.code, o.header)
	}
}

func TestNoKey(t *testing.T) {
	rule := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
	global := ratelimit.Rule{Name: "global", Limit: ratelimit.PerMinute(100)}
	// The service's authentication put the user into the context; here it
	// comes from metadata.
	user := grpclimit.Identity(func(ctx context.Context) (string, bool) {
		md, _ := metadata.FromIncomingContext(ctx)
		v := md.Get("x-user")
		return strings.Join(v, ""), len(v) == 1
	})
	const peerAddr = "198.51.100.9:5000"
	for _, c := range []struct {
		name      string
		opts      grpclimit.Options
		peer      string
		code      codes.Code
		message   string
		limit     string // ratelimit
		key       string // where the call counted under rule ("": nowhere)
		globalAll bool   // the global policy counted
	}{
		{name: "deny by default", code: codes.Unauthenticated, message: grpclimit.NoKeyMessage},
		{name: "deny with another code", opts: grpclimit.Options{NoKeyCode: codes.PermissionDenied},
			code: codes.PermissionDenied, message: grpclimit.NoKeyMessage},
		{name: "allow skips the policy", opts: grpclimit.Options{NoKey: grpclimit.NoKeyAllow},
			code: codes.OK, limit: `"global";r=99;t=60`, globalAll: true},
		{name: "fallback", opts: grpclimit.Options{NoKey: grpclimit.NoKeyFallback, Fallback: grpclimit.IP(grpclimit.IPOptions{})},
			peer: peerAddr, code: codes.OK, limit: `"coupon";r=2;t=60, "global";r=99;t=60`, key: "198.51.100.9", globalAll: true},
		{name: "fallback without a key either", opts: grpclimit.Options{NoKey: grpclimit.NoKeyFallback, Fallback: grpclimit.IP(grpclimit.IPOptions{})},
			code: codes.Unauthenticated, message: grpclimit.NoKeyMessage},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			client := unaryServer(t, e, c.peer, grpclimit.Methods{check: {
				{Rule: rule, Key: user},
				{Rule: global, Key: grpclimit.Global()},
			}}, c.opts)
			o := call(t, client) // anonymous
			if o.code != c.code || o.message != c.message && c.message != "" {
				t.Errorf("%v %q, want %v %q", o.code, o.message, c.code, c.message)
			}
			if got := field(o.header, grpclimit.HeaderRateLimit); got != c.limit {
				t.Errorf("ratelimit %q, want %q", got, c.limit)
			}
			if c.key != "" {
				peek(t, e, rule, c.key, 2)
			}
			wantGlobal := 100
			if c.globalAll {
				wantGlobal = 99
			}
			peek(t, e, global, "global", wantGlobal)

			// A known user counts under its own key whatever the policy.
			if o := call(t, client, "x-user", "alice"); o.code != codes.OK {
				t.Errorf("alice: %v %q", o.code, o.message)
			}
			peek(t, e, rule, "user:alice", 2)
		})
	}
}

// TestKeysEndToEnd checks where calls from a peer, with metadata, count.
func TestKeysEndToEnd(t *testing.T) {
	const proxy = "10.0.0.1:41000"
	trusted := grpclimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	for _, c := range []struct {
		name string
		key  grpclimit.KeyFunc
		peer string
		md   []string
		want string // the key the call counted under
	}{
		{"direct peer", grpclimit.IP(grpclimit.IPOptions{}), "198.51.100.9:5000", nil, "198.51.100.9"},
		{"untrusted peer's x-forwarded-for is ignored", grpclimit.IP(trusted), "198.51.100.9:5000",
			[]string{"x-forwarded-for", "1.2.3.4"}, "198.51.100.9"},
		{"no proxy trusted: x-forwarded-for is ignored", grpclimit.IP(grpclimit.IPOptions{}), proxy,
			[]string{"x-forwarded-for", "198.51.100.9"}, "10.0.0.1"},
		{"through the proxy", grpclimit.IP(trusted), proxy,
			[]string{"x-forwarded-for", "198.51.100.9"}, "198.51.100.9"},
		{"spoofed through the proxy", grpclimit.IP(trusted), proxy,
			[]string{"x-forwarded-for", "1.2.3.4, 198.51.100.9"}, "198.51.100.9"},
		{"spoofed in a separate value", grpclimit.IP(trusted), proxy,
			[]string{"x-forwarded-for", "1.2.3.4", "x-forwarded-for", "198.51.100.9"}, "198.51.100.9"},
		{"two trusted hops", grpclimit.IP(trusted), proxy,
			[]string{"x-forwarded-for", "1.2.3.4, 198.51.100.9, 10.0.0.2"}, "198.51.100.9"},
		{"nothing forwarded", grpclimit.IP(trusted), proxy, nil, "10.0.0.1"},
		{"IPv6 client grouped by /64", grpclimit.IP(trusted), proxy,
			[]string{"x-forwarded-for", "2001:db8:aa:bb:1:2:3:4"}, "2001:db8:aa:bb::/64"},
		{"IPv6 peer", grpclimit.IP(grpclimit.IPOptions{IPv6PrefixLen: 48}), "[2001:db8:aa:bb::9]:5000", nil, "2001:db8:aa::/48"},
		{"Forwarded", grpclimit.IP(grpclimit.IPOptions{TrustedProxies: trusted.TrustedProxies, Forwarded: true}), proxy,
			[]string{"forwarded", `for=1.2.3.4, for="[2001:db8::1]:80";proto=https`, "x-forwarded-for", "198.51.100.9"}, "2001:db8::/64"},
		{"metadata", grpclimit.Metadata("X-Api-Key"), proxy, []string{"x-api-key", "k1"}, "header:X-Api-Key:k1"},
		{"global", grpclimit.Global(), proxy, nil, "global"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(5)}
			client := unaryServer(t, e, c.peer, grpclimit.Methods{"*": {{Rule: rule, Key: c.key}}}, grpclimit.Options{})
			if o := call(t, client, c.md...); o.code != codes.OK {
				t.Fatalf("%v %q", o.code, o.message)
			}
			peek(t, e, rule, c.want, 4)
		})
	}
}

func TestErrors(t *testing.T) {
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(5)}
	broken := func(context.Context, string) (string, error) { return "", errors.New("session store down") }

	t.Run("a KeyFunc's error", func(t *testing.T) {
		e := newEnv(t)
		log := &bytes.Buffer{}
		client := serve(t, "", grpclimit.UnaryServerInterceptor(e.lim, grpclimit.Methods{check: {{Rule: rule, Key: broken}}},
			grpclimit.Options{Logger: slog.New(slog.NewTextHandler(log, nil))}), nil)
		o := call(t, client)
		if o.code != codes.Internal || o.message != grpclimit.ErrorMessage {
			t.Errorf("%v %q", o.code, o.message)
		}
		if !strings.Contains(log.String(), "session store down") || !strings.Contains(log.String(), check) {
			t.Errorf("log: %s", log)
		}
	})
	t.Run("a closed limiter", func(t *testing.T) {
		e := newEnv(t)
		client := unaryServer(t, e, "", grpclimit.Methods{check: {{Rule: rule, Key: grpclimit.Global()}}}, grpclimit.Options{})
		e.lim.Close()
		if o := call(t, client); o.code != codes.Unavailable || o.message != grpclimit.ErrorMessage {
			t.Errorf("%v %q", o.code, o.message)
		}
	})
	t.Run("the caller's context ended", func(t *testing.T) {
		e := newEnv(t)
		log := &bytes.Buffer{}
		ic := grpclimit.UnaryServerInterceptor(e.lim, grpclimit.Methods{check: {{Rule: rule, Key: grpclimit.Global()}}},
			grpclimit.Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := ic(ctx, nil, &grpc.UnaryServerInfo{FullMethod: check}, func(context.Context, any) (any, error) {
			t.Error("handler reached")
			return nil, nil
		})
		if o := outcomeOf(t, err, nil); o.code != codes.Canceled {
			t.Errorf("%v %q", o.code, o.message)
		}
		if log.Len() > 0 {
			t.Errorf("logged: %s", log)
		}
		peek(t, e, rule, "global", 5)
	})
}

func TestDegraded(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "flash", Limit: ratelimit.PerMinute(5)}
	client := unaryServer(t, e, "", grpclimit.Methods{check: {{Rule: rule, Key: grpclimit.Global()}}},
		grpclimit.Options{DegradedHeader: true})
	if o := call(t, client); field(o.header, grpclimit.HeaderDegraded) != "" {
		t.Errorf("healthy Redis: %s %q", grpclimit.HeaderDegraded, field(o.header, grpclimit.HeaderDegraded))
	}
	e.mr.Close()
	o := call(t, client)
	if o.code != codes.OK || field(o.header, grpclimit.HeaderDegraded) != `"flash"` {
		t.Errorf("Redis down: %v, %s %q", o.code, grpclimit.HeaderDegraded, field(o.header, grpclimit.HeaderDegraded))
	}
}

// TestConcurrentCalls checks that exactly Rate of many concurrent calls
// get through.
func TestConcurrentCalls(t *testing.T) {
	e := newEnv(t)
	const rate, workers, each = 37, 16, 10
	rule := ratelimit.Rule{Name: "flash", Limit: ratelimit.PerHour(rate)}
	client := unaryServer(t, e, "", grpclimit.Methods{check: {{Rule: rule, Key: grpclimit.Global()}}}, grpclimit.Options{})
	var (
		mu     sync.Mutex
		counts = map[codes.Code]int{}
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range each {
				o := call(t, client)
				if o.code == codes.ResourceExhausted && o.retry != time.Hour {
					t.Errorf("RetryInfo %v, want 1h (one fake instant)", o.retry)
				}
				mu.Lock()
				counts[o.code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if counts[codes.OK] != rate || counts[codes.ResourceExhausted] != workers*each-rate {
		t.Errorf("%v, want %d OK and %d ResourceExhausted", counts, rate, workers*each-rate)
	}
	peek(t, e, rule, "global", 0)
}

func TestSetupMistakesFailClosed(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(5)}
	ok := []grpclimit.Policy{{Rule: rule, Key: grpclimit.Global()}}
	for _, c := range []struct {
		name    string
		lim     *ratelimit.Limiter
		methods grpclimit.Methods
		opts    grpclimit.Options
		also    error // wrapped besides ErrInvalidSetup
	}{
		{name: "nil limiter", methods: grpclimit.Methods{"*": ok}},
		{name: "no methods", lim: e.lim},
		{name: "method without a slash", lim: e.lim, methods: grpclimit.Methods{"grpc.health.v1.Health/Check": ok}},
		{name: "method without a service", lim: e.lim, methods: grpclimit.Methods{"//Check": ok}},
		{name: "method with an empty name", lim: e.lim, methods: grpclimit.Methods{"/grpc.health.v1.Health/": ok}},
		{name: "service wildcard", lim: e.lim, methods: grpclimit.Methods{"/*/Check": ok}},
		{name: "partial wildcard", lim: e.lim, methods: grpclimit.Methods{"/grpc.health.v1.Health/Ch*": ok}},
		{name: "too many slashes", lim: e.lim, methods: grpclimit.Methods{"/a/b/c": ok}},
		{name: "policy without a key", lim: e.lim, methods: grpclimit.Methods{"*": {{Rule: rule}}}},
		{name: "invalid rule", lim: e.lim, methods: grpclimit.Methods{"*": {{Rule: ratelimit.Rule{Name: "r"}, Key: grpclimit.Global()}}},
			also: ratelimit.ErrInvalidRule},
		{name: "IP with invalid options", lim: e.lim, methods: grpclimit.Methods{"*": {{Rule: rule,
			Key: grpclimit.IP(grpclimit.IPOptions{IPv6PrefixLen: 200})}}}, also: httplimit.ErrInvalidSetup},
		{name: "Identity(nil)", lim: e.lim, methods: grpclimit.Methods{"*": {{Rule: rule, Key: grpclimit.Identity(nil)}}}},
		{name: "Metadata(\"\")", lim: e.lim, methods: grpclimit.Methods{"*": {{Rule: rule, Key: grpclimit.Metadata("")}}}},
		{name: "unknown NoKey", lim: e.lim, methods: grpclimit.Methods{"*": ok}, opts: grpclimit.Options{NoKey: 7}},
		{name: "NoKeyFallback without Fallback", lim: e.lim, methods: grpclimit.Methods{"*": ok},
			opts: grpclimit.Options{NoKey: grpclimit.NoKeyFallback}},
		{name: "Fallback built wrongly", lim: e.lim, methods: grpclimit.Methods{"*": ok},
			opts: grpclimit.Options{NoKey: grpclimit.NoKeyFallback, Fallback: grpclimit.Metadata("")}},
		{name: "NoKeyCode out of range", lim: e.lim, methods: grpclimit.Methods{"*": ok}, opts: grpclimit.Options{NoKeyCode: 17}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := grpclimit.Validate(c.lim, c.methods, c.opts)
			if !errors.Is(err, grpclimit.ErrInvalidSetup) || c.also != nil && !errors.Is(err, c.also) {
				t.Fatalf("Validate: %v", err)
			}
			t.Logf("Validate: %v", err)
			log := &bytes.Buffer{}
			c.opts.Logger = slog.New(slog.NewTextHandler(log, nil))
			unary := grpclimit.UnaryServerInterceptor(c.lim, c.methods, c.opts)
			stream := grpclimit.StreamServerInterceptor(c.lim, c.methods, c.opts)
			if n := strings.Count(log.String(), "set up wrongly"); n != 2 {
				t.Errorf("logged %d setup errors, want 2:\n%s", n, log)
			}
			client := serve(t, "", unary, stream)
			if o := call(t, client); o.code != codes.Internal || o.message != grpclimit.ErrorMessage {
				t.Errorf("unary: %v %q", o.code, o.message)
			}
			s, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{})
			if err == nil {
				_, err = s.Recv()
			}
			if o := outcomeOf(t, err, nil); o.code != codes.Internal {
				t.Errorf("stream: %v %q", o.code, o.message)
			}
			if n := strings.Count(log.String(), "cannot decide on a call"); n != 2 {
				t.Errorf("logged %d failed calls, want 2:\n%s", n, log)
			}
		})
	}
	if err := grpclimit.Validate(e.lim, grpclimit.Methods{"*": ok, check: nil, "/a.B/*": ok, "/a.B/C": ok}, grpclimit.Options{}); err != nil {
		t.Errorf("Validate of a good setup: %v", err)
	}
}

// TestHeaderNames checks that the metadata keys are httplimit's fields.
func TestHeaderNames(t *testing.T) {
	for _, c := range [][2]string{
		{grpclimit.HeaderPolicy, httplimit.HeaderPolicy},
		{grpclimit.HeaderRateLimit, httplimit.HeaderRateLimit},
		{grpclimit.HeaderWarning, httplimit.HeaderWarning},
		{grpclimit.HeaderDegraded, httplimit.HeaderDegraded},
	} {
		if c[0] != strings.ToLower(c[1]) {
			t.Errorf("%q is not %q lowercased", c[0], c[1])
		}
	}
}

// TestRetryDelayNeverEarly checks, at many sub-millisecond offsets, that
// RetryInfo's delay is the limiter's RetryAfter rounded up to the next
// whole millisecond: never earlier, less than a millisecond later.
func TestRetryDelayNeverEarly(t *testing.T) {
	e := newEnv(t)
	rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerSecond(1)}
	client := unaryServer(t, e, "", grpclimit.Methods{check: {{Rule: rule, Key: grpclimit.Global()}}}, grpclimit.Options{})
	if o := call(t, client); o.code != codes.OK {
		t.Fatalf("first call: %v", o.code)
	}
	for at := 137 * time.Microsecond; at < time.Second; at += 19937 * time.Microsecond {
		e.clk.Set(epoch.Add(at))
		res, err := e.lim.Peek(context.Background(), rule, "global")
		if err != nil {
			t.Fatal(err)
		}
		o := call(t, client)
		if o.code != codes.ResourceExhausted || o.retry < res.RetryAfter || o.retry >= res.RetryAfter+time.Millisecond ||
			o.retry%time.Millisecond != 0 {
			t.Errorf("at %v: %v, RetryInfo %v for RetryAfter %v", at, o.code, o.retry, res.RetryAfter)
		}
	}
}

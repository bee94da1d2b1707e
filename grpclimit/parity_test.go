package grpclimit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"google.golang.org/grpc/codes"
)

// TestSameFieldsAsHTTP sends the same requests, at the same fake times, to
// an HTTP route limited by httplimit and to a gRPC method limited by
// grpclimit, each on a limiter of its own, and checks that both write the
// same bytes in every rate limit field, deny the same requests, and name
// the denying policy the same way in the problem body and the
// QuotaFailure. The stack has an enforced policy, one in dry run with a
// penalty, one with a penalty that warns and bans, named with '"', '%'
// and non-ASCII bytes, and one that reserves an estimate nobody settles;
// half-way through, Redis goes down.
func TestSameFieldsAsHTTP(t *testing.T) {
	site := ratelimit.Rule{Name: "site", Limit: ratelimit.PerMinute(100)}
	watch := ratelimit.Rule{Name: "watch", Limit: ratelimit.PerMinute(1), DryRun: true,
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 2, BanFor: time.Hour}}
	coupon := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(2),
		Penalty: &ratelimit.Penalty{WarnAfter: 1, BanAfter: 3, BanFor: 10 * time.Minute}}
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerHour(100)}
	names := []string{`site "all"`, "watch 50%", "coupon café", "tokens"}

	httpEnv, grpcEnv := newEnv(t), newEnv(t)
	route := httplimit.Stack(httpEnv.lim, []httplimit.Policy{
		{Name: names[0], Rule: site, Key: httplimit.Global()},
		{Name: names[1], Rule: watch, Key: httplimit.Global()},
		{Name: names[2], Rule: coupon, Key: httplimit.Global()},
		{Name: names[3], Rule: tokens, Key: httplimit.Global(), Cost: func(*http.Request) int { return 15 }},
	}, httplimit.Options{DegradedHeader: true, Logger: discard})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	client := unaryServer(t, grpcEnv, "", grpclimit.Methods{check: {
		{Name: names[0], Rule: site, Key: grpclimit.Global()},
		{Name: names[1], Rule: watch, Key: grpclimit.Global()},
		{Name: names[2], Rule: coupon, Key: grpclimit.Global()},
		{Name: names[3], Rule: tokens, Key: grpclimit.Global(), Cost: func(context.Context, string, any) int { return 15 }},
	}}, grpclimit.Options{DegradedHeader: true})

	fields := []struct{ http, grpc string }{
		{httplimit.HeaderPolicy, grpclimit.HeaderPolicy},
		{httplimit.HeaderRateLimit, grpclimit.HeaderRateLimit},
		{httplimit.HeaderWarning, grpclimit.HeaderWarning},
		{httplimit.HeaderDryRun, grpclimit.HeaderDryRun},
		{httplimit.HeaderDegraded, grpclimit.HeaderDegraded},
	}
	seen := map[string]bool{} // the fields some step sent
	denials := 0
	steps := []time.Duration{0, 1 * time.Second, 2 * time.Second, 2500 * time.Millisecond, 3 * time.Second,
		4 * time.Second, 5 * time.Minute, 10*time.Minute + 4*time.Second, 10*time.Minute + 5*time.Second,
		-1, // Redis goes down
		11 * time.Minute, 11*time.Minute + time.Second, 11*time.Minute + 2*time.Second}
	for i, at := range steps {
		if at < 0 {
			httpEnv.mr.Close()
			grpcEnv.mr.Close()
			continue
		}
		httpEnv.clk.Set(epoch.Add(at))
		grpcEnv.clk.Set(epoch.Add(at))

		w := httptest.NewRecorder()
		route.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		res := w.Result()
		o := call(t, client)
		t.Logf("step %d at %v: %d %s", i, at, res.StatusCode, res.Header)

		for _, f := range fields {
			h, g := strings.Join(res.Header.Values(f.http), " | "), field(o.header, f.grpc)
			if h != g {
				t.Errorf("step %d at %v: %s %q, gRPC %s %q", i, at, f.http, h, f.grpc, g)
			}
			if h != "" {
				seen[f.http] = true
			}
		}
		denied := res.StatusCode == http.StatusTooManyRequests
		if denied != (o.code == codes.ResourceExhausted) {
			t.Fatalf("step %d at %v: HTTP %d, gRPC %v", i, at, res.StatusCode, o.code)
		}
		if !denied {
			continue
		}
		denials++
		var problem struct {
			Violated []string `json:"violated-policies"`
		}
		if err := json.NewDecoder(res.Body).Decode(&problem); err != nil {
			t.Fatalf("step %d: problem body: %v", i, err)
		}
		quotaID, _, _ := strings.Cut(strings.TrimPrefix(o.quota, "id="), " value=")
		if len(problem.Violated) != 1 || problem.Violated[0] != quotaID {
			t.Errorf("step %d at %v: violated-policies %q, QuotaId %q", i, at, problem.Violated, quotaID)
		}
	}
	// The steps must have exercised every field, and denials.
	for _, f := range fields {
		if !seen[f.http] {
			t.Errorf("no step sent %s: the test proves nothing about it", f.http)
		}
	}
	if denials < 3 {
		t.Errorf("%d denials, want at least 3", denials)
	}
}

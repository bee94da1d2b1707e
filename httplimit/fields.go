package httplimit

import (
	"net/http"
	"strconv"

	"github.com/ratelimit-go/ratelimit/policy"
)

// Names of the response header fields the middleware writes. The first
// five are package policy's fields, whose values policy.Format writes: the
// gRPC interceptors send the same values.
const (
	// HeaderPolicy is the RateLimit-Policy field of
	// draft-ietf-httpapi-ratelimit-headers-10: one item per enforced policy
	// asked, `"coupon";q=3;w=60`, where q is the quota enforced (the
	// degraded share of it while Redis is down, see
	// ratelimit.Options.DegradedShare) and w the window in seconds, rounded
	// up. A policy in dry run is not listed.
	HeaderPolicy = policy.FieldPolicy
	// HeaderRateLimit is the RateLimit field of the same draft: one item
	// per enforced policy asked, `"coupon";r=2;t=60`, where r is the quota
	// left and t is in seconds, rounded up: on a denial, until the request
	// could pass (at least 1); otherwise, until the window is empty and the
	// whole quota is back (no t when the window holds nothing). A policy
	// in dry run is not listed.
	HeaderRateLimit = policy.FieldRateLimit
	// HeaderWarning is set on a denial that carries a penalty's warning
	// (ratelimit.Result.Warned): `"coupon";violations=3;ban-after=5`, the
	// violations remembered and the count that bans. A client that sees it
	// should slow down before it is banned. A policy in dry run is never
	// listed: it warns nobody.
	HeaderWarning = policy.FieldWarning
	// HeaderDegraded, with Options.DegradedHeader, lists the policies
	// decided without Redis (ratelimit.Result.Degraded): `"coupon"`.
	HeaderDegraded = policy.FieldDegraded
	// HeaderDryRun lists the policies in dry run (ratelimit.Rule.DryRun)
	// that would have denied the request, with the seconds (rounded up, at
	// least 1) until it could have passed, and the flag banned when the
	// denial would have been a ban's: `"coupon";t=58`,
	// `"coupon";t=600;banned`. The request is served all the same; a team
	// watches for the field before it enforces the rule.
	HeaderDryRun = policy.FieldDryRun
	// HeaderRetryAfter is set on denials, in delay-seconds rounded up (at
	// least 1), equal to the denying policy's t.
	HeaderRetryAfter = "Retry-After"
	// HeaderLegacyLimit, HeaderLegacyRemaining and HeaderLegacyReset are
	// the pre-standard fields written with Options.LegacyHeaders, for the
	// one enforced policy closest to denying (the denying one on a
	// denial): its quota, the quota left, and the seconds until more is
	// available. A policy in dry run is never the one.
	HeaderLegacyLimit     = "X-RateLimit-Limit"
	HeaderLegacyRemaining = "X-RateLimit-Remaining"
	HeaderLegacyReset     = "X-RateLimit-Reset"
)

// writeFields sets the rate limit fields of the outcomes of one request.
// The standard fields are added, not set, so that the fields of nested
// middlewares form one list.
func writeFields(h http.Header, outcomes []policy.Outcome, opts *Options) {
	f := policy.Format(outcomes)
	for _, kv := range [...]struct {
		key, value string
		send       bool
	}{
		{HeaderPolicy, f.Policy, true},
		{HeaderRateLimit, f.RateLimit, true},
		{HeaderWarning, f.Warning, true},
		{HeaderDegraded, f.Degraded, opts.DegradedHeader},
		{HeaderDryRun, f.DryRun, true},
	} {
		if kv.send && kv.value != "" {
			h.Add(kv.key, kv.value)
		}
	}
	if d, denied := policy.Denial(outcomes); denied {
		h.Set(HeaderRetryAfter, strconv.FormatInt(d.Seconds(), 10))
	}
	if opts.LegacyHeaders {
		if c := closest(outcomes); c != nil {
			h.Set(HeaderLegacyLimit, strconv.Itoa(c.Result.Limit))
			h.Set(HeaderLegacyRemaining, strconv.Itoa(c.Result.Remaining))
			h.Set(HeaderLegacyReset, strconv.FormatInt(c.Seconds(), 10))
		}
	}
}

// closest returns the enforced outcome nearest to denying: the denial if
// there is one, otherwise the first with the least quota left; nil when
// every policy asked is in dry run.
func closest(outcomes []policy.Outcome) *policy.Outcome {
	if d, denied := policy.Denial(outcomes); denied {
		return d
	}
	var c *policy.Outcome
	for i := range outcomes {
		o := &outcomes[i]
		if !o.Rule.DryRun && (c == nil || o.Result.Remaining < c.Result.Remaining) {
			c = o
		}
	}
	return c
}

package grpclimit

import (
	"github.com/ratelimit-go/ratelimit/policy"
	"google.golang.org/grpc/metadata"
)

// Names of the response header metadata the interceptors send: package
// policy's fields, lowercased as gRPC metadata keys are, with the values
// that httplimit writes in its header fields, byte for byte (policy.Format
// writes both), so that one client library can read both.
const (
	// HeaderPolicy is the RateLimit-Policy field of
	// draft-ietf-httpapi-ratelimit-headers-10: one item per enforced policy
	// asked, `"coupon";q=3;w=60`, where q is the quota enforced (the degraded
	// share of it while Redis is down, see ratelimit.Options.DegradedShare)
	// and w the window in seconds, rounded up. A policy in dry run is not
	// listed.
	HeaderPolicy = "ratelimit-policy"
	// HeaderRateLimit is the RateLimit field of the same draft: one item per
	// enforced policy asked, `"coupon";r=2;t=60`, where r is the quota left
	// and t is in seconds, rounded up: on a denial, until the call could
	// pass (at least 1); otherwise, until the window is empty and the whole
	// quota is back (no t when the window holds nothing). A policy in dry
	// run is not listed.
	HeaderRateLimit = "ratelimit"
	// HeaderWarning is sent with a denial that carries a penalty's warning
	// (ratelimit.Result.Warned): `"coupon";violations=3;ban-after=5`, the
	// violations remembered and the count that bans. A client that sees it
	// should slow down before it is banned. A policy in dry run is never
	// listed: it warns nobody.
	HeaderWarning = "ratelimit-warning"
	// HeaderDegraded, with Options.DegradedHeader, lists the policies
	// decided without Redis (ratelimit.Result.Degraded): `"coupon"`.
	HeaderDegraded = "ratelimit-degraded"
	// HeaderDryRun lists the policies in dry run (ratelimit.Rule.DryRun)
	// that would have denied the call, which went through all the same:
	// `"coupon";t=30`, with t the seconds (rounded up, at least 1) the
	// caller would have been told to wait, and the flag banned when the
	// denial would have been a ban's: `"coupon";t=600;banned`.
	HeaderDryRun = "ratelimit-dry-run"
)

// fields returns the header metadata of the outcomes of one call.
func fields(outcomes []policy.Outcome, degradedHeader bool) metadata.MD {
	f := policy.Format(outcomes)
	md := make(metadata.MD, 2)
	for _, kv := range [...]struct {
		key, value string
		send       bool
	}{
		{HeaderPolicy, f.Policy, true},
		{HeaderRateLimit, f.RateLimit, true},
		{HeaderWarning, f.Warning, true},
		{HeaderDegraded, f.Degraded, degradedHeader},
		{HeaderDryRun, f.DryRun, true},
	} {
		if kv.send && kv.value != "" {
			md[kv.key] = []string{kv.value}
		}
	}
	if len(md) == 0 {
		return nil
	}
	return md
}

package httplimit

import (
	"net/http"
	"strconv"

	"github.com/ratelimit-go/ratelimit/internal/sfv"
)

// Names of the response header fields the middleware writes.
const (
	// HeaderPolicy is the RateLimit-Policy field of
	// draft-ietf-httpapi-ratelimit-headers-10: one item per policy
	// evaluated, `"coupon";q=3;w=60`, where q is the quota enforced (the
	// degraded share of it while Redis is down, see
	// ratelimit.Options.DegradedShare) and w the window in seconds, rounded
	// up.
	HeaderPolicy = "RateLimit-Policy"
	// HeaderRateLimit is the RateLimit field of the same draft: one item
	// per policy evaluated, `"coupon";r=2;t=60`, where r is the quota left
	// and t is in seconds, rounded up: on a denial, until the request could
	// pass; otherwise, until the window is empty and the whole quota is
	// back (no t when the window holds nothing).
	HeaderRateLimit = "RateLimit"
	// HeaderRetryAfter is set on denials, in delay-seconds rounded up (at
	// least 1), equal to the denying policy's t.
	HeaderRetryAfter = "Retry-After"
	// HeaderWarning is set on a denial that carries a penalty's warning
	// (ratelimit.Result.Warned): `"coupon";violations=3;ban-after=5`, the
	// violations remembered and the count that bans. A client that sees it
	// should slow down before it is banned.
	HeaderWarning = "RateLimit-Warning"
	// HeaderDegraded, with Options.DegradedHeader, lists the policies
	// decided without Redis (ratelimit.Result.Degraded): `"coupon"`.
	HeaderDegraded = "RateLimit-Degraded"
	// HeaderDryRun lists the policies in dry run (ratelimit.Rule.DryRun)
	// that would have denied the request, with the seconds until it could
	// have passed: `"coupon";t=58`. The request is served all the same; a
	// team watches for the field before it enforces the rule.
	HeaderDryRun = "RateLimit-Dry-Run"
	// HeaderLegacyLimit, HeaderLegacyRemaining and HeaderLegacyReset are
	// the pre-standard fields written with Options.LegacyHeaders, for the
	// one policy closest to denying (the denying one on a denial): its
	// quota, the quota left, and the seconds until more is available.
	HeaderLegacyLimit     = "X-RateLimit-Limit"
	HeaderLegacyRemaining = "X-RateLimit-Remaining"
	HeaderLegacyReset     = "X-RateLimit-Reset"
)

// resetSeconds is the t parameter of d: for a denial the seconds until the
// same request could pass, otherwise until the window is empty, when the
// whole quota is back (0: nothing recorded, no t).
func (d *Decision) resetSeconds() int64 {
	if !d.Result.Allowed {
		return max(1, sfv.CeilSeconds(d.Result.RetryAfter))
	}
	return sfv.CeilSeconds(d.Result.ResetAfter)
}

// writeFields sets the rate limit fields of the decisions made for one
// request. The standard fields are added, not set, so that the fields of
// nested middlewares form one list.
func writeFields(h http.Header, ds []Decision, opts *Options) {
	var policy, limit, warn, degraded, dry []byte
	for i := range ds {
		d := &ds[i]
		if i > 0 {
			policy = append(policy, ", "...)
			limit = append(limit, ", "...)
		}
		policy = sfv.AppendString(policy, d.Policy)
		policy = append(policy, ";q="...)
		policy = strconv.AppendInt(policy, int64(d.Result.Limit), 10)
		if w := sfv.CeilSeconds(d.Rule.Limit.Window); w > 0 {
			policy = append(policy, ";w="...)
			policy = strconv.AppendInt(policy, w, 10)
		}
		limit = sfv.AppendString(limit, d.Policy)
		limit = append(limit, ";r="...)
		limit = strconv.AppendInt(limit, int64(d.Result.Remaining), 10)
		if t := d.resetSeconds(); t > 0 {
			limit = append(limit, ";t="...)
			limit = strconv.AppendInt(limit, t, 10)
		}
		if d.Result.Warned && d.Rule.Penalty != nil {
			if len(warn) > 0 {
				warn = append(warn, ", "...)
			}
			warn = sfv.AppendString(warn, d.Policy)
			warn = append(warn, ";violations="...)
			warn = strconv.AppendInt(warn, int64(d.Result.Violations), 10)
			warn = append(warn, ";ban-after="...)
			warn = strconv.AppendInt(warn, int64(d.Rule.Penalty.BanAfter), 10)
		}
		if d.Result.DryRun {
			if len(dry) > 0 {
				dry = append(dry, ", "...)
			}
			dry = sfv.AppendString(dry, d.Policy)
			dry = append(dry, ";t="...)
			dry = strconv.AppendInt(dry, sfv.CeilSeconds(d.Result.RetryAfter), 10)
		}
		if d.Result.Degraded && opts.DegradedHeader {
			if len(degraded) > 0 {
				degraded = append(degraded, ", "...)
			}
			degraded = sfv.AppendString(degraded, d.Policy)
		}
	}
	h.Add(HeaderPolicy, string(policy))
	h.Add(HeaderRateLimit, string(limit))
	if len(warn) > 0 {
		h.Add(HeaderWarning, string(warn))
	}
	if len(degraded) > 0 {
		h.Add(HeaderDegraded, string(degraded))
	}
	if len(dry) > 0 {
		h.Add(HeaderDryRun, string(dry))
	}
	last := &ds[len(ds)-1]
	if !last.Result.Allowed {
		h.Set(HeaderRetryAfter, strconv.FormatInt(last.resetSeconds(), 10))
	}
	if opts.LegacyHeaders {
		c := closest(ds)
		h.Set(HeaderLegacyLimit, strconv.Itoa(c.Result.Limit))
		h.Set(HeaderLegacyRemaining, strconv.Itoa(c.Result.Remaining))
		h.Set(HeaderLegacyReset, strconv.FormatInt(c.resetSeconds(), 10))
	}
}

// closest returns the decision nearest to denying: the denial if there is
// one, otherwise the first with the least quota left.
func closest(ds []Decision) *Decision {
	if last := &ds[len(ds)-1]; !last.Result.Allowed {
		return last
	}
	c := &ds[0]
	for i := 1; i < len(ds); i++ {
		if ds[i].Result.Remaining < c.Result.Remaining {
			c = &ds[i]
		}
	}
	return c
}

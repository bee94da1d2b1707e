package grpclimit

import (
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/sfv"
	"google.golang.org/grpc/metadata"
)

// Names of the response header metadata the interceptors send. The first
// four are httplimit's header fields, lowercased as gRPC metadata keys are,
// with the same Structured Field values (RFC 8941), so that one client
// library can read both.
const (
	// HeaderPolicy is the RateLimit-Policy field of
	// draft-ietf-httpapi-ratelimit-headers-10: one item per policy asked,
	// `"coupon";q=3;w=60`, where q is the quota enforced (the degraded share
	// of it while Redis is down, see ratelimit.Options.DegradedShare) and w
	// the window in seconds, rounded up.
	HeaderPolicy = "ratelimit-policy"
	// HeaderRateLimit is the RateLimit field of the same draft: one item per
	// policy asked, `"coupon";r=2;t=60`, where r is the quota left and t is
	// in seconds, rounded up: on a denial, until the call could pass;
	// otherwise, until the window is empty and the whole quota is back (no t
	// when the window holds nothing).
	HeaderRateLimit = "ratelimit"
	// HeaderWarning is sent with a denial that carries a penalty's warning
	// (ratelimit.Result.Warned): `"coupon";violations=3;ban-after=5`, the
	// violations remembered and the count that bans. A client that sees it
	// should slow down before it is banned. A policy in dry run is listed
	// in HeaderDryRun instead.
	HeaderWarning = "ratelimit-warning"
	// HeaderDegraded, with Options.DegradedHeader, lists the policies
	// decided without Redis (ratelimit.Result.Degraded): `"coupon"`.
	HeaderDegraded = "ratelimit-degraded"
	// HeaderDryRun lists the policies in dry run (ratelimit.Rule.DryRun)
	// that would have denied the call, which went through all the same:
	// `"coupon";t=30`, with t the seconds (rounded up) the caller would have
	// been told to wait, and the flag banned when the denial would have been
	// a ban's: `"coupon";t=600;banned`.
	HeaderDryRun = "ratelimit-dry-run"
)

// decision is the outcome of one policy for one call.
type decision struct {
	policy *Policy
	res    ratelimit.Result
}

// retrySeconds is the t of a denial: the seconds until the call could
// pass, rounded up, at least 1.
func retrySeconds(d time.Duration) int64 { return max(1, sfv.CeilSeconds(d)) }

// resetSeconds is the t parameter of the RateLimit field: for a denial the
// seconds until the same call could pass, otherwise until the window is
// empty, when the whole quota is back (0: nothing recorded, no t).
func (d *decision) resetSeconds() int64 {
	if !d.res.Allowed {
		return retrySeconds(d.res.RetryAfter)
	}
	return sfv.CeilSeconds(d.res.ResetAfter)
}

// list is one Structured Field list being built. Its methods return the
// longer list, as append does, so that a list can live on the stack.
type list []byte

// item starts an item: name as an sf-string.
func (l list) item(name string) list {
	if len(l) > 0 {
		l = append(l, ", "...)
	}
	return sfv.AppendString(l, name)
}

// param adds the parameter ;key=v to the last item.
func (l list) param(key string, v int64) list {
	l = append(l, ';')
	l = append(l, key...)
	l = append(l, '=')
	return strconv.AppendInt(l, v, 10)
}

// flag adds the boolean parameter ;key (true) to the last item.
func (l list) flag(key string) list {
	l = append(l, ';')
	return append(l, key...)
}

// fields returns the header metadata of the decisions made for one call.
func fields(ds []decision, degradedHeader bool) metadata.MD {
	// The two fields of every call are built on the stack and copied into
	// one string: a call costs three allocations for them.
	var policyBuf, limitBuf [128]byte
	policy, limit := list(policyBuf[:0]), list(limitBuf[:0])
	var warn, degraded, dry list
	for i := range ds {
		d := &ds[i]
		name := d.policy.Name
		policy = policy.item(name)
		policy = policy.param("q", int64(d.res.Limit))
		if w := sfv.CeilSeconds(d.policy.Rule.Limit.Window); w > 0 {
			policy = policy.param("w", w)
		}
		limit = limit.item(name)
		limit = limit.param("r", int64(d.res.Remaining))
		if t := d.resetSeconds(); t > 0 {
			limit = limit.param("t", t)
		}
		if d.res.DryRun {
			dry = dry.item(name)
			dry = dry.param("t", retrySeconds(d.res.RetryAfter))
			if d.res.Banned {
				dry = dry.flag("banned")
			}
		} else if d.res.Warned && d.policy.Rule.Penalty != nil {
			warn = warn.item(name)
			warn = warn.param("violations", int64(d.res.Violations))
			warn = warn.param("ban-after", int64(d.policy.Rule.Penalty.BanAfter))
		}
		if d.res.Degraded && degradedHeader {
			degraded = degraded.item(name)
		}
	}
	both := string(append(policy, limit...))
	vals := []string{both[:len(policy)], both[len(policy):]}
	md := metadata.MD{
		HeaderPolicy:    vals[:1:1],
		HeaderRateLimit: vals[1:],
	}
	for _, f := range []struct {
		key string
		l   list
	}{{HeaderWarning, warn}, {HeaderDegraded, degraded}, {HeaderDryRun, dry}} {
		if len(f.l) > 0 {
			md[f.key] = []string{string(f.l)}
		}
	}
	return md
}

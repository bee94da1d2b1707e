package policy

import (
	"strconv"
	"time"
)

// Names of the fields Format writes, as HTTP header fields. gRPC metadata
// keys are the same names in lower case.
const (
	// FieldPolicy is the RateLimit-Policy field of
	// draft-ietf-httpapi-ratelimit-headers-10: one item per enforced policy
	// asked, `"coupon";q=3;w=60`.
	FieldPolicy = "RateLimit-Policy"
	// FieldRateLimit is the RateLimit field of the same draft: one item per
	// enforced policy asked, `"coupon";r=2;t=60`.
	FieldRateLimit = "RateLimit"
	// FieldWarning lists the enforced policies whose denial carries a
	// penalty's warning: `"coupon";violations=3;ban-after=5`.
	FieldWarning = "RateLimit-Warning"
	// FieldDryRun lists the policies in dry run that would have denied the
	// request: `"coupon";t=58`, or `"coupon";t=600;banned` for a ban's.
	FieldDryRun = "RateLimit-Dry-Run"
	// FieldDegraded lists the policies decided without Redis: `"coupon"`.
	FieldDegraded = "RateLimit-Degraded"
)

// Fields are the values of the fields that tell a client about the outcomes
// of one request (see the package documentation). Each is a Structured
// Field list; "" means the field is not sent.
type Fields struct {
	// Policy is the value of FieldPolicy.
	Policy string
	// RateLimit is the value of FieldRateLimit.
	RateLimit string
	// Warning is the value of FieldWarning.
	Warning string
	// DryRun is the value of FieldDryRun.
	DryRun string
	// Degraded is the value of FieldDegraded. The adapters send it only
	// when asked to: it is for debugging.
	Degraded string
}

// Format returns the fields of the outcomes of one request, as Walk
// returned them. Policies in dry run appear only in DryRun (when they would
// have denied) and Degraded, never in Policy, RateLimit or Warning: they
// never lower what a client is told.
func Format(outcomes []Outcome) Fields {
	var policyBuf, limitBuf [128]byte
	policy, limit := list(policyBuf[:0]), list(limitBuf[:0])
	var warn, dry, degraded list
	for i := range outcomes {
		o := &outcomes[i]
		if o.Result.Degraded {
			degraded = degraded.item(o.Name)
		}
		if o.Rule.DryRun {
			if o.Result.DryRun {
				dry = dry.item(o.Name).param("t", o.Seconds())
				if o.Result.Banned {
					dry = dry.flag("banned")
				}
			}
			continue
		}
		policy = policy.item(o.Name).param("q", int64(o.Result.Limit))
		if w := ceilSeconds(o.window()); w > 0 {
			policy = policy.param("w", w)
		}
		limit = limit.item(o.Name).param("r", int64(o.Result.Remaining))
		if t := o.Seconds(); t > 0 {
			limit = limit.param("t", t)
		}
		if o.Result.Warned && o.Rule.Penalty != nil {
			warn = warn.item(o.Name).
				param("violations", int64(o.Result.Violations)).
				param("ban-after", int64(o.Rule.Penalty.BanAfter))
		}
	}
	return Fields{
		Policy:    string(policy),
		RateLimit: string(limit),
		Warning:   string(warn),
		DryRun:    string(dry),
		Degraded:  string(degraded),
	}
}

// Encode returns name as the fields carry it: the value of its sf-string
// (RFC 8941, 3.3.3). An sf-string holds printable ASCII only, so every
// other byte, and '%' itself, is written as %XX (upper-case hex): "50%"
// is "50%25", "é" is "%C3%A9". Write the same form wherever a client must
// match a policy's name with the fields, as the adapters do in a problem
// body's violated-policies and in a QuotaFailure's quota id. Encode
// returns name itself when it holds nothing to encode.
func Encode(name string) string {
	for i := 0; i < len(name); i++ {
		if needsPercent(name[i]) {
			return string(appendEncoded(make([]byte, 0, len(name)+8), name))
		}
	}
	return name
}

// needsPercent reports whether c is written as %XX in a policy's name.
func needsPercent(c byte) bool { return c < 0x20 || c > 0x7e || c == '%' }

// appendEncoded appends Encode(s) to b.
func appendEncoded(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		if c := s[i]; needsPercent(c) {
			b = append(b, '%', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, c)
		}
	}
	return b
}

// appendString appends name as an sf-string: Encode(name), quoted, with
// '"' and '\' escaped.
func appendString(b []byte, name string) []byte {
	b = append(b, '"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case needsPercent(c):
			b = appendEncoded(b, name[i:i+1])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// list is one Structured Field list being built. Its methods return the
// longer list, as append does, so that a list can live on the stack.
type list []byte

// item starts an item named name.
func (l list) item(name string) list {
	if len(l) > 0 {
		l = append(l, ", "...)
	}
	return appendString(l, name)
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

// window is o's w: its Window, or what Walk would have set.
func (o *Outcome) window() time.Duration {
	if o.Window != 0 {
		return o.Window
	}
	return windowAt(o.Rule.Limit, time.Now())
}

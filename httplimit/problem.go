package httplimit

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/ratelimit-go/ratelimit/policy"
)

// Problem types (RFC 9457) of the response bodies the middleware writes.
// The first two are those draft-ietf-httpapi-ratelimit-headers-10 defines.
const (
	// ProblemQuotaExceeded is the type of a denial: the request would
	// exceed a policy's quota.
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemAbnormalUsage is the type of a denial of a banned key: the
	// client broke a policy so often that its penalty banned it.
	ProblemAbnormalUsage = "https://iana.org/assignments/http-problem-types#abnormal-usage-detected"
	// ProblemConcurrencyExceeded is the type of a denial by a policy
	// with a Concurrency rule: as many of the client's requests as the
	// policy allows are in progress. The status is 429, as for a quota:
	// the client's own cap is reached, not the server's capacity (which
	// 503 would say), and the client may retry once one of its requests
	// has finished.
	ProblemConcurrencyExceeded = "https://pkg.go.dev/github.com/ratelimit-go/ratelimit/httplimit#ProblemConcurrencyExceeded"
	// ProblemNoKey is the type of the refusal of a request that a KeyFunc
	// could not key (see NoKeyDeny).
	ProblemNoKey = "https://pkg.go.dev/github.com/ratelimit-go/ratelimit/httplimit#ErrNoKey"
)

// Default texts of the problem bodies' detail member.
const (
	// DefaultMessage is the detail of a denial when Options.Message is "".
	DefaultMessage = "Too many requests, try again later."
	// DefaultBanMessage is the detail of a ban when Options.BanMessage is "".
	DefaultBanMessage = "Too many requests: this client is blocked for a while, try again later."
	// DefaultConcurrencyMessage is the detail of a concurrency policy's
	// denial when Options.ConcurrencyMessage is "".
	DefaultConcurrencyMessage = "Too many requests in progress: try again when one has finished."
)

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies is the extension member of the draft's problem
	// types: the names of the policies that denied the request, as the
	// RateLimit fields name them (policy.Encode).
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// writeProblem writes p as an application/problem+json response.
func writeProblem(w http.ResponseWriter, p problem) {
	body, _ := json.Marshal(p) // strings and ints only: cannot fail
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	w.Write(body)
}

// denialProblem is the body of the default denial.
func denialProblem(d *policy.Outcome, opts *Options) problem {
	if d.Result.Banned {
		return problem{
			Type:             ProblemAbnormalUsage,
			Title:            "Request not satisfied due to detection of abnormal request pattern",
			Status:           http.StatusTooManyRequests,
			Detail:           cmp.Or(opts.BanMessage, DefaultBanMessage),
			ViolatedPolicies: []string{policy.Encode(d.Name)},
		}
	}
	if d.Rule.Leases() {
		return problem{
			Type:             ProblemConcurrencyExceeded,
			Title:            "Too many requests of this client are in progress",
			Status:           http.StatusTooManyRequests,
			Detail:           cmp.Or(opts.ConcurrencyMessage, DefaultConcurrencyMessage),
			ViolatedPolicies: []string{policy.Encode(d.Name)},
		}
	}
	return problem{
		Type:             ProblemQuotaExceeded,
		Title:            "Request cannot be satisfied as assigned quota has been exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           cmp.Or(opts.Message, DefaultMessage),
		ViolatedPolicies: []string{policy.Encode(d.Name)},
	}
}

func noKeyProblem(status int) problem {
	return problem{
		Type:   ProblemNoKey,
		Title:  "Request does not identify its caller",
		Status: status,
		Detail: "This route is rate limited per caller, and the request does not say who is calling.",
	}
}

func errorProblem() problem {
	return problem{
		Type:   "about:blank",
		Title:  "Internal Server Error",
		Status: http.StatusInternalServerError,
		Detail: "The rate limiter could not decide on this request.",
	}
}

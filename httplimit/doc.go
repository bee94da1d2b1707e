// Package httplimit limits the requests of net/http handlers with a
// [ratelimit.Limiter], without touching the handlers: a route is wrapped
// in middleware that names its rule and how requests are keyed, the way an
// annotation would declare it.
//
//	lim, _ := ratelimit.New(client, ratelimit.Options{})
//	perUser := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
//	mux.Handle("POST /coupons/claim", httplimit.Limit(lim, perUser, httplimit.User(userID), httplimit.Options{})(claim))
//
// # Keys
//
// A [KeyFunc] names the bucket a request counts in under a rule. [Global]
// puts every caller of a route into one bucket (a flash sale that must not
// overload the shop); [User] keys by the user the service's authentication
// found (coupon claims per user); [IP] keys by the client's address
// (merchant pages per IP, against scrapers); [Header] keys by a header's
// value. A request a KeyFunc cannot key, such as an anonymous request on a
// per-user route, is refused by default, never counted in a bucket that all
// such requests share; [Options].NoKey can let it through or key it by a
// fallback instead.
//
// # Client addresses behind proxies
//
// X-Forwarded-For and Forwarded are written by whoever sends the request,
// so by default [IP] ignores them and uses the connection's peer. Behind
// your own reverse proxies, list their addresses in
// [IPOptions].TrustedProxies: the headers are then read from the right,
// one trusted hop at a time, and the client is the first address that is
// not one of your proxies. Whatever a client writes into the header itself
// stays to the left of that address and is never reached. IPv6 clients are
// grouped by their /64 (configurable), since one subscriber holds a whole
// /64 and could otherwise rotate addresses.
//
// # Several rules on one route
//
// [Stack] applies several policies ([Policy]: a rule and a KeyFunc) to a
// route: a request must pass all of them. They are asked in order (those
// with a Cost first, see below), by [policy.Walk], with the semantics of
// [ratelimit.Limiter.AllowAll]: the first denial stops the walk, later
// policies record nothing, and the events the earlier ones recorded are
// taken back, so a denied request costs no policy anything (best effort
// while Redis is down: events recorded on Redis then stay). The gRPC interceptors of module grpclimit
// walk their policies the same way.
//
// # Costs known after the work
//
// A route whose requests cost what only their answer says, such as a
// language model's completion counted in tokens, limits that cost with a
// policy that has a Cost: a function of the request that estimates it
// (its max_tokens). The middleware reserves the estimate
// ([ratelimit.Limiter.Reserve]), and the handler settles the real cost
// through the request's context with [Settle]: what was not used is given
// back at once, the extra is charged, even past the limit, and the user's
// next requests wait for it. A reservation the handler does not settle
// stands: the estimate is the request's cost, and nothing settles it when
// the request ends. Reserving policies are asked before the other rate
// policies, so that a later denial cancels their reservations, and the
// RateLimit fields report what the Reserve answered.
//
//	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(10000)}
//	complete := httplimit.Policy{Rule: tokens, Key: httplimit.User(userID), Cost: maxTokens}
//	mux.Handle("POST /complete", httplimit.Stack(lim, []httplimit.Policy{complete}, httplimit.Options{})(h))
//	// in h, once the answer is written:
//	httplimit.Settle(r.Context(), used)
//
// [Settle] returns an error wrapping [ratelimit.ErrNoReservation] when
// the middleware reserved nothing for the request, and one wrapping
// [ratelimit.ErrSettled] when the request was settled before. An estimate
// outside 1..the rule's Rate goes to [Options].OnError with an error
// wrapping [ratelimit.ErrInvalidN].
//
// # Responses
//
// Every limited response carries the RateLimit-Policy and RateLimit fields
// of draft-ietf-httpapi-ratelimit-headers-10 (whose fields -11 keeps), as
// Structured Field lists with one item per enforced policy asked, named by
// the policy's name as an sf-string ([policy.Encode]); [policy.Format]
// writes them, and grpclimit sends the same bytes as metadata:
//
//	RateLimit-Policy: "coupon";q=3;w=60
//	RateLimit: "coupon";r=2;t=60
//
// q is the quota, w the window in seconds (rounded up), r the quota left.
// t is in whole seconds, rounded up: on a denial, until the request could
// pass (at least 1); otherwise, until the window is empty and the whole
// quota is back.
// A denial is a 429 (Too Many Requests) with Retry-After in delay-seconds,
// rounded up so that it never names a time before the request could pass,
// and an RFC 9457 application/problem+json body of the draft's type
// [ProblemQuotaExceeded], or [ProblemAbnormalUsage] while a penalty bans
// the client, whose Retry-After is then the ban's remaining time (longer
// if the window would still be full when the ban ends). A denial
// that carries a penalty's warning adds [HeaderWarning]; the body's
// violated-policies names the denying policy as the fields do.
// [Options].OnDenied replaces the body; [Options].OnError answers when the
// limiter fails (500 by default). Decisions made without Redis are served
// like the others ([Options].DegradedHeader marks them).
//
// # Dry run
//
// A policy in dry run ([ratelimit.Rule].DryRun) never denies and never
// lowers what a client is told: it is left out of RateLimit-Policy,
// RateLimit, the legacy X-RateLimit fields and [HeaderWarning], so a rule
// nobody enforces is never advertised with r=0 and obedient clients never
// back off from it. When enforcing it would have denied, [HeaderDryRun]
// names it, with the t it would have sent and the flag banned for a ban:
//
//	RateLimit-Dry-Run: "new-rule";t=45
//
// # Rules from a file
//
// A [Policy] may take its rule from a source of rules ([policy.RuleSource])
// instead of holding it: Rules and RuleName name it, and every request is
// limited by the rule the source has for its key at that moment. A
// *rules.Watcher (module github.com/ratelimit-go/ratelimit/rules) is such a
// source: it reloads a YAML file while the server runs, so a changed limit,
// a key's override or a rule put in dry run applies from the next request.
// An override's key is the key as the policy's [KeyFunc] writes it
// ("user:alice" for [User]).
//
//	w, _ := rules.Watch("rules.yaml", rules.WatchOptions{Require: []string{"shop:coupon"}})
//	claim := httplimit.Policy{Rules: w, RuleName: "shop:coupon", Key: httplimit.User(userID)}
//	mux.Handle("POST /coupons/claim", httplimit.Stack(lim, []httplimit.Policy{claim}, httplimit.Options{})(h))
//
// # Startup checks
//
// [Validate] reports a route set up wrongly, the mistake [Stack] would
// otherwise log once and answer every request of the route with; for a
// policy with Rules, that its source has a valid rule named RuleName.
//
// # Concurrency
//
// The middleware keeps no state of its own: it is safe for concurrent
// requests, as the Limiter is.
package httplimit

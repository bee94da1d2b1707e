// Package policy walks the policies that limit one request and writes the
// fields that tell the client about them. It is the part of the HTTP and
// gRPC adapters (package httplimit and module grpclimit) that does not
// depend on the transport, so both decide a request the same way and send
// the same bytes for the same decisions. Use it to limit another transport
// the same way.
//
// # The walk
//
// An [Entry] is one policy applied to one request: a [ratelimit.Rule], the
// key the request counts under, and the name clients see. [Walk] asks a
// [ratelimit.Limiter] about a request's entries in order, with the
// semantics of [ratelimit.Limiter.AllowAll]: the request is allowed only if
// every policy allows it; the first denial stops the walk (later policies
// are not asked), and the events the earlier policies recorded are taken
// back, so a denied request costs no policy anything. Taking back is best
// effort: while Redis cannot be used, events the earlier policies recorded
// on Redis stay recorded. A policy in dry run ([ratelimit.Rule.DryRun])
// never denies. Walk returns an [Outcome] per policy asked.
//
// # Reservations
//
// A policy may reserve instead ([Entry].Reserve): for a request whose real
// cost is known only once it is served, such as the tokens of a language
// model's answer, it takes an estimate, its Cost, with
// [ratelimit.Limiter.Reserve], and the request's handler settles it at
// the real cost once known ([Settle]): what was not used is given back,
// the extra is charged, even past the limit. Walk asks the reserving
// policies first, so that a later denial cancels their reservations and
// a denied request costs them nothing either. An adapter hands the
// reservations of an allowed request to its handler in the request's
// context ([WithReservations]); [Settle] settles every one of them,
// [Reservations] lists them. A reservation nobody settles stands as
// reserved: nothing settles it when the request ends. The fields report
// what the Reserve answered.
//
// # The fields
//
// [Format] writes the outcomes of one request as the fields of
// draft-ietf-httpapi-ratelimit-headers-10 (whose fields -11 keeps) and
// three of this library's own, each a Structured Field list (RFC 8941)
// with one item per policy, named by the policy's name as an sf-string
// ([Encode]):
//
//	RateLimit-Policy:   "coupon";q=3;w=60
//	RateLimit:          "coupon";r=0;t=57
//	RateLimit-Warning:  "coupon";violations=2;ban-after=3
//	RateLimit-Dry-Run:  "new-rule";t=45, "newer-rule";t=600;banned
//	RateLimit-Degraded: "coupon"
//
// RateLimit-Policy and RateLimit list the enforced policies asked: q is the
// quota enforced (the degraded share of it while Redis is down, see
// [ratelimit.Options].DegradedShare; a [ratelimit.GCRA] rule's Burst), w the
// window in seconds (a [ratelimit.CalendarQuota]'s current period: 82800,
// 86400 or 90000 for a day), r the quota left. t is in whole seconds, rounded up: on a denial, until the request
// could pass (at least 1); otherwise until the window is empty and the
// whole quota is back (no t for an empty window). RateLimit-Warning lists
// the enforced policies whose denial carries a penalty's warning
// ([ratelimit.Result].Warned): the violations remembered and the count that
// bans. RateLimit-Degraded lists the policies decided without Redis.
//
// # Dry run
//
// A policy in dry run never lowers what a client is told: it is left out
// of RateLimit-Policy, RateLimit and RateLimit-Warning, so that a rule
// nobody enforces is never advertised with r=0 and obedient clients never
// back off from it. When enforcing it would have denied the request, it is
// listed in RateLimit-Dry-Run instead, with the t it would have sent (at
// least 1) and the flag banned when the denial would have been a ban's.
//
// # Rules that change
//
// An adapter's policy may take its rule from a [RuleSource], such as a
// reloaded rules file (module github.com/ratelimit-go/ratelimit/rules),
// asked once per request with the request's key ([Lookup]); [RuleOf] is
// the adapters' startup check of how a policy names its rule.
//
// # Concurrency
//
// The package keeps no state: its functions are safe for concurrent use,
// as the Limiter is.
package policy

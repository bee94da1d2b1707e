// Package grpclimit limits the calls of a gRPC server with a
// [ratelimit.Limiter], without touching the handlers: server interceptors
// look up each call's method in a [Methods] table that names its rules and
// how calls are keyed.
//
//	lim, _ := ratelimit.New(client, ratelimit.Options{})
//	claim := ratelimit.Rule{Name: "coupon", Limit: ratelimit.PerMinute(3)}
//	browse := ratelimit.Rule{Name: "catalog", Limit: ratelimit.PerSecond(5)}
//	methods := grpclimit.Methods{
//		"/shop.Coupons/Claim": {{Rule: claim, Key: grpclimit.Identity(userID)}},
//		"/shop.Catalog/*":     {{Rule: browse, Key: grpclimit.IP(grpclimit.IPOptions{})}},
//	}
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(auth, grpclimit.UnaryServerInterceptor(lim, methods, grpclimit.Options{})),
//		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(lim, methods, grpclimit.Options{})),
//	)
//
// It is a module of its own, so that package ratelimit never depends on
// gRPC. It reuses package httplimit's client address rules and keeps its
// keys, field values and messages: a rule that limits both the HTTP and the
// gRPC face of a service counts each caller in one bucket.
//
// # Keys
//
// A [KeyFunc] names the bucket a call counts in under a rule. [Global] puts
// every caller of a method into one bucket; [Identity] keys by the caller
// the service's authentication found (run that interceptor first);
// [ClientCert] by a verified TLS client certificate; [IP] by the client's
// address; [Metadata] by a metadata value. A call a KeyFunc cannot key,
// such as an anonymous call on a per-user method, is refused by default
// with codes.Unauthenticated, never counted in a bucket that all such calls
// share; [Options].NoKey can let it through or key it by a fallback
// instead.
//
// # Client addresses behind proxies
//
// "x-forwarded-for" and "forwarded" metadata are written by whoever makes
// the call, so by default [IP] ignores them and uses the connection's peer.
// Behind your own proxies (an L7 load balancer, Envoy), list their
// addresses in [IPOptions].TrustedProxies: the metadata is then read from
// the right, one trusted hop at a time, and the client is the first address
// that is not one of your proxies. Whatever a client writes into the
// metadata itself stays to the left of that address and is never reached.
// IPv6 clients are grouped by their /64 (configurable). The rules are
// httplimit's, applied to the call's HTTP/2 header fields.
//
// # Several rules on one method
//
// A method may have several policies ([Policy]: a rule and a KeyFunc); a
// call must pass all of them. They are asked in order (those with a Cost
// first, see below), by [policy.Walk], with the semantics of
// [ratelimit.Limiter.AllowAll]: the first denial stops the walk, later
// policies record nothing, and the events the earlier ones recorded are
// taken back, so a denied call costs no policy anything (best effort while
// Redis is down: events recorded on Redis then stay). httplimit walks its policies the same way.
//
// # Costs known after the work
//
// A method whose calls cost what only their answer says, such as a
// language model's completion counted in tokens, limits that cost with a
// policy that has a Cost: a function of the call (its context, method and
// request message; nil for a stream) that estimates it. The interceptor
// reserves the estimate ([ratelimit.Limiter.Reserve]), and the handler
// settles the real cost with [Settle] in the context it was given (a
// stream's ServerStream.Context()): what was not used is given back at
// once, the extra is charged, even past the limit. A reservation the
// handler does not settle stands: the estimate is the call's cost, and
// nothing settles it when the call ends. Reserving policies are asked
// before the other rate policies, so that a later denial cancels their
// reservations, and the metadata reports what the Reserve answered.
// [Settle] returns an error wrapping [ratelimit.ErrNoReservation] when the
// interceptor reserved nothing for the call, and one wrapping
// [ratelimit.ErrSettled] when the call was settled before. httplimit's
// policies reserve the same way ([policy.Settle] is both adapters').
//
// # What the client sees
//
// Every limited call sends header metadata ([HeaderPolicy],
// [HeaderRateLimit]) with the values of the RateLimit-Policy and RateLimit
// fields of draft-ietf-httpapi-ratelimit-headers, one item per enforced
// policy asked; a client reads them with grpc.Header, on a denial too.
// [policy.Format] writes them, and httplimit's header fields carry the same
// bytes for the same decisions:
//
//	ratelimit-policy: "coupon";q=3;w=60
//	ratelimit: "coupon";r=0;t=30
//
// A denial fails the call with codes.ResourceExhausted and the message of
// [Options] ([DefaultMessage], or [DefaultBanMessage] while a penalty bans
// the caller), and carries two details of google.rpc: a RetryInfo whose
// delay is the time until the call could pass, rounded up to whole
// milliseconds so that it never names a time before that (a ban's
// remaining time for a banned caller), and a QuotaFailure whose violation
// names the denying policy in QuotaId (as the metadata names it,
// [policy.Encode]) and its quota in QuotaValue. A denial that carries a
// penalty's warning adds [HeaderWarning].
//
// A policy in dry run never denies and never lowers what a caller is told:
// it is left out of [HeaderPolicy], [HeaderRateLimit] and [HeaderWarning],
// so a rule nobody enforces is never advertised with r=0. When enforcing
// it would have denied, it lets the call through and adds [HeaderDryRun]. A call the limiter cannot decide on fails with
// Unavailable or Internal, and the cause is logged.
//
// # Rules from a file
//
// A [Policy] may take its rule from a source of rules ([policy.RuleSource])
// instead of holding it: Rules and RuleName name it, and every call is
// limited by the rule the source has for its key at that moment. A
// *rules.Watcher (module github.com/ratelimit-go/ratelimit/rules) reloads a
// YAML file while the server runs, so a changed limit applies from the
// next call; [Validate] checks that the source has each policy's rule.
//
// Streams count once, when they open: a stream interceptor limits how
// often streams start, not the messages they carry.
//
// # Concurrency
//
// The interceptors keep no state of their own: they are safe for
// concurrent calls, as the Limiter is.
package grpclimit

package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/policy"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Policy is one rule of a method and the key its calls count under. The
// rule is either fixed (Rule), or taken from a source of rules for each
// call (Rules and RuleName).
type Policy struct {
	// Name names the policy in the response metadata and in the
	// QuotaFailure of a denial. The default is Rule.Name, or RuleName.
	// Both carry it as policy.Encode writes it: bytes outside printable
	// ASCII, and '%', as %XX.
	Name string
	// Rule is the limit the policy enforces, when Rules is nil.
	Rule ratelimit.Rule
	// Key names the bucket of a call under the policy's rule.
	Key KeyFunc
	// Rules, when set, is where the policy's rule comes from: each call is
	// limited by the rule Rules.For(RuleName, key) returns for its key, so
	// that a rules file reloaded while the server runs (module
	// github.com/ratelimit-go/ratelimit/rules) applies from the next call,
	// per-key overrides included. Rule must then be left zero. A call
	// whose rule Rules lacks fails with codes.Internal, logged with an
	// error wrapping policy.ErrUnknownRule; pass the methods' rule names to
	// the rules Watcher's Require so that a reload never drops one.
	Rules policy.RuleSource
	// RuleName names the policy's rule in Rules (required with Rules).
	RuleName string
	// Cost, when set, makes the policy reserve, for calls whose real cost
	// is known only once they are served (the tokens of a language
	// model's answer): the interceptor reserves Cost(ctx, fullMethod, req)
	// events, an estimate, with ratelimit.Limiter.Reserve instead of
	// asking for one event, and the handler settles the reservation at the
	// real cost with Settle(ctx, actual), in its own context (a stream's:
	// ServerStream.Context()). A reservation the handler does not settle
	// stands as reserved. req is a unary call's request message, and nil
	// for a stream, decided when it opens, before its first message (read
	// the estimate from ctx's metadata then). An estimate outside 1..the
	// rule's Rate fails the call with codes.Internal, logged with an error
	// wrapping ratelimit.ErrInvalidN: clamp it, or refuse such calls in an
	// interceptor before this one. The rule must take reservations: a
	// Concurrency rule is a setup mistake, and a GCRA rule is
	// ratelimit.ErrInvalidRule for now.
	Cost func(ctx context.Context, fullMethod string, req any) int
}

// Methods says which policies limit which methods. Each entry's name is
// one of:
//
//	"/package.Service/Method"  that method
//	"/package.Service/*"       every method of the service without an entry of its own
//	"*"                        every method without an entry of either kind above
//
// Only the most specific entry that matches a call applies: entries do not
// add up, so a method entry that should also keep a service-wide policy
// lists it again. An entry with no policies exempts what it matches (health
// checks from "*", say). A method no entry matches is not limited.
//
// The interceptors are given a map rather than a function so that a setup
// can be checked whole, before the first call (see [Validate]).
type Methods map[string][]Policy

// NoKeyPolicy says what the interceptors do with a call that a KeyFunc
// could not key (an error wrapping [ErrNoKey]).
type NoKeyPolicy int

const (
	// NoKeyDeny refuses the call with Options.NoKeyCode and NoKeyMessage;
	// nothing is recorded for any policy. It is the default: an unkeyed
	// call never falls into a bucket shared by every other unkeyed call.
	NoKeyDeny NoKeyPolicy = iota
	// NoKeyAllow skips the policy whose key is missing: the call is not
	// limited by it (the other policies still apply). Use it where
	// anonymous calls are limited elsewhere, or not at all on purpose.
	NoKeyAllow
	// NoKeyFallback keys the call with Options.Fallback instead, for
	// example per user when authenticated and per client address
	// otherwise. A call the fallback cannot key either is refused as with
	// NoKeyDeny.
	NoKeyFallback
)

// Options configure the interceptors. The zero value is a sensible
// configuration: each field documents its default.
type Options struct {
	// Message is the message of a denial's status. The default is
	// DefaultMessage.
	Message string
	// BanMessage is the message of a banned caller's denial. The default
	// is DefaultBanMessage.
	BanMessage string
	// ConcurrencyMessage is the message of a call refused by a
	// concurrency policy. The default is DefaultConcurrencyMessage.
	ConcurrencyMessage string
	// NoKey says what happens to a call a KeyFunc cannot key. The default
	// is NoKeyDeny.
	NoKey NoKeyPolicy
	// NoKeyCode is the code of a call refused by NoKeyDeny. The default is
	// codes.Unauthenticated: gRPC reserves PermissionDenied for callers it
	// could identify, and a call without a key is one whose caller could
	// not be.
	NoKeyCode codes.Code
	// Fallback keys calls the policy's KeyFunc cannot key, when NoKey is
	// NoKeyFallback (and must then be set).
	Fallback KeyFunc
	// DegradedHeader adds the HeaderDegraded metadata, naming the policies
	// decided without Redis, to help debugging. The default is off:
	// degraded decisions are served like any other.
	DegradedHeader bool
	// Logger receives the errors of calls the limiter could not decide on,
	// and a setup mistake when an interceptor is built. The default is
	// slog.Default().
	Logger *slog.Logger
}

// UnaryServerInterceptor returns an interceptor that limits the unary calls
// of a server by the policies methods gives each method: a call reaches its
// handler only if every policy of its method allows it.
//
// First every policy's key is computed; a call that cannot be keyed is
// handled as opts.NoKey says before anything is recorded. Then the policies
// are asked in order with [policy.Walk], which has the semantics of
// [ratelimit.Limiter.AllowAll]: the first denial stops the walk, later
// policies are not asked, and the events the earlier policies recorded are
// taken back, so a denied call costs no policy anything. Taking back is
// best effort: while Redis cannot be used, events recorded on Redis stay
// recorded. Put the policy most likely to deny first, and a denied call
// rarely records anything.
//
// A policy with a Cost reserves its estimate of the call's cost (see
// ratelimit.Limiter.Reserve), and is asked before the other rate policies,
// so that a later denial cancels its reservation: a denied call costs it
// nothing either. Once the call is allowed, the handler settles the
// reservation at the real cost with Settle, in the context it is given;
// one it does not settle stands as reserved. The header metadata reports
// what the Reserve answered.
//
// A policy with a Concurrency rule (see ratelimit.Rule.Leases) bounds the
// calls in progress rather than their rate: it is asked after every rate
// policy allowed the call, takes a slot held while the handler runs (a
// stream's whole life), and gives it back when the handler returns, also
// when it panics. A call it refuses fails with codes.ResourceExhausted and
// opts.ConcurrencyMessage, with RetryInfo (until the earliest lease would
// expire) and QuotaFailure as for a rate.
//
// Every limited call sends the HeaderPolicy and HeaderRateLimit header
// metadata, with one item per enforced policy asked, denied or not; a
// client reads them with grpc.Header. Their values are httplimit's header
// fields, byte for byte ([policy.Format] writes both). A denial fails the call with
// codes.ResourceExhausted, the message opts.Message (opts.BanMessage for a
// banned caller), and the details RetryInfo (the delay until the call
// could pass, rounded up to whole milliseconds) and QuotaFailure (the
// violated policy in QuotaId, as policy.Encode writes it, and its quota
// in QuotaValue). A policy in dry run (ratelimit.Rule.DryRun) is never
// listed in HeaderPolicy, HeaderRateLimit or HeaderWarning; when it would
// have denied, it lets the call through and adds HeaderDryRun. A denial
// that carries a penalty's warning adds HeaderWarning.
//
// A call the limiter cannot decide on fails with ErrorMessage: with
// Unavailable when the Limiter is closed or cannot reach its store, and
// with Internal otherwise (an error from a KeyFunc other than ErrNoKey,
// ratelimit.ErrRedis); the cause is logged to opts.Logger. When the
// caller's context ended first, the call fails with the context's code
// (Canceled, DeadlineExceeded) and nothing is logged.
//
// A setup mistake (a nil Limiter, no methods, a malformed method name, a
// policy without a Key, with an invalid Rule or with a KeyFunc built
// wrongly, invalid opts) is logged when the interceptor is built, and every
// call it sees then fails with codes.Internal and is logged: the server
// fails closed, and loudly, instead of panicking or serving unlimited. Check
// a setup beforehand with [Validate].
func UnaryServerInterceptor(l *ratelimit.Limiter, methods Methods, opts Options) grpc.UnaryServerInterceptor {
	g := newGuard(l, methods, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, held, err := g.decide(ctx, info.FullMethod, req)
		if md != nil {
			// It fails only before the call's header is sent, which it
			// cannot have been yet, or outside a server's call.
			_ = grpc.SetHeader(ctx, md)
		}
		if err != nil {
			return nil, err
		}
		if held != nil {
			defer policy.Release(context.WithoutCancel(ctx), held)
		}
		return handler(policy.WithReservations(ctx, held), req)
	}
}

// StreamServerInterceptor returns an interceptor that limits the streaming
// calls of a server as UnaryServerInterceptor limits unary ones: each
// stream counts as one event when it opens (a reserving policy's estimate,
// settled in the stream's context), however many messages it then
// carries. A denied stream fails before its handler runs, and the client
// sees the status on its first Recv (or CloseAndRecv).
func StreamServerInterceptor(l *ratelimit.Limiter, methods Methods, opts Options) grpc.StreamServerInterceptor {
	g := newGuard(l, methods, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		md, held, err := g.decide(ss.Context(), info.FullMethod, nil)
		if md != nil {
			_ = ss.SetHeader(md) // as in UnaryServerInterceptor
		}
		if err != nil {
			return err
		}
		if held != nil {
			defer policy.Release(context.WithoutCancel(ss.Context()), held)
		}
		if ctx := policy.WithReservations(ss.Context(), held); ctx != ss.Context() {
			ss = &reservingStream{ServerStream: ss, ctx: ctx}
		}
		return handler(srv, ss)
	}
}

// reservingStream is a stream whose context carries its reservations
// (see policy.WithReservations), for Settle in its handler.
type reservingStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *reservingStream) Context() context.Context { return s.ctx }

// Validate reports whether the interceptors of (l, methods, opts) are set
// up correctly: nil, or an error wrapping ErrInvalidSetup (and
// ratelimit.ErrInvalidRule for a bad rule) that says what is wrong; a
// policy with Rules must have a RuleName its source has
// (policy.ErrUnknownRule otherwise) and no Rule. It calls no KeyFunc of
// the service's own. Call it when a server starts, to
// refuse to start rather than fail every call.
func Validate(l *ratelimit.Limiter, methods Methods, opts Options) error {
	_, err := compile(l, methods, opts)
	return err
}

// guard is a checked setup: read-only after newGuard, so safe for
// concurrent calls. A guard set up wrongly holds the mistake in err.
type guard struct {
	lim      *ratelimit.Limiter
	exact    map[string][]Policy // "/package.Service/Method"
	services map[string][]Policy // "/package.Service/"
	any      []Policy            // "*"
	opts     Options
	err      error
}

func newGuard(l *ratelimit.Limiter, methods Methods, opts Options) *guard {
	g, err := compile(l, methods, opts)
	if err != nil {
		g = &guard{opts: opts, err: err}
		if g.opts.Logger == nil {
			g.opts.Logger = slog.Default()
		}
		g.opts.Logger.Error("grpclimit: interceptor set up wrongly; every call will fail", "err", err)
	}
	return g
}

func compile(l *ratelimit.Limiter, methods Methods, opts Options) (*guard, error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: nil Limiter", ErrInvalidSetup)
	case len(methods) == 0:
		return nil, fmt.Errorf("%w: no methods", ErrInvalidSetup)
	case opts.NoKey < NoKeyDeny || opts.NoKey > NoKeyFallback:
		return nil, fmt.Errorf("%w: unknown NoKey policy %d", ErrInvalidSetup, opts.NoKey)
	case opts.NoKey == NoKeyFallback && opts.Fallback == nil:
		return nil, fmt.Errorf("%w: NoKeyFallback without a Fallback", ErrInvalidSetup)
	case opts.NoKeyCode > codes.Unauthenticated:
		return nil, fmt.Errorf("%w: NoKeyCode %d is not a gRPC code", ErrInvalidSetup, opts.NoKeyCode)
	}
	if opts.Fallback != nil {
		if err := keySetupError(opts.Fallback); err != nil {
			return nil, mistake("Fallback", err)
		}
	}
	g := &guard{lim: l, exact: map[string][]Policy{}, services: map[string][]Policy{}, opts: opts}
	for name, policies := range methods {
		ps, err := compilePolicies(name, policies)
		if err != nil {
			return nil, err
		}
		switch service, method, err := splitMethod(name); {
		case err != nil:
			return nil, err
		case service == "":
			g.any = ps
		case method == "*":
			g.services["/"+service+"/"] = ps
		default:
			g.exact[name] = ps
		}
	}
	if g.opts.NoKeyCode == codes.OK {
		g.opts.NoKeyCode = codes.Unauthenticated
	}
	if g.opts.Logger == nil {
		g.opts.Logger = slog.Default()
	}
	return g, nil
}

// splitMethod checks a Methods entry's name: "*" (service ""), or
// "/service/method" where method may be "*".
func splitMethod(name string) (service, method string, err error) {
	if name == "*" {
		return "", "", nil
	}
	service, method, ok := strings.Cut(strings.TrimPrefix(name, "/"), "/")
	if !ok || !strings.HasPrefix(name, "/") || service == "" || method == "" ||
		strings.Contains(method, "/") || strings.Contains(service, "*") ||
		(method != "*" && strings.Contains(method, "*")) {
		return "", "", fmt.Errorf(`%w: method %q is none of "/package.Service/Method", "/package.Service/*" and "*"`, ErrInvalidSetup, name)
	}
	return service, method, nil
}

func compilePolicies(method string, policies []Policy) ([]Policy, error) {
	ps := make([]Policy, len(policies))
	for i, p := range policies {
		rule, err := policy.RuleOf(p.Rule, p.Rules, p.RuleName)
		if err != nil {
			return nil, fmt.Errorf("%w: method %q: policy %d: %w", ErrInvalidSetup, method, i, err)
		}
		if p.Key == nil {
			return nil, fmt.Errorf("%w: method %q: policy %d (%q) has no Key", ErrInvalidSetup, method, i, rule.Name)
		}
		if err := keySetupError(p.Key); err != nil {
			return nil, mistake(fmt.Sprintf("method %q: policy %d (%q)", method, i, rule.Name), err)
		}
		if err := rule.Validate(); err != nil {
			return nil, fmt.Errorf("%w: method %q: policy %d: %w", ErrInvalidSetup, method, i, err)
		}
		if p.Cost != nil && rule.Leases() {
			return nil, fmt.Errorf("%w: method %q: policy %d (%q) has a Cost and a Concurrency rule, which takes no reservation", ErrInvalidSetup, method, i, rule.Name)
		}
		if p.Name == "" {
			p.Name = rule.Name
		}
		ps[i] = p
	}
	return ps, nil
}

// policies returns the policies of fullMethod: its own entry's, else its
// service's, else "*"'s.
func (g *guard) policies(fullMethod string) []Policy {
	if ps, ok := g.exact[fullMethod]; ok {
		return ps
	}
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		if ps, ok := g.services[fullMethod[:i+1]]; ok {
			return ps
		}
	}
	return g.any
}

// skip marks a policy NoKeyAllow left out.
const skip = ""

// decide asks the policies of fullMethod about the call in ctx, whose
// request is req (nil for a stream). It returns the header metadata to
// send (nil when no policy was asked), and the outcomes that hold a
// concurrency slot until the handler returns or a reservation for the
// handler to settle (nil when none does) with a nil error, or the status
// error the call fails with.
func (g *guard) decide(ctx context.Context, fullMethod string, req any) (metadata.MD, []policy.Outcome, error) {
	if g.err != nil {
		return nil, nil, g.fail(ctx, fullMethod, g.err)
	}
	policies := g.policies(fullMethod)
	if len(policies) == 0 {
		return nil, nil, nil
	}
	var entryBuf [4]policy.Entry
	entries := entryBuf[:0]
	for i := range policies {
		p := &policies[i]
		k, err := g.key(ctx, fullMethod, p)
		if err != nil {
			if errors.Is(err, ErrNoKey) {
				return nil, nil, status.Error(g.opts.NoKeyCode, NoKeyMessage)
			}
			return nil, nil, g.fail(ctx, fullMethod, fmt.Errorf("grpclimit: policy %q: %w", p.Name, err))
		}
		if k == skip {
			continue
		}
		rule := p.Rule
		if p.Rules != nil {
			if rule, err = policy.Lookup(p.Rules, p.RuleName, k); err != nil {
				return nil, nil, g.fail(ctx, fullMethod, fmt.Errorf("grpclimit: policy %q: %w", p.Name, err))
			}
		}
		e := policy.Entry{Name: p.Name, Rule: rule, Key: k}
		if p.Cost != nil {
			e.Reserve, e.Cost = true, p.Cost(ctx, fullMethod, req)
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 { // every policy skipped by NoKeyAllow
		return nil, nil, nil
	}
	var outBuf [4]policy.Outcome
	outcomes, err := policy.Walk(ctx, g.lim, entries, outBuf[:0])
	if err != nil {
		return nil, nil, g.fail(ctx, fullMethod, fmt.Errorf("grpclimit: %w", err))
	}
	md := fields(outcomes, g.opts.DegradedHeader)
	if d, denied := policy.Denial(outcomes); denied {
		return md, nil, denial(d, &g.opts)
	}
	return md, holding(outcomes), nil
}

// holding returns the outcomes of outcomes that hold a slot of a
// concurrency policy (see policy.Outcome.Lease) or a reservation (see
// policy.Outcome.Reservation), in a slice of their own; nil when none
// does.
func holding(outcomes []policy.Outcome) []policy.Outcome {
	var held []policy.Outcome
	for _, o := range outcomes {
		if o.Lease != nil || o.Reservation != nil {
			held = append(held, o)
		}
	}
	return held
}

// key returns the key of the call under p: skip for a policy that
// NoKeyAllow leaves out, an error wrapping ErrNoKey for a call to refuse.
func (g *guard) key(ctx context.Context, fullMethod string, p *Policy) (string, error) {
	k, err := p.Key(ctx, fullMethod)
	if err == nil && k == "" {
		err = fmt.Errorf("%w: empty key", ErrNoKey)
	}
	if err == nil || !errors.Is(err, ErrNoKey) {
		return k, err
	}
	switch g.opts.NoKey {
	case NoKeyAllow:
		return skip, nil
	case NoKeyFallback:
		k, err = g.opts.Fallback(ctx, fullMethod)
		if err == nil && k == "" {
			err = fmt.Errorf("%w: empty fallback key", ErrNoKey)
		}
	}
	return k, err
}

// fail returns the status of a call the limiter could not decide on, and
// logs err unless the caller's context ended.
func (g *guard) fail(ctx context.Context, fullMethod string, err error) error {
	st, report := failure(ctx, err)
	if report {
		g.opts.Logger.ErrorContext(ctx, "grpclimit: cannot decide on a call", "method", fullMethod, "err", err)
	}
	return st
}

package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/policy"
)

// Policy is one rule of a route and the key its requests count under. The
// rule is either fixed (Rule), or taken from a source of rules for each
// request (Rules and RuleName).
type Policy struct {
	// Name names the policy in the response fields and problem bodies. The
	// default is Rule.Name, or RuleName. Both carry it as policy.Encode
	// writes it: bytes outside printable ASCII, and '%', as %XX.
	Name string
	// Rule is the limit the policy enforces, when Rules is nil.
	Rule ratelimit.Rule
	// Key names the bucket of a request under the policy's rule.
	Key KeyFunc
	// Rules, when set, is where the policy's rule comes from: each
	// request is limited by the rule Rules.For(RuleName, key) returns for
	// its key, so that a rules file reloaded while the server runs (module
	// github.com/ratelimit-go/ratelimit/rules) applies from the next
	// request, per-key overrides included. Rule must then be left zero. A
	// request whose rule Rules lacks goes to Options.OnError with an error
	// wrapping policy.ErrUnknownRule; pass the route's rule names to the
	// rules Watcher's Require so that a reload never drops one.
	Rules policy.RuleSource
	// RuleName names the policy's rule in Rules (required with Rules).
	RuleName string
	// Cost, when set, makes the policy reserve, for requests whose real
	// cost is known only once they are served (the tokens of a language
	// model's answer): the middleware reserves Cost(r) events, an
	// estimate, with ratelimit.Limiter.Reserve instead of asking for one
	// event, and the handler settles the reservation at the real cost with
	// Settle(r.Context(), actual). A reservation the handler does not
	// settle stands as reserved. An estimate outside 1..the rule's Rate
	// goes to Options.OnError with an error wrapping ratelimit.ErrInvalidN:
	// clamp it, or refuse such requests before the middleware. Cost must
	// leave r.Body unread, or put back what it read. The rule must take
	// reservations: a Concurrency rule is a setup mistake, and a GCRA rule
	// is ratelimit.ErrInvalidRule for now.
	Cost func(r *http.Request) int
}

// NoKeyPolicy says what the middleware does with a request that a KeyFunc
// could not key (an error wrapping [ErrNoKey]).
type NoKeyPolicy int

const (
	// NoKeyDeny refuses the request with Options.NoKeyStatus and a problem
	// body of type ProblemNoKey; nothing is recorded for any policy. It is
	// the default: an unkeyed request never falls into a bucket shared by
	// every other unkeyed request.
	NoKeyDeny NoKeyPolicy = iota
	// NoKeyAllow skips the policy whose key is missing: the request is not
	// limited by it (the other policies still apply). Use it where
	// anonymous requests are limited elsewhere, or not at all on purpose.
	NoKeyAllow
	// NoKeyFallback keys the request with Options.Fallback instead, for
	// example per user when logged in and per IP otherwise. A request the
	// fallback cannot key either is denied as with NoKeyDeny.
	NoKeyFallback
)

// Options configure the middleware. The zero value is a sensible
// configuration: each field documents its default.
type Options struct {
	// Message is the detail of a denial's problem body. The default is
	// DefaultMessage.
	Message string
	// BanMessage is the detail of a banned client's problem body. The
	// default is DefaultBanMessage.
	BanMessage string
	// ConcurrencyMessage is the detail of the problem body of a request
	// refused by a concurrency policy. The default is
	// DefaultConcurrencyMessage.
	ConcurrencyMessage string
	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds until more quota, not a timestamp) for
	// clients that predate the draft. The default is off.
	LegacyHeaders bool
	// DegradedHeader adds RateLimit-Degraded, naming the policies decided
	// without Redis, to help debugging. The default is off: degraded
	// decisions are served like any other.
	DegradedHeader bool
	// NoKey says what happens to a request a KeyFunc cannot key. The
	// default is NoKeyDeny.
	NoKey NoKeyPolicy
	// NoKeyStatus is the status of a request refused by NoKeyDeny. The
	// default is 403 (Forbidden); 401 suits routes behind authentication,
	// if you also send WWW-Authenticate.
	NoKeyStatus int
	// Fallback keys requests the policy's KeyFunc cannot key, when NoKey
	// is NoKeyFallback (and must then be set).
	Fallback KeyFunc
	// OnDenied, when set, writes the response to a denied request in
	// place of the default 429 problem body, given the outcome of the
	// denying policy. The rate limit fields and Retry-After are already
	// set; it writes the status and the body.
	OnDenied func(w http.ResponseWriter, r *http.Request, denial policy.Outcome)
	// OnError, when set, writes the response when the limiter fails (an
	// invalid rule, ratelimit.ErrRedis, a closed Limiter) or a KeyFunc
	// returns an error that does not wrap ErrNoKey. Events already
	// recorded for earlier policies are taken back, as for a denial. The
	// default logs the error to Logger and answers 500 with a problem
	// body.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
	// Logger receives the errors the default OnError handles. The default
	// is slog.Default().
	Logger *slog.Logger
}

// Limit returns middleware that limits every request of the handlers it
// wraps by rule, in the bucket key names. It is Stack with one policy.
func Limit(l *ratelimit.Limiter, rule ratelimit.Rule, key KeyFunc, opts Options) func(http.Handler) http.Handler {
	return Stack(l, []Policy{{Rule: rule, Key: key}}, opts)
}

// Stack returns middleware that limits every request of the handlers it
// wraps by all policies, in order: a request is served only if every
// policy allows it.
//
// First every policy's key is computed; a request that cannot be keyed is
// handled as opts.NoKey says before anything is recorded. Then the policies
// are asked in order with [policy.Walk], which has the semantics of
// [ratelimit.Limiter.AllowAll]: the first denial stops the walk, later
// policies are not asked, and the events the earlier policies recorded are
// taken back, so a denied request costs no policy anything. Taking back is
// best effort: while Redis cannot be used, events recorded on Redis stay
// recorded. Put the policy most likely to deny first, and a denied request
// rarely records anything.
//
// A policy with a Cost reserves its estimate of the request's cost (see
// ratelimit.Limiter.Reserve), and is asked before the other rate policies,
// so that a later denial cancels its reservation: a denied request costs
// it nothing either. Once the request is allowed, the wrapped handler
// settles the reservation at the real cost with Settle, through the
// request's context; one it does not settle stands as reserved. The
// RateLimit fields report what the Reserve answered.
//
// A policy with a Concurrency rule (see ratelimit.Rule.Leases) bounds the
// requests in progress rather than their rate: it is asked after every
// rate policy allowed the request, takes a slot held while the wrapped
// handler serves the request, and gives it back when the handler returns,
// also when it panics. Its RateLimit fields' w is the leases' TTL (the
// rule's Window), r the slots free. A request it refuses gets 429 with
// Retry-After and a problem body of type ProblemConcurrencyExceeded.
//
// Every response carries the RateLimit-Policy and RateLimit fields with one
// item per enforced policy asked; a policy in dry run is never listed
// there, and shows in RateLimit-Dry-Run when it would have denied. A
// denial is answered with 429 (Too Many Requests), Retry-After, and an RFC
// 9457 problem body; see the package documentation.
//
// A setup mistake (a nil Limiter, no policies, a policy without a Key or
// with an invalid Rule, invalid opts) is logged when the route is built,
// and every request of the route then goes to opts.OnError with an error
// wrapping ErrInvalidSetup: the route fails closed, and loudly, instead of
// panicking or serving unlimited. Check a setup beforehand with Validate.
func Stack(l *ratelimit.Limiter, policies []Policy, opts Options) func(http.Handler) http.Handler {
	m, err := newMiddleware(l, policies, opts)
	if err != nil {
		return failClosed(err, opts)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(w, r, next)
		})
	}
}

// middleware is a checked Stack: read-only after newMiddleware, so safe for
// concurrent requests.
type middleware struct {
	lim      *ratelimit.Limiter
	policies []Policy
	opts     Options
}

// ErrInvalidSetup is wrapped by the errors that report a route set up
// wrongly: see Stack, Validate, IP and User.
var ErrInvalidSetup = errors.New("httplimit: invalid setup")

// Validate reports whether Stack(l, policies, opts) is set up correctly:
// nil, or an error wrapping ErrInvalidSetup (and ratelimit.ErrInvalidRule
// for a bad rule) that says what is wrong; a policy with Rules must have a
// RuleName its source has (policy.ErrUnknownRule otherwise) and no Rule.
// Call it when a program starts, to refuse to start rather than fail every
// request of a route.
func Validate(l *ratelimit.Limiter, policies []Policy, opts Options) error {
	_, err := newMiddleware(l, policies, opts)
	return err
}

// failClosed is the middleware of a route set up wrongly: it logs err now
// and sends every request to the error handler.
func failClosed(err error, opts Options) func(http.Handler) http.Handler {
	m := &middleware{opts: opts}
	if m.opts.Logger == nil {
		m.opts.Logger = slog.Default()
	}
	m.opts.Logger.Error("httplimit: route set up wrongly; every request will fail", "err", err)
	return func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.fail(w, r, err) })
	}
}

func newMiddleware(l *ratelimit.Limiter, policies []Policy, opts Options) (*middleware, error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: nil Limiter", ErrInvalidSetup)
	case len(policies) == 0:
		return nil, fmt.Errorf("%w: no policies", ErrInvalidSetup)
	case opts.NoKey < NoKeyDeny || opts.NoKey > NoKeyFallback:
		return nil, fmt.Errorf("%w: unknown NoKey policy %d", ErrInvalidSetup, opts.NoKey)
	case opts.NoKey == NoKeyFallback && opts.Fallback == nil:
		return nil, fmt.Errorf("%w: NoKeyFallback without a Fallback", ErrInvalidSetup)
	case opts.NoKeyStatus != 0 && (opts.NoKeyStatus < 400 || opts.NoKeyStatus > 599):
		return nil, fmt.Errorf("%w: NoKeyStatus %d is not an error status", ErrInvalidSetup, opts.NoKeyStatus)
	}
	m := &middleware{lim: l, policies: make([]Policy, len(policies)), opts: opts}
	for i, p := range policies {
		rule, err := policy.RuleOf(p.Rule, p.Rules, p.RuleName)
		if err != nil {
			return nil, fmt.Errorf("%w: policy %d: %w", ErrInvalidSetup, i, err)
		}
		if p.Key == nil {
			return nil, fmt.Errorf("%w: policy %d (%q) has no Key", ErrInvalidSetup, i, rule.Name)
		}
		if err := rule.Validate(); err != nil {
			return nil, fmt.Errorf("%w: policy %d: %w", ErrInvalidSetup, i, err)
		}
		if p.Cost != nil && rule.Leases() {
			return nil, fmt.Errorf("%w: policy %d (%q) has a Cost and a Concurrency rule, which takes no reservation", ErrInvalidSetup, i, rule.Name)
		}
		if p.Name == "" {
			p.Name = rule.Name
		}
		m.policies[i] = p
	}
	if m.opts.NoKeyStatus == 0 {
		m.opts.NoKeyStatus = http.StatusForbidden
	}
	if m.opts.Logger == nil {
		m.opts.Logger = slog.Default()
	}
	return m, nil
}

// skip marks a policy NoKeyAllow left out.
const skip = ""

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var entryBuf [4]policy.Entry
	entries, ok := m.entries(w, r, entryBuf[:0])
	if !ok {
		return
	}
	if len(entries) == 0 { // every policy skipped by NoKeyAllow
		next.ServeHTTP(w, r)
		return
	}
	var outBuf [4]policy.Outcome
	outcomes, err := policy.Walk(r.Context(), m.lim, entries, outBuf[:0])
	if err != nil {
		m.fail(w, r, fmt.Errorf("httplimit: %w", err))
		return
	}
	writeFields(w.Header(), outcomes, &m.opts)
	if d, denied := policy.Denial(outcomes); denied {
		if m.opts.OnDenied != nil {
			m.opts.OnDenied(w, r, *d)
		} else {
			writeProblem(w, denialProblem(d, &m.opts))
		}
		return
	}
	// The slots of concurrency policies are held while next serves the
	// request, and given back when it returns or panics.
	defer policy.Release(context.WithoutCancel(r.Context()), outcomes)
	// The reservations go to next in the request's context, for Settle.
	if ctx := policy.WithReservations(r.Context(), outcomes); ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	next.ServeHTTP(w, r)
}

// entries appends to dst the entries of r's policies, leaving out those
// NoKeyAllow skips. It reports false when it answered r itself: a policy
// found no key for it, or failed.
func (m *middleware) entries(w http.ResponseWriter, r *http.Request, dst []policy.Entry) ([]policy.Entry, bool) {
	for i := range m.policies {
		p := &m.policies[i]
		k, err := m.key(r, p)
		if err != nil {
			if errors.Is(err, ErrNoKey) {
				writeProblem(w, noKeyProblem(m.opts.NoKeyStatus))
			} else {
				m.fail(w, r, err)
			}
			return dst, false
		}
		if k == skip {
			continue
		}
		rule := p.Rule
		if p.Rules != nil {
			if rule, err = policy.Lookup(p.Rules, p.RuleName, k); err != nil {
				m.fail(w, r, fmt.Errorf("httplimit: policy %q: %w", p.Name, err))
				return dst, false
			}
		}
		e := policy.Entry{Name: p.Name, Rule: rule, Key: k}
		if p.Cost != nil {
			e.Reserve, e.Cost = true, p.Cost(r)
		}
		dst = append(dst, e)
	}
	return dst, true
}

// key returns the key of r under p: skip for a policy that NoKeyAllow
// leaves out, an error wrapping ErrNoKey for a request to refuse.
func (m *middleware) key(r *http.Request, p *Policy) (string, error) {
	k, err := p.Key(r)
	if err == nil && k == "" {
		err = fmt.Errorf("%w: policy %q: empty key", ErrNoKey, p.Name)
	}
	if err == nil || !errors.Is(err, ErrNoKey) {
		return k, err
	}
	switch m.opts.NoKey {
	case NoKeyAllow:
		return skip, nil
	case NoKeyFallback:
		k, err = m.opts.Fallback(r)
		if err == nil && k == "" {
			err = fmt.Errorf("%w: policy %q: empty fallback key", ErrNoKey, p.Name)
		}
	}
	return k, err
}

// fail answers a request the middleware could not decide.
func (m *middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if m.opts.OnError != nil {
		m.opts.OnError(w, r, err)
		return
	}
	m.opts.Logger.ErrorContext(r.Context(), "httplimit: cannot decide on a request", "method", r.Method, "path", r.URL.Path, "err", err)
	writeProblem(w, errorProblem())
}

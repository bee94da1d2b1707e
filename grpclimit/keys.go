package grpclimit

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"reflect"
	"strings"

	"github.com/ratelimit-go/ratelimit/httplimit"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// KeyFunc names the bucket a call counts against under one rule: a user
// id, a client address, or one name for every caller. fullMethod is the
// call's method, "/package.Service/Method". The key is passed to
// [ratelimit.Limiter.Allow] as it is.
//
// A KeyFunc that cannot name a bucket for a call (an anonymous call on a
// per-user method) returns an error wrapping [ErrNoKey]; the interceptor
// then follows [Options].NoKey. Any other error is a failure of the service:
// the call fails with codes.Internal and the error is logged.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// ErrNoKey means a KeyFunc found nothing in the call to key it by. Key
// functions wrap it, and callers test for it with errors.Is.
var ErrNoKey = errors.New("grpclimit: call has no key")

// ErrInvalidSetup is wrapped by the errors that report an interceptor set
// up wrongly: see [UnaryServerInterceptor], [Validate], [IP], [Identity] and
// [Metadata].
var ErrInvalidSetup = errors.New("grpclimit: invalid setup")

// The keys agree with package httplimit's: "global", "user:<id>", an
// address or IPv6 prefix, "header:<Canonical-Name>:<value>". A rule that
// limits both the HTTP and the gRPC face of a service therefore counts a
// caller in one bucket, whichever way it calls.
const (
	globalKey  = "global"
	userPrefix = "user:"
	certPrefix = "cert:"
)

// Global returns a KeyFunc that puts every call into one bucket, the key
// "global" (httplimit.Global's): the rule then limits the method as a
// whole, as a flash sale's endpoint is protected from overload.
func Global() KeyFunc {
	return func(context.Context, string) (string, error) { return globalKey, nil }
}

// Identity returns a KeyFunc that keys a call by the identity id finds in
// its context, as "user:<id>" (the key httplimit.User gives the same user).
// The service supplies id, typically reading what its authentication
// interceptor stored in the context, which must therefore run before the
// rate limiting one (see [grpc.ChainUnaryInterceptor]). id reports false,
// or returns "", for an anonymous call, and the KeyFunc then returns an
// error wrapping [ErrNoKey].
//
// With a nil id the KeyFunc returns an error wrapping [ErrInvalidSetup]
// for every call, and [Check] reports the mistake.
func Identity(id func(ctx context.Context) (string, bool)) KeyFunc {
	if id == nil {
		return setupError(fmt.Errorf("%w: Identity with a nil id function", ErrInvalidSetup))
	}
	return func(ctx context.Context, _ string) (string, error) {
		v, ok := id(ctx)
		if !ok || v == "" {
			return "", fmt.Errorf("%w: no identity", ErrNoKey)
		}
		return userPrefix + v, nil
	}
}

// Metadata returns a KeyFunc that keys a call by the first value of the
// incoming metadata name (an API key, a tenant id), as
// "header:<Canonical-Name>:<value>" ("header:X-Api-Key:k1" for
// "x-api-key"), the key httplimit.Header gives the same HTTP header. A call
// without the metadata, or with an empty value, has no key: the KeyFunc
// returns an error wrapping [ErrNoKey].
//
// Anyone can send any metadata: key by it only when something in front of
// the interceptor has checked it (a gateway that verified the API key), or
// when a caller who changes it gains nothing.
//
// With an empty name the KeyFunc returns an error wrapping
// [ErrInvalidSetup] for every call, and [Check] reports the mistake.
func Metadata(name string) KeyFunc {
	if name == "" {
		return setupError(fmt.Errorf("%w: Metadata with an empty name", ErrInvalidSetup))
	}
	prefix := "header:" + textproto.CanonicalMIMEHeaderKey(name) + ":"
	name = strings.ToLower(name) // as metadata keys are
	return func(ctx context.Context, _ string) (string, error) {
		v := metadata.ValueFromIncomingContext(ctx, name)
		if len(v) == 0 || v[0] == "" {
			return "", fmt.Errorf("%w: no %s metadata", ErrNoKey, name)
		}
		return prefix + v[0], nil
	}
}

// IPOptions say how [IP] and [ClientIP] find a call's client address. They
// are httplimit's, with the same rules: the zero value trusts no proxy and
// keys a call by its direct peer. Only when the peer is inside one of
// TrustedProxies is the forwarding metadata read, from the right, one
// trusted hop at a time: "x-forwarded-for", or "forwarded" (its for=
// parameters) when Forwarded is set. IPv6 clients are grouped by their
// IPv6PrefixLen-bit prefix (/64 by default).
type IPOptions = httplimit.IPOptions

// Canonical names of the forwarding fields, as httplimit reads them from a
// request's header.
const (
	headerXFF       = "X-Forwarded-For"
	headerForwarded = "Forwarded"
)

// IP returns a KeyFunc that keys a call by its client's address: an IPv4
// client by its address ("203.0.113.7"), an IPv6 client by the prefix it is
// in ("2001:db8:1:2::/64" with the default length), exactly as
// httplimit.IP keys an HTTP request from the same client. See [ClientIP]
// for how the client is found.
//
// A call whose peer is not an IP address (a Unix socket, an in-memory
// connection) has no key: the KeyFunc returns an error wrapping [ErrNoKey].
// With invalid opts it returns an error wrapping [ErrInvalidSetup] for
// every call, and [Check] reports the mistake.
func IP(opts IPOptions) KeyFunc {
	if err := opts.Validate(); err != nil {
		return setupError(mistake("IPOptions", err))
	}
	key := httplimit.IP(opts)
	return func(ctx context.Context, _ string) (string, error) {
		r, err := peerRequest(ctx, opts.Forwarded)
		if err != nil {
			return "", err
		}
		k, err := key(r)
		if err != nil {
			return "", noKey(err, r.RemoteAddr)
		}
		return k, nil
	}
}

// ClientIP returns the address of the client that made the call in ctx.
//
// It starts at the direct peer ([peer.FromContext]). If the peer is inside
// one of opts.TrustedProxies, it steps one hop to the left in the incoming
// "x-forwarded-for" metadata (or the for= parameters of "forwarded" when
// opts.Forwarded is set), all values read as one list in order, while the
// address at hand is trusted; the first address that is not trusted is the
// client. Entries a client wrote itself lie to the left of the one your
// proxy appended and are never reached; if the peer is not trusted, the
// metadata is not read at all. The walk is httplimit's
// (httplimit.IPOptions.ClientIP), which documents the details.
//
// ClientIP returns an error wrapping [ErrNoKey] when ctx has no peer or the
// peer is not an IP address, and an error wrapping [ErrInvalidSetup] when
// opts are invalid.
func ClientIP(ctx context.Context, opts IPOptions) (netip.Addr, error) {
	if err := opts.Validate(); err != nil {
		return netip.Addr{}, mistake("IPOptions", err)
	}
	r, err := peerRequest(ctx, opts.Forwarded)
	if err != nil {
		return netip.Addr{}, err
	}
	a, err := opts.ClientIP(r)
	if err != nil {
		return netip.Addr{}, noKey(err, r.RemoteAddr)
	}
	return a, nil
}

// peerRequest returns the part of an HTTP request that httplimit's client
// address rules read: the peer as RemoteAddr and the forwarding field
// (only the one opts will read) from the call's metadata. gRPC runs on
// HTTP/2, whose header fields are the call's metadata, so the request is
// the one a proxy in front of the service saw.
func peerRequest(ctx context.Context, forwarded bool) (*http.Request, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil, fmt.Errorf("%w: no peer", ErrNoKey)
	}
	r := &http.Request{RemoteAddr: p.Addr.String(), Header: http.Header{}}
	if forwarded {
		r.Header[headerForwarded] = metadata.ValueFromIncomingContext(ctx, "forwarded")
	} else {
		r.Header[headerXFF] = metadata.ValueFromIncomingContext(ctx, "x-forwarded-for")
	}
	return r, nil
}

// noKey turns httplimit's error for a peer that is not an IP address into
// this package's.
func noKey(err error, remote string) error {
	if errors.Is(err, httplimit.ErrNoKey) {
		return fmt.Errorf("%w: peer %q is not an IP address", ErrNoKey, remote)
	}
	return err
}

// ClientCert returns a KeyFunc that keys a call by the client certificate
// the server verified during the TLS handshake (mutual TLS), as
// "cert:<name>". The name is the certificate's first URI SAN (a SPIFFE ID
// such as "spiffe://example.org/billing"), else its subject's CommonName,
// else its first DNS SAN.
//
// Only a verified chain counts: the server's tls.Config must verify client
// certificates (tls.RequireAndVerifyClientCert, or VerifyClientCertIfGiven).
// A call without a verified client certificate, or with one that names
// nothing, has no key: the KeyFunc returns an error wrapping [ErrNoKey].
// An unverified certificate says whatever its maker wrote, so it is never
// used.
func ClientCert() KeyFunc {
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok {
			return "", fmt.Errorf("%w: no peer", ErrNoKey)
		}
		info, _ := p.AuthInfo.(credentials.TLSInfo)
		chains := info.State.VerifiedChains
		if len(chains) == 0 || len(chains[0]) == 0 {
			return "", fmt.Errorf("%w: no verified client certificate", ErrNoKey)
		}
		name := certName(chains[0][0])
		if name == "" {
			return "", fmt.Errorf("%w: the client certificate names nothing", ErrNoKey)
		}
		return certPrefix + name, nil
	}
}

// certName is the identity a certificate names: its first URI SAN, else
// its CommonName, else its first DNS SAN.
func certName(c *x509.Certificate) string {
	if len(c.URIs) > 0 && c.URIs[0] != nil {
		if s := c.URIs[0].String(); s != "" {
			return s
		}
	}
	if c.Subject.CommonName != "" {
		return c.Subject.CommonName
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return ""
}

// mistake returns an error wrapping ErrInvalidSetup and err that reads
// "grpclimit: invalid setup: <where>: <what err says>", without err's own
// "… invalid setup: " prefixes.
func mistake(where string, err error) error {
	what := err.Error()
	if i := strings.LastIndex(what, "invalid setup: "); i >= 0 {
		what = what[i+len("invalid setup: "):]
	}
	return &setupMistake{msg: ErrInvalidSetup.Error() + ": " + where + ": " + what, err: err}
}

type setupMistake struct {
	msg string
	err error
}

func (e *setupMistake) Error() string   { return e.msg }
func (e *setupMistake) Unwrap() []error { return []error{ErrInvalidSetup, e.err} }

// setupError returns a KeyFunc that fails every call with err, a setup
// mistake made when the KeyFunc was built.
//
// It is never inlined: an inlined copy would clone the closure, whose code
// would then differ from setupErrorCode.
//
//go:noinline
func setupError(err error) KeyFunc {
	return func(context.Context, string) (string, error) { return "", err }
}

// setupErrorCode is the code of every KeyFunc setupError returns: all
// closures of one function literal share it.
var setupErrorCode = reflect.ValueOf(setupError(nil)).Pointer()

// keySetupError returns the mistake a KeyFunc of setupError's reports, and
// nil for any other KeyFunc, which it never calls: a service's own KeyFunc
// may expect what only a real call's context holds.
func keySetupError(k KeyFunc) error {
	if reflect.ValueOf(k).Pointer() != setupErrorCode {
		return nil
	}
	_, err := k(context.Background(), "")
	return err
}

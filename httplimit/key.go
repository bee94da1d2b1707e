package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
)

// KeyFunc names the bucket a request counts against under one rule: a
// user id, a client address, or one name for every caller. The key is
// passed to [ratelimit.Limiter.Allow] as it is.
//
// A KeyFunc that cannot name a bucket for a request (an anonymous request
// on a per-user route) returns an error wrapping [ErrNoKey]; the middleware
// then follows [Options.NoKey]. Any other error is a failure of the
// service and goes to [Options.OnError].
type KeyFunc func(*http.Request) (string, error)

// ErrNoKey means a KeyFunc found nothing in the request to key it by. Key
// functions wrap it, and callers test for it with errors.Is.
var ErrNoKey = errors.New("httplimit: request has no key")

// globalKey is the key of every request under Global.
const globalKey = "global"

// Global returns a KeyFunc that puts every request of a route into one
// bucket, the key "global": the rule then limits the route as a whole, as
// a flash sale's endpoint is protected from overload.
func Global() KeyFunc {
	return func(*http.Request) (string, error) { return globalKey, nil }
}

// User returns a KeyFunc that keys a request by the user id that id finds
// in it, as "user:<id>". The service supplies id, typically reading the
// user its authentication middleware stored in the request's context; id
// reports false, or returns "", for an anonymous request, and the KeyFunc
// then returns an error wrapping [ErrNoKey].
//
// The "user:" prefix keeps user keys apart from the keys of [IP] and
// [Header] when one rule sees both (see [NoKeyFallback]).
func User(id func(*http.Request) (string, bool)) KeyFunc {
	if id == nil {
		return func(*http.Request) (string, error) {
			return "", fmt.Errorf("%w: User with a nil id function", ErrInvalidSetup)
		}
	}
	return func(r *http.Request) (string, error) {
		v, ok := id(r)
		if !ok || v == "" {
			return "", fmt.Errorf("%w: no user", ErrNoKey)
		}
		return "user:" + v, nil
	}
}

// Header returns a KeyFunc that keys a request by the first value of the
// header name, as "header:<Canonical-Name>:<value>" (an API key, a tenant
// id). A request without the header, or with an empty value, has no key:
// the KeyFunc returns an error wrapping [ErrNoKey].
//
// Anyone can send any header: key by a header only when something in
// front of the middleware has checked it (an API gateway that verified the
// key), or when a caller who changes it gains nothing.
func Header(name string) KeyFunc {
	name = textproto.CanonicalMIMEHeaderKey(name)
	if name == "" {
		return func(*http.Request) (string, error) {
			return "", fmt.Errorf("%w: Header with an empty name", ErrInvalidSetup)
		}
	}
	prefix := "header:" + name + ":"
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("%w: no %s header", ErrNoKey, name)
		}
		return prefix + v, nil
	}
}

package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
)

// DefaultIPv6PrefixLen is the prefix length IPv6 clients are grouped by
// when IPOptions.IPv6PrefixLen is 0: one /64 is what a single home or
// phone usually gets, so a client cannot multiply its limit by changing
// the low bits of its address.
const DefaultIPv6PrefixLen = 64

// IPOptions say how [IP] finds a request's client address.
//
// The zero value trusts no proxy: the client is the connection's peer
// (Request.RemoteAddr), and X-Forwarded-For and Forwarded are ignored,
// since any client can send them.
type IPOptions struct {
	// TrustedProxies are the addresses of your own reverse proxies and load
	// balancers. Only when the peer is inside one of them are the
	// forwarding headers read, and then from the right: the client is the
	// rightmost address that is not itself trusted. List your proxies
	// only, never a network your clients live in: a trusted client could
	// claim any address. The default is none.
	TrustedProxies []netip.Prefix
	// IPv6PrefixLen is the length of the prefix IPv6 clients are grouped
	// by, 1 to 128 (128: every address alone). The default (0) is
	// DefaultIPv6PrefixLen (64). IPv4 clients are never grouped.
	IPv6PrefixLen int
	// Forwarded reads the RFC 7239 Forwarded field (its for= parameters)
	// instead of X-Forwarded-For. Set it when your proxies send Forwarded;
	// the other field is then ignored. The default is X-Forwarded-For.
	Forwarded bool
}

// ipConfig is a checked IPOptions: prefixes masked and unmapped, the
// default prefix length filled in.
type ipConfig struct {
	trusted   []netip.Prefix
	v6Bits    int
	forwarded bool
}

// Validate reports whether opts are valid: nil, or an error wrapping
// ErrInvalidSetup.
func (o IPOptions) Validate() error {
	_, err := o.config()
	return err
}

func (o IPOptions) config() (ipConfig, error) {
	c := ipConfig{v6Bits: o.IPv6PrefixLen, forwarded: o.Forwarded}
	if c.v6Bits == 0 {
		c.v6Bits = DefaultIPv6PrefixLen
	}
	if c.v6Bits < 1 || c.v6Bits > 128 {
		return c, fmt.Errorf("%w: IPv6PrefixLen %d is outside 1..128", ErrInvalidSetup, o.IPv6PrefixLen)
	}
	for _, p := range o.TrustedProxies {
		if !p.IsValid() {
			return c, fmt.Errorf("%w: invalid trusted proxy prefix %v", ErrInvalidSetup, p)
		}
		// ::ffff:10.0.0.0/104 is 10.0.0.0/8: addresses are unmapped too.
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		c.trusted = append(c.trusted, p.Masked())
	}
	return c, nil
}

// IP returns a KeyFunc that keys a request by its client's address: an
// IPv4 client by its address ("203.0.113.7"), an IPv6 client by the
// prefix it is in ("2001:db8:1:2::/64" with the default length). See
// [IPOptions.ClientIP] for how the client is found.
//
// With invalid opts (IPv6PrefixLen outside 0..128, an invalid prefix) the
// KeyFunc returns an error wrapping ErrInvalidSetup for every request, which
// goes to the route's error handler; IPOptions.Validate finds the mistake
// when the route is built.
func IP(opts IPOptions) KeyFunc {
	c, err := opts.config()
	if err != nil {
		return func(*http.Request) (string, error) { return "", err }
	}
	return func(r *http.Request) (string, error) {
		a, err := c.clientIP(r)
		if err != nil {
			return "", err
		}
		if a.Is4() {
			return a.String(), nil
		}
		return netip.PrefixFrom(a, c.v6Bits).Masked().String(), nil
	}
}

// ClientIP returns the address of the client that sent r.
//
// It starts at the connection's peer, Request.RemoteAddr. While the
// address at hand is inside a trusted proxy, it steps one hop to the left
// in the forwarding header (X-Forwarded-For, or the for= parameters of
// Forwarded when o.Forwarded is set), all lines of the field read as
// one list in order; the first address that is not trusted is the client.
// A client that sends its own forwarding header cannot get past this: its
// entries lie to the left of the one your proxy appended, and the walk
// stops there. If the peer is not trusted, the headers are not read at
// all.
//
// An entry that is not an IP address (malformed, "unknown", an obfuscated
// identifier) ends the walk, and so does the end of the list: the client is
// then the last address the walk reached, the trusted proxy nearest to
// it. Ports are dropped, IPv6 in brackets or quotes is accepted, IPv4-mapped
// IPv6 addresses become IPv4 and zones are removed.
//
// ClientIP returns an error wrapping [ErrNoKey] when RemoteAddr is not an
// IP address (a Unix socket), and an error when o is invalid.
func (o IPOptions) ClientIP(r *http.Request) (netip.Addr, error) {
	c, err := o.config()
	if err != nil {
		return netip.Addr{}, err
	}
	return c.clientIP(r)
}

func (c *ipConfig) clientIP(r *http.Request) (netip.Addr, error) {
	peer, ok := parseNode(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%w: RemoteAddr %q is not an IP address", ErrNoKey, r.RemoteAddr)
	}
	if !c.isTrusted(peer) {
		return peer, nil
	}
	var hops []string
	if c.forwarded {
		hops = forwardedFor(r.Header.Values("Forwarded"))
	} else {
		hops = forwardedList(r.Header.Values("X-Forwarded-For"))
	}
	client := peer
	for i := len(hops) - 1; i >= 0 && c.isTrusted(client); i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			break
		}
		client = a
	}
	return client, nil
}

func (c *ipConfig) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

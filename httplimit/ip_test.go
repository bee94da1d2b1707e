package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/ratelimit-go/ratelimit/httplimit"
)

var (
	proxies  = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	trustXFF = httplimit.IPOptions{TrustedProxies: proxies}
	trustFwd = httplimit.IPOptions{TrustedProxies: proxies, Forwarded: true}
)

type ipCase struct {
	name   string
	opts   httplimit.IPOptions
	remote string
	xff    []string // X-Forwarded-For lines
	fwd    []string // Forwarded lines
	want   string   // the key; "" for ErrNoKey
}

var ipCases = []ipCase{
	// No trusted proxy: the peer, whatever the headers say.
	{name: "peer v4", remote: "203.0.113.7:5555", want: "203.0.113.7"},
	{name: "peer v4 without port", remote: "203.0.113.7", want: "203.0.113.7"},
	{name: "spoofed X-Forwarded-For ignored", remote: "203.0.113.7:5555", xff: []string{"198.51.100.9"}, want: "203.0.113.7"},
	{name: "spoofed Forwarded ignored", remote: "203.0.113.7:5555", fwd: []string{"for=198.51.100.9"}, want: "203.0.113.7"},
	{name: "peer v6 grouped by /64", remote: "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", want: "2001:db8:1:2::/64"},
	{name: "same /64, same key", remote: "[2001:db8:1:2::1]:443", want: "2001:db8:1:2::/64"},
	{name: "next /64, its own key", remote: "[2001:db8:1:3::1]:443", want: "2001:db8:1:3::/64"},
	{name: "v6 grouped by /48", opts: httplimit.IPOptions{IPv6PrefixLen: 48}, remote: "[2001:db8:1:2::1]:443", want: "2001:db8:1::/48"},
	{name: "v6 alone at /128", opts: httplimit.IPOptions{IPv6PrefixLen: 128}, remote: "[2001:db8:1:2::1]:443", want: "2001:db8:1:2::1/128"},
	{name: "v4-mapped peer unmapped", remote: "[::ffff:203.0.113.7]:5555", want: "203.0.113.7"},
	{name: "zone dropped", remote: "[fe80::1%eth0]:80", want: "fe80::/64"},
	{name: "unix socket has no key", remote: "@", want: ""},
	{name: "empty RemoteAddr has no key", remote: "", want: ""},

	// An untrusted peer cannot borrow a trusted proxy's address.
	{name: "untrusted peer claiming a proxy", opts: trustXFF, remote: "203.0.113.7:1", xff: []string{"198.51.100.9, 10.0.0.2"}, want: "203.0.113.7"},

	// X-Forwarded-For from trusted proxies.
	{name: "trusted peer, no header", opts: trustXFF, remote: "10.0.0.1:80", want: "10.0.0.1"},
	{name: "one proxy", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
	{name: "client spoofs to the left", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"1.2.3.4, 5.6.7.8, 198.51.100.9"}, want: "198.51.100.9"},
	{name: "client spoofs a trusted address", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"10.9.9.9, 198.51.100.9"}, want: "198.51.100.9"},
	{name: "two proxies", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"198.51.100.9, 10.0.0.2"}, want: "198.51.100.9"},
	{name: "lines read as one list", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"1.2.3.4, 198.51.100.9", "10.0.0.2"}, want: "198.51.100.9"},
	{name: "empty elements ignored", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{" , 198.51.100.9 ,,"}, want: "198.51.100.9"},
	{name: "every hop trusted: the leftmost", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"10.0.0.3, 10.0.0.2"}, want: "10.0.0.3"},
	{name: "malformed rightmost: the peer", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"198.51.100.9, garbage"}, want: "10.0.0.1"},
	{name: "malformed after a proxy: that proxy", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"198.51.100.9, bogus, 10.0.0.2"}, want: "10.0.0.2"},
	{name: "malformed left of the client: not reached", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"bogus, 198.51.100.9"}, want: "198.51.100.9"},
	{name: "unknown", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"unknown"}, want: "10.0.0.1"},
	{name: "v4 with port", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"198.51.100.9:4711"}, want: "198.51.100.9"},
	{name: "v4 with a bad port", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"198.51.100.9:x"}, want: "10.0.0.1"},
	{name: "v6 bare", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"2001:db8:5:6::1"}, want: "2001:db8:5:6::/64"},
	{name: "v6 bracketed with port", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"[2001:db8:5:6::1]:443"}, want: "2001:db8:5:6::/64"},
	{name: "v6 bracketed", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"[2001:db8:5:6::1]"}, want: "2001:db8:5:6::/64"},
	{name: "v4-mapped client", opts: trustXFF, remote: "10.0.0.1:80", xff: []string{"::ffff:198.51.100.9"}, want: "198.51.100.9"},
	{name: "v4-mapped proxy", opts: trustXFF, remote: "[::ffff:10.0.0.1]:80", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
	{name: "v6 proxy", opts: trustXFF, remote: "[2001:db8:ffff::1]:80", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
	{name: "mapped trusted prefix", opts: httplimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}}, remote: "10.0.0.1:80", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
	{name: "unmasked trusted prefix", opts: httplimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/8")}}, remote: "10.200.0.1:80", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
	{name: "X-Forwarded-For mode ignores Forwarded", opts: trustXFF, remote: "10.0.0.1:80", fwd: []string{"for=198.51.100.9"}, want: "10.0.0.1"},

	// RFC 7239 Forwarded from trusted proxies.
	{name: "fwd one proxy", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, want: "192.0.2.60"},
	{name: "fwd case-insensitive name", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"For=192.0.2.60"}, want: "192.0.2.60"},
	{name: "fwd quoted v6 with port", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for="[2001:db8:cafe::17]:4711"`}, want: "2001:db8:cafe::/64"},
	{name: "fwd quoted v6", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for="[2001:db8:cafe::17]"`}, want: "2001:db8:cafe::/64"},
	{name: "fwd unquoted v6 (lenient)", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for=[2001:db8:cafe::17]`}, want: "2001:db8:cafe::/64"},
	{name: "fwd obfuscated port", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for="[2001:db8:cafe::17]:_p1"`}, want: "2001:db8:cafe::/64"},
	{name: "fwd quoted v4 with port", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for="192.0.2.60:8080"`}, want: "192.0.2.60"},
	{name: "fwd escaped quoted", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for="192.0.2.\60"`}, want: "192.0.2.60"},
	{name: "fwd two proxies", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=192.0.2.60, for=10.0.0.2;by=10.0.0.1"}, want: "192.0.2.60"},
	{name: "fwd lines read as one list", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=1.2.3.4, for=192.0.2.60", "for=10.0.0.2"}, want: "192.0.2.60"},
	{name: "fwd spoof to the left", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for=1.2.3.4;x="a,b;c", for=192.0.2.60`}, want: "192.0.2.60"},
	{name: "fwd comma in quotes is no separator", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for=192.0.2.60;x="a, for=9.9.9.9"`}, want: "192.0.2.60"},
	{name: "fwd spaces around separators", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{` for=192.0.2.60 ; proto=https ,for=10.0.0.2 `}, want: "192.0.2.60"},
	{name: "fwd unknown", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=unknown"}, want: "10.0.0.1"},
	{name: "fwd obfuscated node", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=_hidden, for=10.0.0.2"}, want: "10.0.0.2"},
	{name: "fwd element without for", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=192.0.2.60, proto=https"}, want: "10.0.0.1"},
	{name: "fwd two for in one element", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=192.0.2.60;for=192.0.2.61"}, want: "10.0.0.1"},
	{name: "fwd unterminated quote", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`for="192.0.2.60`}, want: "10.0.0.1"},
	{name: "fwd pair without value", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{"for=192.0.2.60, for="}, want: "10.0.0.1"},
	{name: "fwd garbage", opts: trustFwd, remote: "10.0.0.1:80", fwd: []string{`=;;"",`}, want: "10.0.0.1"},
	{name: "fwd mode ignores X-Forwarded-For", opts: trustFwd, remote: "10.0.0.1:80", xff: []string{"198.51.100.9"}, want: "10.0.0.1"},
}

func TestIP(t *testing.T) {
	for _, c := range ipCases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = c.remote
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range c.fwd {
				r.Header.Add("Forwarded", v)
			}
			got, err := httplimit.IP(c.opts)(r)
			if c.want == "" {
				if !errors.Is(err, httplimit.ErrNoKey) {
					t.Fatalf("key = %q, %v; want an error wrapping ErrNoKey", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("key = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:80"
	r.Header.Set("X-Forwarded-For", "2001:db8:5:6::1")
	got, err := trustXFF.ClientIP(r)
	if want := netip.MustParseAddr("2001:db8:5:6::1"); err != nil || got != want {
		t.Fatalf("ClientIP = %v, %v; want %v (ungrouped)", got, err, want)
	}
	if _, err := (httplimit.IPOptions{IPv6PrefixLen: 129}).ClientIP(r); err == nil {
		t.Fatal("ClientIP with IPv6PrefixLen 129: no error")
	}
}

func TestIPRejectsInvalidOptions(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, opts := range []httplimit.IPOptions{
		{IPv6PrefixLen: -1},
		{IPv6PrefixLen: 129},
		{TrustedProxies: []netip.Prefix{{}}},
	} {
		if err := opts.Validate(); !errors.Is(err, httplimit.ErrInvalidSetup) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidSetup", opts, err)
		}
		if key, err := httplimit.IP(opts)(r); !errors.Is(err, httplimit.ErrInvalidSetup) || key != "" {
			t.Errorf("IP(%+v) keyed a request: %q, %v", opts, key, err)
		}
	}
	if err := (httplimit.IPOptions{}).Validate(); err != nil {
		t.Errorf("the zero IPOptions: %v", err)
	}
}

// FuzzIP checks that no header, however broken, makes IP panic or return
// an empty key, and that an untrusted peer is never overridden.
func FuzzIP(f *testing.F) {
	for _, c := range ipCases {
		for _, v := range append(c.xff, c.fwd...) {
			f.Add(c.remote, v)
		}
	}
	keys := []httplimit.KeyFunc{httplimit.IP(trustXFF), httplimit.IP(trustFwd)}
	untrusted := httplimit.IP(httplimit.IPOptions{})
	f.Fuzz(func(t *testing.T, remote, header string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", header)
		r.Header.Set("Forwarded", header)
		for _, key := range keys {
			k, err := key(r)
			if err == nil && k == "" {
				t.Fatalf("empty key for %q, %q", remote, header)
			}
		}
		peer, err1 := untrusted(r)
		r.Header = nil
		bare, err2 := untrusted(r)
		if peer != bare || (err1 == nil) != (err2 == nil) {
			t.Fatalf("an untrusted peer's headers changed its key: %q vs %q", peer, bare)
		}
	})
}

package grpclimit_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/test/bufconn"
)

// callCtx is the context of a call from addr (nil: no peer) with the
// incoming metadata kv.
func callCtx(addr net.Addr, auth credentials.AuthInfo, kv ...string) context.Context {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	if addr != nil || auth != nil {
		ctx = peer.NewContext(ctx, &peer.Peer{Addr: addr, AuthInfo: auth})
	}
	return ctx
}

func tcp(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

func TestKeys(t *testing.T) {
	user := grpclimit.Identity(func(ctx context.Context) (string, bool) {
		v := metadata.ValueFromIncomingContext(ctx, "x-user")
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	})
	trusted := grpclimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, c := range []struct {
		name  string
		key   grpclimit.KeyFunc
		ctx   context.Context
		want  string
		noKey bool
	}{
		{"global", grpclimit.Global(), context.Background(), "global", false},
		{"identity", user, callCtx(nil, nil, "x-user", "alice"), "user:alice", false},
		{"anonymous", user, callCtx(nil, nil), "", true},
		{"empty identity", user, callCtx(nil, nil, "x-user", ""), "", true},
		{"metadata", grpclimit.Metadata("x-api-key"), callCtx(nil, nil, "x-api-key", "k1", "x-api-key", "k2"), "header:X-Api-Key:k1", false},
		{"metadata name in any case", grpclimit.Metadata("X-API-KEY"), callCtx(nil, nil, "x-api-key", "k1"), "header:X-Api-Key:k1", false},
		{"no metadata", grpclimit.Metadata("x-api-key"), callCtx(nil, nil), "", true},
		{"empty metadata", grpclimit.Metadata("x-api-key"), callCtx(nil, nil, "x-api-key", ""), "", true},
		{"no incoming metadata", grpclimit.Metadata("x-api-key"), context.Background(), "", true},
		{"IP of a TCP peer", grpclimit.IP(grpclimit.IPOptions{}), callCtx(tcp("203.0.113.7:5000"), nil), "203.0.113.7", false},
		{"IPv4-mapped peer", grpclimit.IP(grpclimit.IPOptions{}), callCtx(tcp("[::ffff:203.0.113.7]:5000"), nil), "203.0.113.7", false},
		{"IP through a proxy", grpclimit.IP(trusted), callCtx(tcp("10.1.2.3:5000"), nil, "x-forwarded-for", "203.0.113.7, 10.9.9.9"), "203.0.113.7", false},
		{"no peer", grpclimit.IP(grpclimit.IPOptions{}), context.Background(), "", true},
		{"Unix socket peer", grpclimit.IP(grpclimit.IPOptions{}), callCtx(&net.UnixAddr{Name: "/run/app.sock", Net: "unix"}, nil), "", true},
		{"in-memory peer", grpclimit.IP(grpclimit.IPOptions{}), callCtx(bufconn.Listen(1).Addr(), nil), "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := c.key(c.ctx, check)
			if c.noKey {
				if !errors.Is(err, grpclimit.ErrNoKey) || k != "" {
					t.Errorf("(%q, %v), want an error wrapping ErrNoKey", k, err)
				}
				return
			}
			if err != nil || k != c.want {
				t.Errorf("(%q, %v), want %q", k, err, c.want)
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	opts := grpclimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Forwarded: true}
	a, err := grpclimit.ClientIP(callCtx(tcp("10.1.2.3:5000"), nil,
		"forwarded", `for=1.2.3.4, for="[2001:db8::7]:443"`, "x-forwarded-for", "5.6.7.8"), opts)
	if err != nil || a != netip.MustParseAddr("2001:db8::7") {
		t.Errorf("(%v, %v), want 2001:db8::7", a, err)
	}
	if _, err := grpclimit.ClientIP(context.Background(), opts); !errors.Is(err, grpclimit.ErrNoKey) {
		t.Errorf("no peer: %v", err)
	}
	_, err = grpclimit.ClientIP(callCtx(tcp("10.1.2.3:5000"), nil), grpclimit.IPOptions{IPv6PrefixLen: -1})
	if !errors.Is(err, grpclimit.ErrInvalidSetup) || !errors.Is(err, httplimit.ErrInvalidSetup) {
		t.Errorf("invalid options: %v", err)
	}
}

// TestKeysAgreeWithHTTP checks that a caller counts in one bucket whether
// it calls over HTTP (httplimit) or gRPC.
func TestKeysAgreeWithHTTP(t *testing.T) {
	trusted := grpclimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:41000"
	r.Header.Set("X-Forwarded-For", "1.2.3.4, 2001:db8:aa:bb::1")
	r.Header.Set("X-Api-Key", "k1")
	ctx := callCtx(tcp("10.0.0.1:41000"), nil, "x-forwarded-for", "1.2.3.4, 2001:db8:aa:bb::1", "x-api-key", "k1")
	for _, c := range []struct {
		name string
		http httplimit.KeyFunc
		grpc grpclimit.KeyFunc
	}{
		{"global", httplimit.Global(), grpclimit.Global()},
		{"user", httplimit.User(func(*http.Request) (string, bool) { return "alice", true }),
			grpclimit.Identity(func(context.Context) (string, bool) { return "alice", true })},
		{"header", httplimit.Header("x-api-key"), grpclimit.Metadata("x-api-key")},
		{"IP", httplimit.IP(trusted), grpclimit.IP(trusted)},
	} {
		hk, herr := c.http(r)
		gk, gerr := c.grpc(ctx, check)
		if herr != nil || gerr != nil || hk != gk {
			t.Errorf("%s: HTTP (%q, %v), gRPC (%q, %v)", c.name, hk, herr, gk, gerr)
		}
	}
}

// pki is a certificate authority and certificates it issued.
type pki struct {
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPool *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &pki{ca: ca, caKey: key, caPool: pool}
}

// issue returns a certificate for tmpl's names, signed by the CA.
func (p *pki) issue(t *testing.T, serial int64, tmpl x509.Certificate, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestClientCert runs mutual TLS over an in-memory connection and checks
// which certificates key a call, and how.
func TestClientCert(t *testing.T) {
	p := newPKI(t)
	serverCert := p.issue(t, 2, x509.Certificate{DNSNames: []string{"bufnet"}}, x509.ExtKeyUsageServerAuth)
	spiffe, _ := url.Parse("spiffe://example.org/billing")
	for _, c := range []struct {
		name     string
		clientCA tls.ClientAuthType
		cert     *x509.Certificate // nil: no client certificate
		code     codes.Code
		key      string
	}{
		{"URI SAN first", tls.RequireAndVerifyClientCert,
			&x509.Certificate{Subject: pkix.Name{CommonName: "billing"}, URIs: []*url.URL{spiffe}, DNSNames: []string{"billing.internal"}},
			codes.OK, "cert:spiffe://example.org/billing"},
		{"then CommonName", tls.RequireAndVerifyClientCert,
			&x509.Certificate{Subject: pkix.Name{CommonName: "billing"}, DNSNames: []string{"billing.internal"}},
			codes.OK, "cert:billing"},
		{"then DNS SAN", tls.RequireAndVerifyClientCert,
			&x509.Certificate{DNSNames: []string{"billing.internal"}}, codes.OK, "cert:billing.internal"},
		{"a certificate that names nothing", tls.RequireAndVerifyClientCert,
			&x509.Certificate{Subject: pkix.Name{Organization: []string{"Example"}}}, codes.Unauthenticated, ""},
		{"no certificate", tls.VerifyClientCertIfGiven, nil, codes.Unauthenticated, ""},
		{"an unverified certificate", tls.RequireAnyClientCert,
			&x509.Certificate{Subject: pkix.Name{CommonName: "billing"}}, codes.Unauthenticated, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			rule := ratelimit.Rule{Name: "r", Limit: ratelimit.PerMinute(5)}
			srv := grpc.NewServer(
				grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: c.clientCA, ClientCAs: p.caPool})),
				grpc.UnaryInterceptor(grpclimit.UnaryServerInterceptor(e.lim, grpclimit.Methods{"*": {{Rule: rule, Key: grpclimit.ClientCert()}}},
					grpclimit.Options{Logger: discard})))
			healthpb.RegisterHealthServer(srv, health.NewServer())
			lis := bufconn.Listen(1 << 20)
			go srv.Serve(lis)
			t.Cleanup(srv.Stop)

			clientTLS := &tls.Config{RootCAs: p.caPool, ServerName: "bufnet"}
			if c.cert != nil {
				clientTLS.Certificates = []tls.Certificate{p.issue(t, 3, *c.cert, x509.ExtKeyUsageClientAuth)}
			}
			conn, err := grpc.NewClient("passthrough:///bufnet",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
				grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			o := call(t, healthpb.NewHealthClient(conn))
			if o.code != c.code {
				t.Fatalf("%v %q, want %v", o.code, o.message, c.code)
			}
			if c.key != "" {
				peek(t, e, rule, c.key, 4)
			}
		})
	}
}

package grpclimit_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// BenchmarkUnaryInterceptor measures what the interceptor adds to a call on
// a local-only Limiter (no network): keys, one Allow per policy, the
// metadata. Every call is allowed.
func BenchmarkUnaryInterceptor(b *testing.B) {
	lim, err := ratelimit.New(nil, ratelimit.Options{Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	defer lim.Close()
	rule := ratelimit.Rule{Name: "bench", Limit: ratelimit.Limit{Rate: 1 << 30, Window: time.Millisecond}}
	trusted := grpclimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, c := range []struct {
		name string
		key  grpclimit.KeyFunc
	}{
		{"global", grpclimit.Global()},
		{"ip-through-proxy", grpclimit.IP(trusted)},
	} {
		b.Run(c.name, func(b *testing.B) {
			ic := grpclimit.UnaryServerInterceptor(lim, grpclimit.Methods{check: {{Rule: rule, Key: c.key}}}, grpclimit.Options{})
			ctx := grpc.NewContextWithServerTransportStream(
				callCtx(tcp("10.1.2.3:5000"), nil, "x-forwarded-for", "203.0.113.7, 10.9.9.9"), nopStream{})
			info := &grpc.UnaryServerInfo{FullMethod: check}
			handler := func(context.Context, any) (any, error) { return nil, nil }
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := ic(ctx, nil, info, handler); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// nopStream stands for a server's stream: it takes the header metadata
// the interceptor sets and drops it.
type nopStream struct{}

func (nopStream) Method() string               { return check }
func (nopStream) SetHeader(metadata.MD) error  { return nil }
func (nopStream) SendHeader(metadata.MD) error { return nil }
func (nopStream) SetTrailer(metadata.MD) error { return nil }

// BenchmarkUnmatched measures a call whose method no entry limits.
func BenchmarkUnmatched(b *testing.B) {
	lim, err := ratelimit.New(nil, ratelimit.Options{Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	defer lim.Close()
	rule := ratelimit.Rule{Name: "bench", Limit: ratelimit.PerSecond(10)}
	ic := grpclimit.UnaryServerInterceptor(lim, grpclimit.Methods{"/shop.Coupons/*": {{Rule: rule, Key: grpclimit.Global()}}}, grpclimit.Options{})
	info := &grpc.UnaryServerInfo{FullMethod: check}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ic(ctx, nil, info, handler)
		}
	})
}

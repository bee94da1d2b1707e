package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// exampleServer serves the health service in memory through opts and
// returns a client of it, and a function that stops both.
func exampleServer(opts ...grpc.ServerOption) (healthpb.HealthClient, func()) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	return healthpb.NewHealthClient(conn), func() { conn.Close(); srv.Stop() }
}

// show prints what a client sees of one call: its code, the rate limit
// metadata, and a denial's status and details.
func show(err error, header metadata.MD) {
	st := status.Convert(err)
	fmt.Println(st.Code(), "ratelimit:", header.Get(grpclimit.HeaderRateLimit))
	if err == nil {
		return
	}
	fmt.Println("    ratelimit-policy:", header.Get(grpclimit.HeaderPolicy))
	fmt.Printf("    message: %q\n", st.Message())
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			fmt.Println("    RetryInfo: retry_delay", d.GetRetryDelay().AsDuration())
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				fmt.Printf("    QuotaFailure: quota_id %q quota_value %d description %q\n",
					v.GetQuotaId(), v.GetQuotaValue(), v.GetDescription())
			}
		}
	}
}

// A method limited per user: three calls in any minute. The user comes
// from metadata here; in a service, from its authentication interceptor.
func ExampleUnaryServerInterceptor() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	lim, clk := env.Limiter, env.Clock

	user := grpclimit.Identity(func(ctx context.Context) (string, bool) {
		v := metadata.ValueFromIncomingContext(ctx, "x-user-id")
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	})
	rule := ratelimit.Rule{Name: "health", Limit: ratelimit.PerMinute(3)}
	methods := grpclimit.Methods{
		"/grpc.health.v1.Health/Check": {{Rule: rule, Key: user}},
	}
	if err := grpclimit.Validate(lim, methods, grpclimit.Options{}); err != nil {
		panic(err)
	}
	client, stopServer := exampleServer(grpc.UnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, methods, grpclimit.Options{})))
	defer stopServer()

	// Calls 10.0005s apart: the fourth, at 30.0015s, is denied. The first
	// call's event leaves the window 29.9985s later, which RetryInfo rounds
	// up to the millisecond and the ratelimit metadata to the second.
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", "alice")
	for range 4 {
		var header metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		show(err, header)
		clk.Advance(10*time.Second + 500*time.Microsecond)
	}
	// An anonymous call has no key.
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err), status.Convert(err).Message())
	// Output:
	// OK ratelimit: ["health";r=2;t=60]
	// OK ratelimit: ["health";r=1;t=60]
	// OK ratelimit: ["health";r=0;t=60]
	// ResourceExhausted ratelimit: ["health";r=0;t=30]
	//     ratelimit-policy: ["health";q=3;w=60]
	//     message: "Too many requests, try again later."
	//     RetryInfo: retry_delay 29.999s
	//     QuotaFailure: quota_id "health" quota_value 3 description "quota \"health\" exceeded: 3 per 1m0s"
	// Unauthenticated This method is rate limited per caller, and the call does not say who is calling.
}

// Behind a load balancer at 10.0.0.1, x-forwarded-for is read from the
// right; what the client wrote into it itself is never reached. The calls
// are built by hand here, as the server sees them.
func ExampleIP() {
	key := grpclimit.IP(grpclimit.IPOptions{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")},
	})
	for _, c := range []struct{ peer, xff string }{
		{"10.0.0.1:41000", "198.51.100.9"},           // through the balancer
		{"10.0.0.1:41000", "1.2.3.4, 198.51.100.9"},  // the client tried to spoof
		{"198.51.100.9:5000", "1.2.3.4"},             // straight in: metadata ignored
		{"10.0.0.1:41000", "2001:db8:aa:bb:1:2:3:4"}, // IPv6: its /64
		{"[2001:db8:aa:bb::9]:5000", ""},             // the same /64, directly
	} {
		ctx := peer.NewContext(context.Background(), &peer.Peer{
			Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.peer)),
		})
		if c.xff != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("x-forwarded-for", c.xff))
		}
		k, _ := key(ctx, "/shop.Catalog/Get")
		fmt.Println(k)
	}
	// Output:
	// 198.51.100.9
	// 198.51.100.9
	// 198.51.100.9
	// 2001:db8:aa:bb::/64
	// 2001:db8:aa:bb::/64
}

// Several policies on one method: per client address against scrapers,
// and a global cap. The first denial stops: the global policy records
// nothing for it. Streams count once, when they open.
func ExampleStreamServerInterceptor() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	lim := env.Limiter

	perClient := ratelimit.Rule{Name: "watch:client", Limit: ratelimit.PerSecond(2)}
	global := ratelimit.Rule{Name: "watch:all", Limit: ratelimit.PerSecond(1000)}
	methods := grpclimit.Methods{"/grpc.health.v1.Health/Watch": {
		{Name: "per-client", Rule: perClient, Key: grpclimit.Metadata("x-client-id")},
		{Name: "global", Rule: global, Key: grpclimit.Global()},
	}}
	client, stopServer := exampleServer(grpc.StreamInterceptor(grpclimit.StreamServerInterceptor(lim, methods, grpclimit.Options{})))
	defer stopServer()

	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-client-id", "c1"))
	defer cancel()
	for range 3 {
		s, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			panic(err)
		}
		header, _ := s.Header()
		update, err := s.Recv()
		fmt.Println(status.Code(err), update.GetStatus(), header.Get(grpclimit.HeaderRateLimit))
	}
	left, _ := lim.Peek(context.Background(), global, "global")
	fmt.Println("global quota left:", left.Remaining)
	// Output:
	// OK SERVING ["per-client";r=1;t=1, "global";r=999;t=1]
	// OK SERVING ["per-client";r=0;t=1, "global";r=998;t=1]
	// ResourceExhausted UNKNOWN ["per-client";r=0;t=1]
	// global quota left: 998
}

// A method limited in tokens per caller, whose cost is known only once the
// answer is written, as a language model's completion: the policy reserves
// the estimate the call's metadata gives, and the handler settles the
// tokens it used, so that the rest is free again for the next call.
func ExampleSettle() {
	env, err := ratelimittest.NewLimiter(ratelimit.Options{})
	if err != nil {
		panic(err)
	}
	defer env.Close()
	lim := env.Limiter

	maxTokens := func(ctx context.Context, fullMethod string, req any) int {
		v := metadata.ValueFromIncomingContext(ctx, "x-max-tokens")
		if len(v) == 0 {
			return 256 // no estimate from the caller: a default
		}
		n, _ := strconv.Atoi(v[0])
		return min(max(n, 1), 1000) // within the rule's Rate
	}
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	methods := grpclimit.Methods{"/grpc.health.v1.Health/Check": {
		{Rule: tokens, Key: grpclimit.Metadata("x-client-id"), Cost: maxTokens},
	}}
	// The handler's part, in an interceptor here since the health
	// service's handler is not ours: serve, then settle what was used.
	complete := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		used := 120 // the tokens of the answer, known once it is written
		if err := grpclimit.Settle(ctx, used); err != nil {
			return nil, err
		}
		return resp, err
	}
	client, stopServer := exampleServer(grpc.ChainUnaryInterceptor(grpclimit.UnaryServerInterceptor(lim, methods, grpclimit.Options{}), complete))
	defer stopServer()

	for _, estimate := range []string{"800", "800", ""} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-client-id", "c1")
		if estimate != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-max-tokens", estimate)
		}
		var header metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		show(err, header)
	}
	left, _ := lim.Peek(context.Background(), tokens, "header:X-Client-Id:c1")
	fmt.Println("tokens left:", left.Remaining)
	// Output:
	// OK ratelimit: ["tokens";r=200;t=60]
	// OK ratelimit: ["tokens";r=80;t=60]
	// OK ratelimit: ["tokens";r=504;t=60]
	// tokens left: 640
}

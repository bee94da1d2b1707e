package grpclimit_test

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// epoch is where the tests' fake clocks start.
var epoch = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

var discard = slog.New(slog.DiscardHandler)

// The methods of the health service the tests limit: Check is unary, Watch
// a server stream.
const (
	check = "/grpc.health.v1.Health/Check"
	watch = "/grpc.health.v1.Health/Watch"
)

// env is a limiter on a fresh miniredis with a fake clock.
type env struct {
	mr  *miniredis.Miniredis
	clk *ratelimittest.Clock
	lim *ratelimit.Limiter
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// A generous Timeout: under -race a call to miniredis can take longer
	// than the default 100ms, and a timed-out call is decided locally.
	l, err := ratelimittest.NewLimiter(ratelimit.Options{Clock: ratelimittest.NewClock(epoch), Logger: discard, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("ratelimittest.NewLimiter: %v", err)
	}
	t.Cleanup(l.Close)
	return &env{mr: l.Redis, clk: l.Clock, lim: l.Limiter}
}

// peerListener is a bufconn listener whose connections come from addr, as
// if the server were listening on TCP: bufconn's own peers have no IP.
type peerListener struct {
	*bufconn.Listener
	addr net.Addr // nil: bufconn's own
}

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.addr == nil {
		return c, err
	}
	return peerConn{c, l.addr}, nil
}

type peerConn struct {
	net.Conn
	addr net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.addr }

// serve starts an in-memory server of the health service (status SERVING)
// with the interceptors, whose calls come from the peer address peer ("":
// bufconn's, which is no IP), and returns a client of it.
func serve(t testing.TB, peer string, unary grpc.UnaryServerInterceptor, stream grpc.StreamServerInterceptor) healthpb.HealthClient {
	t.Helper()
	lis := peerListener{Listener: bufconn.Listen(1 << 20)}
	if peer != "" {
		lis.addr = net.TCPAddrFromAddrPort(netip.MustParseAddrPort(peer))
	}
	var opts []grpc.ServerOption
	if unary != nil {
		opts = append(opts, grpc.UnaryInterceptor(unary))
	}
	if stream != nil {
		opts = append(opts, grpc.StreamInterceptor(stream))
	}
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// unaryServer serves methods through the unary interceptor only.
func unaryServer(t testing.TB, e *env, peer string, methods grpclimit.Methods, opts grpclimit.Options) healthpb.HealthClient {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard
	}
	return serve(t, peer, grpclimit.UnaryServerInterceptor(e.lim, methods, opts), nil)
}

// outcome is what a client sees of one call.
type outcome struct {
	code    codes.Code
	message string
	retry   time.Duration // RetryInfo's delay; 0 without one
	quota   string        // the QuotaFailure's violation, "id=… value=… desc"
	header  metadata.MD
}

// call makes one Check call with the metadata kv (pairs) and returns what
// the client saw.
func call(t testing.TB, c healthpb.HealthClient, kv ...string) outcome {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), kv...)
	var header metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	return outcomeOf(t, err, header)
}

func outcomeOf(t testing.TB, err error, header metadata.MD) outcome {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a status error: %v", err)
	}
	o := outcome{code: st.Code(), message: st.Message(), header: header}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			o.retry = d.GetRetryDelay().AsDuration()
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				o.quota = "id=" + v.GetQuotaId() + " value=" + strconv.FormatInt(v.GetQuotaValue(), 10) + " " + v.GetDescription()
			}
		default:
			t.Errorf("unexpected detail %T %v", d, d)
		}
	}
	return o
}

// field returns the values of one header metadata key, joined by " | ".
func field(md metadata.MD, key string) string { return strings.Join(md.Get(key), " | ") }

// openWatch opens a Watch stream and returns what its first Recv shows,
// and a function that ends the stream (called at cleanup too).
func openWatch(t testing.TB, client healthpb.HealthClient) (outcome, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	header, _ := s.Header()
	_, err = s.Recv()
	return outcomeOf(t, err, header), cancel
}

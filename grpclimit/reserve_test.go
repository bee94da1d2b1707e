package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/grpclimit"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// backend is a Limiter and its fake clock.
type backend struct {
	lim *ratelimit.Limiter
	clk *ratelimittest.Clock
}

// backends returns a Limiter with a fake clock at epoch on each backend:
// miniredis, and this process alone.
func backends(t *testing.T) map[string]backend {
	t.Helper()
	clk := ratelimittest.NewClock(epoch)
	local, err := ratelimit.New(nil, ratelimit.Options{Clock: clk, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	e := newEnv(t)
	return map[string]backend{"miniredis": {e.lim, e.clk}, "local": {local, clk}}
}

// peekLeft returns what rule has left for key.
func peekLeft(t *testing.T, lim *ratelimit.Limiter, rule ratelimit.Rule, key string) int {
	t.Helper()
	res, err := lim.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatalf("Peek %s %s: %v", rule.Name, key, err)
	}
	return res.Remaining
}

// first returns the first value of the incoming metadata key, "" without
// one.
func first(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// costs is the Cost of the tests' reserving policies: the x-estimate
// metadata's value. It keeps the requests it was given.
type costs struct {
	mu   sync.Mutex
	reqs []any
}

func (c *costs) cost(ctx context.Context, _ string, req any) int {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	n, _ := strconv.Atoi(first(ctx, "x-estimate"))
	return n
}

// settler stands for the handlers: interceptors run after grpclimit's,
// which settle the call's reservations at the x-actual metadata's values,
// a Settle each, in the context the handler gets, and keep what each
// returned.
type settler struct {
	mu   sync.Mutex
	errs []error
}

func (s *settler) settle(ctx context.Context) {
	for _, v := range metadata.ValueFromIncomingContext(ctx, "x-actual") {
		n, _ := strconv.Atoi(v)
		err := grpclimit.Settle(ctx, n)
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
	}
}

func (s *settler) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	s.settle(ctx)
	return resp, err
}

func (s *settler) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	s.settle(ss.Context()) // a Watch runs until the client ends it: its work is done first
	return handler(srv, ss)
}

// chainUnary returns an interceptor that runs outer, then inner, then the
// handler, as grpc.ChainUnaryInterceptor would.
func chainUnary(outer, inner grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return outer(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			return inner(ctx, req, info, handler)
		})
	}
}

// chainStream is chainUnary for streams.
func chainStream(outer, inner grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return outer(srv, ss, info, func(srv any, ss grpc.ServerStream) error {
			return inner(srv, ss, info, handler)
		})
	}
}

// took returns the errors of the Settles since the last call, and forgets
// them.
func (s *settler) took() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.errs
	s.errs = nil
	return errs
}

// checkSettled checks the errors of the Settles since the last call:
// errors.Is each of want's (nil: none).
func checkSettled(t *testing.T, s *settler, want ...error) {
	t.Helper()
	errs := s.took()
	if len(errs) != len(want) {
		t.Fatalf("%d Settles (%v), want %d", len(errs), errs, len(want))
	}
	for i, err := range errs {
		if want[i] == nil && err != nil || !errors.Is(err, want[i]) {
			t.Errorf("Settle %d: %v, want %v", i, err, want[i])
		}
	}
}

// TestReserve runs unary calls through a method that reserves an estimate
// of tokens per user and limits calls per IP, and checks what the client
// is told and what each policy has left once the handler settled.
func TestReserve(t *testing.T) {
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	perIP := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(4)}
	const pol = `"tokens";q=1000;w=60, "ip";q=4;w=60`
	type step struct {
		at       time.Duration
		estimate string
		actual   []string // x-actual values: a Settle each
		want     want
		settled  []error // errors.Is each Settle's error (nil: none)
		left     int     // tokens left for alice afterwards
	}
	steps := []step{
		{estimate: "100", actual: []string{"40"}, settled: []error{nil}, left: 960,
			want: want{code: codes.OK, policy: pol, limit: `"tokens";r=900;t=60, "ip";r=3;t=60`}},
		{at: time.Second, estimate: "100", actual: []string{"250"}, settled: []error{nil}, left: 710,
			want: want{code: codes.OK, policy: pol, limit: `"tokens";r=860;t=60, "ip";r=2;t=60`}},
		// Not settled: the estimate stands.
		{at: 2 * time.Second, estimate: "100", left: 610,
			want: want{code: codes.OK, policy: pol, limit: `"tokens";r=610;t=60, "ip";r=1;t=60`}},
		// Settled twice: the second is ErrSettled and changes nothing.
		{at: 3 * time.Second, estimate: "100", actual: []string{"10", "500"}, settled: []error{nil, ratelimit.ErrSettled}, left: 600,
			want: want{code: codes.OK, policy: pol, limit: `"tokens";r=510;t=60, "ip";r=0;t=60`}},
		// Denied by ip, asked after the reserving policy: its reservation
		// is cancelled, and the metadata counts it as left.
		{at: 4 * time.Second, estimate: "100", actual: []string{"1"}, left: 600,
			want: want{code: codes.ResourceExhausted, retry: 56 * time.Second, quota: `id=ip value=4 quota "ip" exceeded: 4 per 1m0s`,
				policy: pol, limit: `"tokens";r=600;t=60, "ip";r=0;t=56`}},
		// The first events leave the windows (tokens gets 40 back): more
		// than the estimate is settled, past what tokens has left.
		{at: 60 * time.Second, estimate: "600", actual: []string{"900"}, settled: []error{nil}, left: 0,
			want: want{code: codes.OK, policy: pol, limit: `"tokens";r=40;t=60, "ip";r=0;t=60`}},
		// tokens is in debt (1010 in its window at 61s): denied until 910
		// is, at 62s, when the 100 of 2s leave.
		{at: 61 * time.Second, estimate: "1", left: 0,
			want: want{code: codes.ResourceExhausted, retry: time.Second, policy: `"tokens";q=1000;w=60`, limit: `"tokens";r=0;t=1`}},
	}
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s, c := &settler{}, &costs{}
			methods := grpclimit.Methods{check: {
				{Rule: perIP, Key: grpclimit.IP(grpclimit.IPOptions{})},
				{Rule: tokens, Key: grpclimit.Metadata("x-user"), Cost: c.cost},
			}}
			client := serve(t, "203.0.113.7:5555", chainUnary(
				grpclimit.UnaryServerInterceptor(b.lim, methods, grpclimit.Options{Logger: discard}), s.unary), nil)
			for i, st := range steps {
				b.clk.Set(epoch.Add(st.at))
				kv := []string{"x-user", "alice", "x-estimate", st.estimate}
				for _, a := range st.actual {
					kv = append(kv, "x-actual", a)
				}
				t.Logf("step %d at %v", i, st.at)
				checkOutcome(t, call(t, client, kv...), st.want)
				checkSettled(t, s, st.settled...)
				if got := peekLeft(t, b.lim, tokens, "header:X-User:alice"); got != st.left {
					t.Errorf("tokens has %d left, want %d", got, st.left)
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			for _, req := range c.reqs {
				if _, ok := req.(*healthpb.HealthCheckRequest); !ok {
					t.Fatalf("Cost was given %T, want the call's request", req)
				}
			}
		})
	}
}

// TestReserveStream: a stream reserves when it opens, Cost given no
// request, and its handler settles in the stream's context; a stream
// denied by a later policy cancels the reservation.
func TestReserveStream(t *testing.T) {
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	streams := ratelimit.Rule{Name: "streams", Limit: ratelimit.PerMinute(2)}
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s, c := &settler{}, &costs{}
			methods := grpclimit.Methods{watch: {
				{Rule: streams, Key: grpclimit.Global()},
				{Rule: tokens, Key: grpclimit.Global(), Cost: c.cost},
			}}
			client := serve(t, "", nil, chainStream(
				grpclimit.StreamServerInterceptor(b.lim, methods, grpclimit.Options{Logger: discard}), s.stream))
			open := func(estimate, actual string) outcome {
				t.Helper()
				ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-estimate", estimate, "x-actual", actual))
				defer cancel()
				st, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
				if err != nil {
					t.Fatal(err)
				}
				header, _ := st.Header()
				_, err = st.Recv()
				return outcomeOf(t, err, header)
			}
			const pol = `"tokens";q=1000;w=60, "streams";q=2;w=60`
			checkOutcome(t, open("300", "20"), want{code: codes.OK, policy: pol, limit: `"tokens";r=700;t=60, "streams";r=1;t=60`})
			checkSettled(t, s, nil)
			checkOutcome(t, open("300", "1200"), want{code: codes.OK, policy: pol, limit: `"tokens";r=680;t=60, "streams";r=0;t=60`})
			checkSettled(t, s, nil)
			if got := peekLeft(t, b.lim, tokens, "global"); got != 0 {
				t.Errorf("after settling at 20 and 1200: %d left, want 0", got)
			}
			b.clk.Advance(time.Minute)
			checkOutcome(t, open("300", "5"), want{code: codes.OK, policy: pol, limit: `"tokens";r=700;t=60, "streams";r=1;t=60`})
			checkOutcome(t, open("300", "5"), want{code: codes.OK, policy: pol, limit: `"tokens";r=695;t=60, "streams";r=0;t=60`})
			checkOutcome(t, open("300", "5"), want{code: codes.ResourceExhausted, retry: time.Minute,
				policy: pol, limit: `"tokens";r=990;t=60, "streams";r=0;t=60`})
			checkSettled(t, s, nil, nil)
			if got := peekLeft(t, b.lim, tokens, "global"); got != 990 {
				t.Errorf("after the denied stream: %d left, want 990", got)
			}
			for _, req := range c.reqs {
				if req != nil {
					t.Fatalf("Cost of a stream was given %T, want nil", req)
				}
			}
		})
	}
}

// TestReserveErrors: an estimate outside 1..Rate fails the call with
// codes.Internal and records nothing; a Cost on a Concurrency rule is a
// setup mistake; a handler whose call reserved nothing gets
// ratelimit.ErrNoReservation from Settle.
func TestReserveErrors(t *testing.T) {
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	perIP := ratelimit.Rule{Name: "ip", Limit: ratelimit.PerMinute(10)}
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			s, c := &settler{}, &costs{}
			methods := grpclimit.Methods{
				check: {
					{Rule: perIP, Key: grpclimit.IP(grpclimit.IPOptions{})},
					{Rule: tokens, Key: grpclimit.Global(), Cost: c.cost},
				},
				// No Cost, and a Cost skipped for want of a key.
				"/grpc.health.v1.Health/List": {
					{Rule: perIP, Key: grpclimit.IP(grpclimit.IPOptions{})},
					{Rule: tokens, Key: grpclimit.Metadata("x-user"), Cost: c.cost},
				},
			}
			client := serve(t, "203.0.113.7:5555", chainUnary(
				grpclimit.UnaryServerInterceptor(b.lim, methods, grpclimit.Options{Logger: discard, NoKey: grpclimit.NoKeyAllow}), s.unary), nil)
			for _, e := range []string{"0", "-5", "1001"} {
				checkOutcome(t, call(t, client, "x-estimate", e, "x-actual", "1"), want{code: codes.Internal, message: grpclimit.ErrorMessage})
			}
			if a, b := peekLeft(t, b.lim, tokens, "global"), peekLeft(t, b.lim, perIP, "203.0.113.7"); a != 1000 || b != 10 {
				t.Errorf("after the invalid estimates: tokens %d, ip %d left; want 1000, 10", a, b)
			}
			checkSettled(t, s)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-estimate", "5", "x-actual", "3")
			if _, err := client.List(ctx, &healthpb.HealthListRequest{}); err != nil {
				t.Fatal(err)
			}
			checkSettled(t, s, ratelimit.ErrNoReservation)
		})
	}
	e := newEnv(t)
	slots := ratelimit.Rule{Name: "slots", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 2, Window: time.Minute}}
	err := grpclimit.Validate(e.lim, grpclimit.Methods{check: {{Rule: slots, Key: grpclimit.Global(), Cost: (&costs{}).cost}}}, grpclimit.Options{})
	if !errors.Is(err, grpclimit.ErrInvalidSetup) {
		t.Fatalf("Validate of a Cost on a Concurrency rule: %v", err)
	}
	if err := grpclimit.Settle(context.Background(), 1); !errors.Is(err, ratelimit.ErrNoReservation) {
		t.Fatalf("Settle of a bare context: %v", err)
	}
	if got := grpclimit.Reservations(context.Background()); got != nil {
		t.Fatalf("Reservations of a bare context: %v", got)
	}
}

// TestReservations: a handler sees the reservations of its call, with
// what each reserved, and may settle them one by one.
func TestReservations(t *testing.T) {
	b := backends(t)["local"]
	tokens := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	daily := ratelimit.Rule{Name: "daily", Limit: ratelimit.Limit{Rate: 5000, Window: 24 * time.Hour}}
	var seen []string
	byHand := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		for _, o := range grpclimit.Reservations(ctx) {
			seen = append(seen, fmt.Sprintf("%s:%d", o.Name, o.Reservation.Reserved()))
			if err := o.Reservation.Settle(ctx, o.Reservation.Reserved()/2); err != nil {
				t.Errorf("%s: %v", o.Name, err)
			}
		}
		return handler(ctx, req)
	}
	fixed := func(n int) func(context.Context, string, any) int {
		return func(context.Context, string, any) int { return n }
	}
	methods := grpclimit.Methods{check: {
		{Rule: daily, Key: grpclimit.Global(), Cost: fixed(400)},
		{Rule: tokens, Key: grpclimit.Global(), Cost: fixed(100)},
	}}
	client := serve(t, "", chainUnary(grpclimit.UnaryServerInterceptor(b.lim, methods, grpclimit.Options{}), byHand), nil)
	checkOutcome(t, call(t, client), want{code: codes.OK,
		policy: `"daily";q=5000;w=86400, "tokens";q=1000;w=60`, limit: `"daily";r=4600;t=86400, "tokens";r=900;t=60`})
	if fmt.Sprint(seen) != "[daily:400 tokens:100]" {
		t.Errorf("Reservations: %v", seen)
	}
	if a, c := peekLeft(t, b.lim, daily, "global"), peekLeft(t, b.lim, tokens, "global"); a != 4800 || c != 950 {
		t.Errorf("daily %d, tokens %d left; want 4800, 950", a, c)
	}
}

package policy_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/policy"
	"github.com/ratelimit-go/ratelimit/ratelimittest"
)

// backends returns a Limiter with a fake clock at epoch on each backend:
// this process alone, and miniredis.
func backends(t *testing.T) map[string]*ratelimit.Limiter {
	t.Helper()
	local, err := ratelimit.New(nil, ratelimit.Options{Clock: ratelimittest.NewClock(epoch), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	return map[string]*ratelimit.Limiter{"local": local, "miniredis": newLimiter(t).Limiter}
}

func left(t *testing.T, l *ratelimit.Limiter, rule ratelimit.Rule, key string) int {
	t.Helper()
	res, err := l.Peek(context.Background(), rule, key)
	if err != nil {
		t.Fatalf("Peek %s %s: %v", rule.Name, key, err)
	}
	return res.Remaining
}

var (
	tokens = ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(1000)}
	daily  = ratelimit.Rule{Name: "daily", Limit: ratelimit.Limit{Rate: 300, Window: 24 * time.Hour}}
	calls  = ratelimit.Rule{Name: "calls", Limit: ratelimit.PerMinute(2)}
	slots  = ratelimit.Rule{Name: "slots", Kind: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1, Window: time.Minute}}
)

// TestWalkReserves: a reserving policy takes its Cost, is asked before the
// other rate policies, and its reservation is settled through the
// request's context: less gives back, more charges; a reservation nobody
// settles stands.
func TestWalkReserves(t *testing.T) {
	for name, l := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			entries := []policy.Entry{
				{Rule: calls, Key: "alice"},
				{Rule: tokens, Key: "alice", Reserve: true, Cost: 100},
			}
			walk := func() []policy.Outcome {
				t.Helper()
				out, err := policy.Walk(ctx, l, entries, nil)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			out := walk()
			if len(out) != 2 || out[0].Name != "tokens" || out[1].Name != "calls" {
				t.Fatalf("outcomes %+v: want tokens (reserving) asked first, then calls", out)
			}
			if out[0].Reservation == nil || out[0].Reservation.Reserved() != 100 || out[1].Reservation != nil {
				t.Fatalf("reservations %v, %v", out[0].Reservation, out[1].Reservation)
			}
			if got := policy.Format(out).RateLimit; got != `"tokens";r=900;t=60, "calls";r=1;t=60` {
				t.Errorf("RateLimit %s", got)
			}
			req := policy.WithReservations(ctx, out)
			if got := policy.Reservations(req); len(got) != 1 || got[0].Name != "tokens" || got[0].Result.Remaining != 900 {
				t.Fatalf("Reservations %+v", got)
			}
			if err := policy.Settle(req, 40); err != nil {
				t.Fatal(err)
			}
			if got := left(t, l, tokens, "alice"); got != 960 {
				t.Errorf("after settling 100 at 40: %d left, want 960", got)
			}
			if err := policy.Settle(req, 40); !errors.Is(err, ratelimit.ErrSettled) {
				t.Errorf("a second Settle: %v, want ErrSettled", err)
			}

			out = walk() // calls' last
			if err := policy.Settle(policy.WithReservations(ctx, out), 250); err != nil {
				t.Fatal(err)
			}
			if got := left(t, l, tokens, "alice"); got != 710 {
				t.Errorf("after settling 100 at 250: %d left, want 710", got)
			}

			// Denied by calls: the reservation taken before it is cancelled.
			out, err := policy.Walk(ctx, l, entries, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, denied := policy.Denial(out); !denied || out[0].Reservation != nil {
				t.Fatalf("third walk %+v: want a denial by calls, the reservation cancelled", out)
			}
			if out[0].Result.Remaining != 710 {
				t.Errorf("the cancelled reservation's Result: %d left, want 710 (its events counted as left)", out[0].Result.Remaining)
			}
			if got := left(t, l, tokens, "alice"); got != 710 {
				t.Errorf("after a denied walk: %d left, want 710", got)
			}
			if err := policy.Settle(policy.WithReservations(ctx, out), 1); !errors.Is(err, ratelimit.ErrNoReservation) {
				t.Errorf("Settle after a denial: %v, want ErrNoReservation", err)
			}

			// Not settled: the reservation stands.
			if _, err := policy.Walk(ctx, l, []policy.Entry{{Rule: tokens, Key: "bob", Reserve: true, Cost: 300}}, nil); err != nil {
				t.Fatal(err)
			}
			if got := left(t, l, tokens, "bob"); got != 700 {
				t.Errorf("an unsettled reservation: %d left, want 700", got)
			}
		})
	}
}

// TestWalkReserveCancelledByLaterDenials: a denial by a later reserving
// policy or by a concurrency policy cancels the reservations taken.
func TestWalkReserveCancelledByLaterDenials(t *testing.T) {
	for name, l := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			two := []policy.Entry{
				{Rule: tokens, Key: "alice", Reserve: true, Cost: 200},
				{Rule: daily, Key: "alice", Reserve: true, Cost: 200},
			}
			if _, err := policy.Walk(ctx, l, two, nil); err != nil {
				t.Fatal(err)
			}
			out, err := policy.Walk(ctx, l, two, nil) // daily has 100 left
			if err != nil {
				t.Fatal(err)
			}
			if d, denied := policy.Denial(out); !denied || d.Name != "daily" || out[0].Reservation != nil {
				t.Fatalf("second walk %+v: want daily's denial, tokens' reservation cancelled", out)
			}
			if got := policy.Format(out).RateLimit; got != `"tokens";r=800;t=60, "daily";r=100;t=86400` {
				t.Errorf("RateLimit %s", got)
			}
			if a, b := left(t, l, tokens, "alice"), left(t, l, daily, "alice"); a != 800 || b != 100 {
				t.Errorf("after daily's denial: tokens %d, daily %d; want 800, 100", a, b)
			}

			withSlot := []policy.Entry{
				{Rule: slots, Key: "alice"},
				{Rule: tokens, Key: "alice", Reserve: true, Cost: 50},
			}
			first, err := policy.Walk(ctx, l, withSlot, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer policy.Release(ctx, first)
			out, err = policy.Walk(ctx, l, withSlot, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d, denied := policy.Denial(out); !denied || d.Name != "slots" || out[0].Reservation != nil {
				t.Fatalf("walk without a free slot %+v: want slots' denial, the reservation cancelled", out)
			}
			if got := left(t, l, tokens, "alice"); got != 750 {
				t.Errorf("after the slot's denial: tokens %d left, want 750 (the first walk's 50 only)", got)
			}
		})
	}
}

// TestWalkReserveErrors: a Cost outside 1..Rate and a rule that takes no
// reservation (Concurrency) fail the walk, naming the policy, and cancel what was
// reserved before.
func TestWalkReserveErrors(t *testing.T) {
	for name, l := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			first := policy.Entry{Rule: tokens, Key: "alice", Reserve: true, Cost: 100}
			for _, c := range []struct {
				name  string
				entry policy.Entry
				want  error
			}{
				{"cost 0", policy.Entry{Rule: daily, Key: "alice", Reserve: true}, ratelimit.ErrInvalidN},
				{"cost over the rate", policy.Entry{Rule: daily, Key: "alice", Reserve: true, Cost: 301}, ratelimit.ErrInvalidN},
				{"concurrency", policy.Entry{Rule: slots, Key: "alice", Reserve: true, Cost: 1}, ratelimit.ErrInvalidRule},
			} {
				out, err := policy.Walk(ctx, l, []policy.Entry{first, c.entry}, nil)
				if !errors.Is(err, c.want) || len(out) != 1 || out[0].Reservation != nil {
					t.Errorf("%s: %v, %+v; want an error wrapping %v, tokens' reservation cancelled", c.name, err, out, c.want)
				}
				if got := left(t, l, tokens, "alice"); got != 1000 {
					t.Errorf("%s: tokens has %d left, want 1000", c.name, got)
				}
			}
		})
	}
}

// TestSettle: what Settle does with contexts that carry nothing, several
// walks, and an actual out of bounds.
func TestSettle(t *testing.T) {
	for name, l := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if err := policy.Settle(ctx, 1); !errors.Is(err, ratelimit.ErrNoReservation) {
				t.Fatalf("Settle of a bare context: %v", err)
			}
			if got := policy.WithReservations(ctx, nil); got != ctx {
				t.Fatalf("WithReservations of nothing made a new context")
			}
			outer, err := policy.Walk(ctx, l, []policy.Entry{{Rule: daily, Key: "alice", Reserve: true, Cost: 30}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := policy.Walk(ctx, l, []policy.Entry{{Rule: calls, Key: "alice"}, {Rule: tokens, Key: "alice", Reserve: true, Cost: 100}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := policy.WithReservations(policy.WithReservations(ctx, outer), inner)
			var names []string
			for _, o := range policy.Reservations(req) {
				names = append(names, o.Name)
			}
			if !equal(names, []string{"daily", "tokens"}) {
				t.Fatalf("Reservations: %q", names)
			}
			// daily's bound is 16 x 300 = 4800: over it, nothing is settled.
			if err := policy.Settle(req, 4801); !errors.Is(err, ratelimit.ErrInvalidN) {
				t.Fatalf("Settle over daily's bound: %v", err)
			}
			if err := policy.Settle(req, -1); !errors.Is(err, ratelimit.ErrInvalidN) {
				t.Fatalf("Settle at -1: %v", err)
			}
			canceled, cancel := context.WithCancel(req)
			cancel() // the client left: the settle is made all the same
			if err := policy.Settle(canceled, 10); err != nil {
				t.Fatal(err)
			}
			if a, b := left(t, l, daily, "alice"), left(t, l, tokens, "alice"); a != 290 || b != 990 {
				t.Errorf("after settling both at 10: daily %d, tokens %d; want 290, 990", a, b)
			}
			err = policy.Settle(req, 10)
			want := `policy "daily": ratelimit: reservation already settled: rule "daily", key "alice"` + "\n" +
				`policy "tokens": ratelimit: reservation already settled: rule "tokens", key "alice"`
			if !errors.Is(err, ratelimit.ErrSettled) || err.Error() != want {
				t.Fatalf("a second Settle: %v", err)
			}
		})
	}
}

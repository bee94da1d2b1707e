package ratelimit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestReserveReportsDecisionsAndSettles: a Reserve is a decision with
// Reserve set; a Settle and a Cancel are reported with Settle set, the
// cost settled as N, the reserve's n as Reserved and the path the settle
// took: Redis, this process alone while Redis is down (owed), none when
// nothing changed. Stats counts them.
func TestReserveReportsDecisionsAndSettles(t *testing.T) {
	mr := miniredis.RunT(t)
	var seen decisions
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(testkit.NewClock(), &logs, nil)
	opts.OnDecision = seen.hook
	l := testkit.NewLimiter(t, testkit.NewClient(t, mr.Addr()), opts)
	rule := ratelimit.Rule{Name: "tokens", Limit: ratelimit.PerMinute(10)}
	ctx := context.Background()

	reserve := func(n int) *ratelimit.Reservation {
		t.Helper()
		r, res, err := l.Reserve(ctx, rule, "k", n)
		if err != nil || r == nil || !res.Allowed || r.Reserved() != n {
			t.Fatalf("Reserve(%d) = %v, %+v, %v", n, r, res, err)
		}
		return r
	}
	a, b, c, d := reserve(4), reserve(2), reserve(1), reserve(2)
	if err := a.Settle(ctx, 1); err != nil { // 3 back, on Redis
		t.Fatal(err)
	}
	if err := b.Settle(ctx, 2); err != nil { // nothing changes
		t.Fatal(err)
	}
	mr.Close()
	if err := c.Settle(ctx, 3); err != nil { // 2 more, owed
		t.Fatalf("a settle while Redis is down returned %v, want nil", err)
	}
	if err := d.Cancel(ctx); err != nil { // 2 back, owed
		t.Fatal(err)
	}
	if err := d.Cancel(ctx); !errors.Is(err, ratelimit.ErrSettled) {
		t.Fatalf("a second Cancel returned %v, want ErrSettled", err)
	}
	var nilRes *ratelimit.Reservation
	if err := nilRes.Settle(ctx, 1); !errors.Is(err, ratelimit.ErrNoReservation) {
		t.Fatalf("Settle on a nil Reservation returned %v, want ErrNoReservation", err)
	}

	type report struct {
		reserve, settle bool
		n, reserved     int
		path            ratelimit.Path
	}
	var got []report
	seen.mu.Lock()
	for _, x := range seen.all {
		got = append(got, report{x.Reserve, x.Settle, x.N, x.Reserved, x.Path})
	}
	seen.mu.Unlock()
	want := []report{
		{true, false, 4, 0, ratelimit.PathRedis},
		{true, false, 2, 0, ratelimit.PathRedis},
		{true, false, 1, 0, ratelimit.PathRedis},
		{true, false, 2, 0, ratelimit.PathRedis},
		{false, true, 1, 4, ratelimit.PathRedis},
		{false, true, 2, 2, ratelimit.PathNone},
		{false, true, 3, 1, ratelimit.PathLocal},
		{false, true, 0, 2, ratelimit.PathLocal},
	}
	if len(got) != len(want) {
		t.Fatalf("reported %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("report %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	s := l.Stats()
	if s.Reservations != 4 || s.ReservationsSettled != 4 || s.ReservedGivenBack != 5 || s.ReservedCharged != 2 || s.ReservationDebts != 1 {
		t.Fatalf("Stats: %d reservations, %d settled, %d given back, %d charged, %d debts; want 4, 4, 5, 2, 1",
			s.Reservations, s.ReservationsSettled, s.ReservedGivenBack, s.ReservedCharged, s.ReservationDebts)
	}
	l.Close()
	if err := a.Settle(ctx, 1); !errors.Is(err, ratelimit.ErrClosed) {
		t.Fatalf("Settle after Close returned %v, want ErrClosed", err)
	}
}

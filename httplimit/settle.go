package httplimit

import (
	"context"

	"github.com/ratelimit-go/ratelimit/policy"
)

// Settle makes actual the cost of the request whose context is ctx (the
// handler's r.Context()) under every policy of the route that reserved an
// estimate of it (see Policy.Cost): each reservation gives back what the
// request did not use, or charges the extra, even past the limit (see
// ratelimit.Reservation.Settle). Nested middlewares' reservations of the
// same request are settled together.
//
// It returns an error wrapping ratelimit.ErrNoReservation when the
// middleware reserved nothing for the request (no policy has a Cost, or
// the one that has was skipped by NoKeyAllow), one wrapping
// ratelimit.ErrSettled when the reservations were settled before (a
// reservation settles once), and one wrapping ratelimit.ErrInvalidN, with
// nothing settled, for an actual outside 0..ratelimit.MaxSettleFactor
// times a reserving rule's Rate. The settle goes on when the client has
// left: the work was done.
//
// A reservation the handler does not settle stands as reserved: nothing
// settles it when the request ends, and the estimate is its cost. It is
// policy.Settle.
func Settle(ctx context.Context, actual int) error {
	return policy.Settle(ctx, actual)
}

// Reservations returns the outcomes of the policies that reserved for the
// request whose context is ctx, each with its Reservation, for a handler
// that settles them one by one; nil when there are none. It is
// policy.Reservations.
func Reservations(ctx context.Context) []policy.Outcome {
	return policy.Reservations(ctx)
}

package grpclimit

import (
	"context"

	"github.com/ratelimit-go/ratelimit/policy"
)

// Settle makes actual the cost of the call whose handler's context is ctx
// (a unary handler's ctx, a stream's ServerStream.Context()) under every
// policy of its method that reserved an estimate of it (see Policy.Cost):
// each reservation gives back what the call did not use, or charges the
// extra, even past the limit (see ratelimit.Reservation.Settle).
//
// It returns an error wrapping ratelimit.ErrNoReservation when the
// interceptor reserved nothing for the call (no policy has a Cost, or the
// one that has was skipped by NoKeyAllow), one wrapping
// ratelimit.ErrSettled when the call was settled before (a reservation
// settles once), and one wrapping ratelimit.ErrInvalidN, with nothing
// settled, for an actual outside 0..ratelimit.MaxSettleFactor times a
// reserving rule's Rate. The settle goes on when the caller has gone: the
// work was done.
//
// A reservation the handler does not settle stands as reserved: nothing
// settles it when the call ends, and the estimate is its cost. It is
// policy.Settle, as httplimit.Settle is.
func Settle(ctx context.Context, actual int) error {
	return policy.Settle(ctx, actual)
}

// Reservations returns the outcomes of the policies that reserved for the
// call whose handler's context is ctx, each with its Reservation, for a
// handler that settles them one by one; nil when there are none. It is
// policy.Reservations.
func Reservations(ctx context.Context) []policy.Outcome {
	return policy.Reservations(ctx)
}

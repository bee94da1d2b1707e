package policy

import (
	"context"
	"errors"
	"fmt"

	"github.com/ratelimit-go/ratelimit"
)

// held is what a context carries of a request's reservations (see
// WithReservations): the outcomes of one walk's reserving policies, and
// what the context it was made from carried (an outer adapter's walk of
// the same request).
type held struct {
	outer    *held
	outcomes []Outcome
}

type heldKey struct{}

// WithReservations returns a context that carries the reservations of
// outcomes (see Outcome.Reservation), from which the request's handler
// settles them with Settle, along with those ctx already carries (an
// outer middleware's or interceptor's on the same request). It returns
// ctx itself when outcomes hold no reservation. The adapters call it once
// a request is allowed, and pass the context it returns to the handler.
func WithReservations(ctx context.Context, outcomes []Outcome) context.Context {
	var h *held
	for i := range outcomes {
		if outcomes[i].Reservation != nil {
			if h == nil {
				h = &held{}
			}
			h.outcomes = append(h.outcomes, outcomes[i])
		}
	}
	if h == nil {
		return ctx
	}
	h.outer, _ = ctx.Value(heldKey{}).(*held)
	return context.WithValue(ctx, heldKey{}, h)
}

// Reservations returns the outcomes of the reserving policies whose
// reservations ctx carries (see WithReservations), outermost walk first
// and each walk's in the order it asked them; nil when it carries none.
// Each Outcome's Reservation may be settled on its own, and its Result is
// what its Reserve answered (what the fields reported).
func Reservations(ctx context.Context) []Outcome {
	var walks []*held
	for h, _ := ctx.Value(heldKey{}).(*held); h != nil; h = h.outer {
		walks = append(walks, h)
	}
	var out []Outcome
	for i := len(walks) - 1; i >= 0; i-- {
		out = append(out, walks[i].outcomes...)
	}
	return out
}

// Settle makes actual the cost of every reservation ctx carries (see
// WithReservations): each reserving policy of the request is settled at
// actual with ratelimit.Reservation.Settle, which gives back what the
// request did not use, or charges the extra, even past the limit.
//
// When actual is outside what a reservation may settle at (0 to
// ratelimit.MaxSettleFactor times its rule's Rate), Settle returns an
// error wrapping ratelimit.ErrInvalidN and settles none of them. When ctx
// carries no reservation (the route reserves nothing, or the policy was
// skipped as NoKeyAllow allows) it returns an error wrapping
// ratelimit.ErrNoReservation. A reservation settles once: a second Settle
// returns an error wrapping ratelimit.ErrSettled, and changes nothing.
// Errors name their policy; several are joined (errors.Join).
//
// The settle is not abandoned when ctx is done (the client left once the
// work was done): only ctx's values are used. A reservation nobody
// settles stands as reserved: no timer and no end of the request settles
// it.
func Settle(ctx context.Context, actual int) error {
	outcomes := Reservations(ctx)
	if len(outcomes) == 0 {
		return fmt.Errorf("%w: the request's context carries none", ratelimit.ErrNoReservation)
	}
	for i := range outcomes {
		o := &outcomes[i]
		if bound := o.Reservation.MaxSettle(); actual < 0 || actual > bound {
			return fmt.Errorf("policy %q: %w: settling at %d, outside 0..%d (%d times its rule's capacity)",
				o.Name, ratelimit.ErrInvalidN, actual, bound, ratelimit.MaxSettleFactor)
		}
	}
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for i := range outcomes {
		if err := outcomes[i].Reservation.Settle(ctx, actual); err != nil {
			errs = append(errs, fmt.Errorf("policy %q: %w", outcomes[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

package grpclimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/policy"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Messages of the statuses the interceptors return.
const (
	// DefaultMessage is the message of a denial when Options.Message is ""
	// (httplimit's).
	DefaultMessage = httplimit.DefaultMessage
	// DefaultBanMessage is the message of a banned caller's denial when
	// Options.BanMessage is "" (httplimit's).
	DefaultBanMessage = httplimit.DefaultBanMessage
	// DefaultConcurrencyMessage is the message of a concurrency policy's
	// denial when Options.ConcurrencyMessage is "" (httplimit's).
	DefaultConcurrencyMessage = httplimit.DefaultConcurrencyMessage
	// NoKeyMessage is the message of a call refused because it could not be
	// keyed (see NoKeyDeny).
	NoKeyMessage = "This method is rate limited per caller, and the call does not say who is calling."
	// ErrorMessage is the message of a call failed because the limiter
	// could not decide on it (the cause is logged, not sent).
	ErrorMessage = "The rate limiter could not decide on this call."
)

// retryDelay is the RetryInfo delay of a denial: RetryAfter rounded up to
// whole milliseconds, so that it never names a time before the call could
// pass, and at least 1ms.
func retryDelay(d time.Duration) time.Duration {
	return max(time.Millisecond, (d+time.Millisecond-1)/time.Millisecond*time.Millisecond)
}

// denial is the status of a call the policy of d denied.
func denial(d *policy.Outcome, o *Options) error {
	msg := cmp.Or(o.Message, DefaultMessage)
	name := policy.Encode(d.Name)
	desc := fmt.Sprintf("quota %q exceeded: %v", name, d.Rule.Limit)
	switch {
	case d.Result.Banned:
		msg = cmp.Or(o.BanMessage, DefaultBanMessage)
		desc = fmt.Sprintf("quota %q: banned for repeated violations", name)
	case d.Rule.Leases():
		msg = cmp.Or(o.ConcurrencyMessage, DefaultConcurrencyMessage)
		desc = fmt.Sprintf("quota %q: %d calls in progress, the most it allows", name, d.Rule.Limit.Rate)
	}
	st := status.New(codes.ResourceExhausted, msg)
	withDetails, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay(d.Result.RetryAfter))},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Description: desc,
			QuotaId:     name,
			QuotaValue:  int64(d.Result.Limit),
		}}},
	)
	if err != nil { // a detail that cannot be marshalled: not these (name is ASCII)
		return st.Err()
	}
	return withDetails.Err()
}

// failure is the status of a call the limiter could not decide on: the
// caller's own context ending (Canceled, DeadlineExceeded), a limiter that
// cannot reach its store or was closed (Unavailable, worth retrying on
// another server), and anything else (Internal). report says whether the
// failure is the service's to log.
func failure(ctx context.Context, err error) (st error, report bool) {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return status.FromContextError(ctxErr).Err(), false
	}
	if errors.Is(err, ratelimit.ErrUnavailable) || errors.Is(err, ratelimit.ErrClosed) {
		return status.Error(codes.Unavailable, ErrorMessage), true
	}
	return status.Error(codes.Internal, ErrorMessage), true
}

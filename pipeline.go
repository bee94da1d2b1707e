package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/breaker"
	"github.com/ratelimit-go/ratelimit/internal/redisio"
	"github.com/redis/rueidis"
)

// errNotConnected and errBreakerOpen say why a call was not sent to Redis.
var (
	errNotConnected = errors.New("not connected yet")
	errBreakerOpen  = errors.New("circuit breaker open")
	errShed         = errors.New("shed by admission control: as many calls in flight as redis can serve in time")
)

// sent is how a call through the pipeline ended when it did not end in an
// error: on Redis (path PathRedis), or to be decided without Redis (PathLocal
// while Redis cannot be used, PathShed when admission control shed it), in
// which case cause says why.
type sent struct {
	path  Path
	b     *breaker.Breaker // the breaker in front of the key; nil before Dial connects
	cause error
	// member is the member id the call's events were sent under, set by
	// the caller when the call may have run on Redis (see mayHaveRun), so
	// that the write-back records them under it again (see oweEvents).
	member string
	// held: the call is to be decided without Redis under a hold of b
	// (see breaker.Breaker.Hold), which its caller releases once the
	// decision is recorded (see release).
	held bool
}

// release ends the hold a call to be decided without Redis took on its
// breaker, once the decision is recorded (or none is to be made): from
// then on the Limiter's heartbeat reads what it recorded (see owes).
func (s *sent) release() {
	if s.held {
		s.held = false
		s.b.Release()
	}
}

// mayHaveRun reports whether a call that did not end on Redis was sent
// anyway, so that Redis may have run it: it failed as an outage (a
// timeout, a lost connection) rather than being held back.
func (s sent) mayHaveRun() bool {
	return s.path == PathLocal && s.cause != errNotConnected && s.cause != errBreakerOpen
}

// subject names what a call is about in the pipeline's logs and errors, as
// `rule "coupon:claim"` or `group "user:42"`. It is two strings rather than
// one formatted string, so that the hot path formats nothing.
type subject struct {
	what string // "rule", "group"
	name string
}

func (s subject) String() string { return fmt.Sprintf("%s %q", s.what, s.name) }

// send carries one Redis call through everything that stands between a
// caller and Redis, in one place for every call the Limiter makes: the
// connection (nil before Dial has connected), the circuit breaker in front
// of redisKey, admission control for the key's master (see redisio.Gate), the
// call's deadline (Options.Timeout or the caller's earlier one), the
// classification of its failure, and the logging of failures. run makes the
// call on c under the deadline's ctx; a failure it returns is classified
// here (see classify). With spare, the call is admitted only when admission
// control has a slot to spare (see redisio.Gate.AcquireSpare), and is otherwise not
// sent (PathShed), without waiting: the Limiter's own background work never
// takes the last slot from a caller.
//
// send returns a sent with path PathRedis when run succeeded; a sent with
// another path when the call must be decided without Redis; or an error:
// the caller's ctx.Err() when the caller's context ended, or an ErrRedis
// for a reply that means misuse (logged as an error). What to do without
// Redis is the caller's: decide locally, or report ErrUnavailable (see
// sendWithoutFallback).
func (l *Limiter) send(ctx context.Context, conn *redisConn, redisKey string, about subject, spare bool, run func(ctx context.Context, c rueidis.Client) error) (sent, error) {
	if conn == nil {
		return sent{path: PathLocal, cause: errNotConnected}, nil
	}
	b := conn.breakers.ForKey(redisKey)
	if b.Resting() && b.Hold() {
		return sent{path: PathLocal, b: b, cause: errBreakerOpen, held: true}, nil
	}
	if err := ctx.Err(); err != nil {
		return sent{b: b}, err
	}
	// The budget starts before the wait for a slot, so that waiting and
	// the call together never pass Timeout.
	callCtx := l.callContext(ctx)
	g := b.Gate()
	if spare && !g.AcquireSpare() {
		return sent{path: PathShed, b: b, cause: errShed}, nil
	}
	if !spare && !g.Acquire(ctx) {
		if err := ctx.Err(); err != nil {
			return sent{b: b}, err
		}
		return sent{path: PathShed, b: b, cause: errShed}, nil
	}
	start := time.Now()
	err := b.Execute(func() (struct{}, error) {
		if err := run(callCtx, conn.client); err != nil {
			return struct{}{}, classify(ctx, err)
		}
		return struct{}{}, nil
	})
	s, err := l.outcome(b, g, time.Since(start), err, about)
	if s.path == PathLocal {
		s.held = b.Hold()
		if !s.held && s.cause == errBreakerOpen {
			// The breaker refused the call, half-open with its probe
			// under way, and the probe has closed it since: the call
			// goes to Redis, as the other instances are told that
			// nothing is decided here without it (see owes).
			return l.send(ctx, conn, redisKey, about, spare, run)
		}
	}
	return s, err
}

// outcome is what became of a call that b's breaker ran, or refused, in
// took (err is what Execute returned, see send). It gives the call's slot
// back to admission control (g) with what the call tells of the master's
// latency and health, notes on b whether Redis answered, and counts and
// logs an outage; a reply that means misuse is logged as an error, which
// names the rule or group the call was about.
func (l *Limiter) outcome(b *breaker.Breaker, g *redisio.Gate, took time.Duration, err error, about subject) (sent, error) {
	if err == nil {
		g.Release(took, true, false)
		b.NoteAnswer(breaker.AnswerYes)
		return sent{path: PathRedis, b: b}, nil
	}
	var ce *callError
	if !errors.As(err, &ce) {
		// The breaker refused the call (it opened meanwhile, or is
		// half-open with its probe under way): nothing was sent.
		g.Release(took, false, false)
		return sent{path: PathLocal, b: b, cause: errBreakerOpen}, nil
	}
	g.Release(took, ce.cause != callerGone, ce.cause == outage)
	switch ce.cause {
	case callerGone:
		return sent{b: b}, ce.err
	case misuse:
		b.NoteAnswer(breaker.AnswerYes)
		l.log.Log(logMisuse, slog.LevelError, "ratelimit: redis refused the call", "about", about.String(), "err", ce.err)
		return sent{b: b}, fmt.Errorf("%w: %s: %w", ErrRedis, about, ce.err)
	}
	b.NoteAnswer(breaker.AnswerNo)
	l.noteFailure()
	l.logOutage(ce.err)
	return sent{path: PathLocal, b: b, cause: ce.err}, nil
}

// sendHeld sends a decision about legs, which holdLegs held at now, through
// the pipeline (see send), and takes the legs' reservations back unless the
// call ended on Redis with an answer for each leg's own events: kept, asked
// only then, says whether Redis' answer stands for each leg (nil: it does,
// and record settles each reservation; a group that denied recorded none
// of its pairs' events).
func (l *Limiter) sendHeld(ctx context.Context, conn *redisConn, redisKey string, about subject, legs []leg, now int64, run func(context.Context, rueidis.Client) error, kept func() bool) (sent, error) {
	s, err := l.send(ctx, conn, redisKey, about, false, run)
	if err != nil || s.path != PathRedis || kept != nil && !kept() {
		l.local.releaseLegs(legs, now)
	}
	return s, err
}

// logOutage logs a failed Redis call: as an error, saying what Redis
// refused, when it means the client is misconfigured (see refusal); as a
// warning otherwise.
func (l *Limiter) logOutage(err error) {
	if msg, ok := refusal(err); ok {
		l.log.Log(logAuth, slog.LevelError, msg, "err", err)
		return
	}
	l.log.Log(logOutage, slog.LevelWarn, "ratelimit: redis call failed; deciding locally", "err", err)
}

// callContext bounds one Redis call by Options.Timeout, or by the caller's
// earlier deadline. The caller's cancellation is seen at once when its
// deadline is the earlier; otherwise the call ends when Redis answers or the
// budget runs out, and the cancellation is reported then.
func (l *Limiter) callContext(ctx context.Context) context.Context {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= l.set.Timeout {
		return ctx
	}
	return l.deadlines.Context()
}

// sendWithoutFallback sends one call that has no local substitute (Reset,
// Ban, taking events back, the heartbeat) through the pipeline (see send).
// It returns nil, the caller's ctx.Err(), an ErrRedis for a reply that
// means misuse, or an error wrapping ErrUnavailable that says what was not
// done (what) and why (Redis cannot be used, or, with spare, no slot was
// to spare: errShed).
func (l *Limiter) sendWithoutFallback(ctx context.Context, conn *redisConn, redisKey string, about subject, what string, spare bool, run func(context.Context, rueidis.Client) error) error {
	s, err := l.send(ctx, conn, redisKey, about, spare, run)
	s.release() // nothing is decided without Redis here
	switch {
	case err != nil:
		return err
	case s.path != PathRedis:
		return fmt.Errorf("%w: %s: %s: %w", ErrUnavailable, about, what, s.cause)
	}
	return nil
}

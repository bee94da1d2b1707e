package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// ErrLeaseLost means a lease no longer holds its slot: it expired (its TTL,
// the rule's Window, passed without a renewal, and the slot may be someone
// else's now), a Reset freed it, or it was released.
var ErrLeaseLost = errors.New("ratelimit: lease lost")

// ErrNoLease is what Release and Renew return on a nil *Lease.
var ErrNoLease = errors.New("ratelimit: no lease")

// Lease is one slot of a Concurrency rule's key, taken by Acquire and held
// until Release, or until it expires: Window after it was taken or last
// renewed (Renew). Its methods are safe for concurrent use.
//
// A lease taken under DegradedAllow while Redis could not be used, or one
// that a rule in dry run granted over the limit, records nothing: its
// Release and Renew do nothing and return nil.
type Lease struct {
	l       *Limiter
	mu      sync.Mutex
	u       undo  // what Acquire recorded: the pair, its plan, the lease's id, its event's time (u.now)
	taken   int64 // µs, when Acquire took it: a Reset at or after it frees it
	expires int64 // µs, when it lapses unless renewed
	records bool  // the lease is counted somewhere (see Lease)
	onRedis bool  // Redis holds its event: it decided its Acquire or last Renew, or the write-back brought it (see leaseSet.onRedis)
	deny    bool  // the rule's degraded policy is DegradedDeny
	done    bool  // released or lost

	// The Limiter's set of leases held links the leases of a pair (see
	// leaseSet); its lock guards these.
	prev, next *Lease
}

// Acquire takes one slot of key under rule, a Concurrency rule, if one is
// free. When Result.Allowed is false the lease is nil and RetryAfter is
// when a slot frees if no holder releases or renews: the earliest expiry (a
// release may free one sooner). Remaining is the slots free after this
// call; ResetAfter is when every lease held now would have expired.
//
// A rejected Acquire is a violation under the rule's Penalty, as a
// rejected Allow is. A rule in dry run always gets a lease, and it is
// recorded even over the limit, so that the leases counted are those a
// rule not enforced lets run; Result reports what enforcing would have
// answered. While Redis
// cannot be used the rule's degraded policy decides: DegradedLocal holds
// the lease in this process at the degraded share of the Rate (counting
// the leases it holds already), DegradedAllow grants a lease that records
// nothing, DegradedDeny refuses.
func (l *Limiter) Acquire(ctx context.Context, rule Rule, key string) (*Lease, Result, error) {
	u := undo{lease: true}
	res, err := l.ask(ctx, &rule, key, 1, false, &u)
	if err != nil || !res.Allowed {
		return nil, res, err
	}
	records := u.local || u.onRedis
	if res.DryRun {
		records = l.recordOver(ctx, &u)
	}
	le := &Lease{l: l, u: u, taken: u.now, expires: u.now + u.p.window, records: records, onRedis: u.onRedis,
		deny: cmp.Or(rule.Degraded, l.set.Degraded) == DegradedDeny}
	if le.records {
		l.leases.add(le)
	}
	return le, res, nil
}

// Release gives the lease's slot back: it is free for the next Acquire at
// once, on any instance. A second Release does nothing and returns nil.
// When Redis cannot be used, the slot is freed in this process at once and
// in Redis once it can be used again (or when the lease expires there).
// After Close it returns ErrClosed (Close released the lease).
func (le *Lease) Release(ctx context.Context) error {
	if le == nil {
		return ErrNoLease
	}
	if err := le.l.usable(ctx); err != nil {
		return err
	}
	le.release(ctx)
	return nil
}

// release gives the slot back (see Release), whatever the Limiter's state.
func (le *Lease) release(ctx context.Context) {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.done {
		return
	}
	le.done = true
	if !le.records {
		return
	}
	l := le.l
	l.leases.remove(le)
	l.leases.released.Add(1)
	u := &le.u
	l.local.release1(u.k, &u.p, u.now, u.member)
	if l.remote {
		l.dropLease(ctx, u)
	}
	l.leases.signal()
}

// dropLease removes the lease u from Redis, or, when Redis cannot be used,
// leaves it to the write-back's loop to remove later.
func (l *Limiter) dropLease(ctx context.Context, u *undo) {
	if u.member == "" {
		return // nothing in Redis can be named
	}
	key := u.key // the key Redis decided the lease under
	if key == "" {
		ks := redisKeys(l.set.KeyPrefix, u.k)
		key = ks.Meter(u.p.alg.redis.letter())
	}
	err := l.undoOnRedis(ctx, l.conn.Load(), u, key, 1, "releasing a lease")
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		l.leases.owed.Add(*u, maxOwedReleases)
		return
	}
	if err != nil {
		l.log.Log(logOutage, slog.LevelWarn, "ratelimit: a lease could not be released in redis; it expires there", "err", err)
	}
}

// Renew extends the lease by the rule's Window from now. It returns an
// error wrapping ErrLeaseLost when the lease already expired, was released
// or a Reset freed it (its slot may be someone else's now). When Redis
// cannot be used the lease is extended in this process and in Redis once
// it can be used again, unless the rule's degraded policy is DegradedDeny:
// then Renew returns an error wrapping ErrUnavailable, and the lease lives
// until it expires.
func (le *Lease) Renew(ctx context.Context) error {
	if le == nil {
		return ErrNoLease
	}
	l := le.l
	if err := l.usable(ctx); err != nil {
		return err
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	u := &le.u
	switch {
	case le.done:
		return fmt.Errorf("%w: rule %q: the lease was released or lost before", ErrLeaseLost, u.k.Rule)
	case !le.records:
		return nil
	}
	now := l.localNow()
	if now >= le.expires {
		return le.lose(now, "it expired")
	}
	conn := l.conn.Load()
	if l.remote && conn != nil {
		s, _, renewed, err := l.renewOnRedis(ctx, conn, u, now, le.taken, false)
		defer s.release()
		switch {
		case err != nil:
			return err
		case s.path == PathRedis && !renewed:
			return le.lose(now, "it expired in redis, or a Reset freed it")
		case s.path != PathRedis && le.deny:
			return fmt.Errorf("%w: rule %q: renewing a lease: %w", ErrUnavailable, u.k.Rule, s.cause)
		}
		l.local.renew(u.k, &u.p, u.now, now, u.member, s.path != PathRedis)
		le.onRedis = s.path == PathRedis
	} else {
		l.local.renew(u.k, &u.p, u.now, now, u.member, l.remote)
	}
	u.now, le.expires = now, now+u.p.window
	l.leases.renewed.Add(1)
	return nil
}

// lose marks the lease lost at now, frees what this process counted of it,
// and returns the error that says so. The caller holds le.mu.
func (le *Lease) lose(now int64, why string) error {
	le.done = true
	le.l.leases.remove(le)
	le.l.leases.lost.Add(1)
	le.l.local.release1(le.u.k, &le.u.p, le.u.now, le.u.member)
	return fmt.Errorf("%w: rule %q: %s", ErrLeaseLost, le.u.k.Rule, why)
}

// LeasesByRule returns the leases of Concurrency rules this Limiter holds
// now (see Stats.LeasesHeld), by rule name: the leases in flight under each
// rule, as far as this process knows. It returns nil when none is held.
func (l *Limiter) LeasesByRule() map[string]int {
	return l.leases.byRule()
}

// Hold acquires a slot of key under rule (see Acquire), runs fn while
// holding it, and releases it when fn returns, also when fn panics. While
// fn runs the lease is renewed every third of the rule's Window; when it
// is lost (a renewal found it expired, or freed by a Reset), fn's context
// is cancelled and Hold returns fn's error joined with one wrapping
// ErrLeaseLost. When no slot is free, Hold returns the rejection as a
// Result without running fn.
func (l *Limiter) Hold(ctx context.Context, rule Rule, key string, fn func(ctx context.Context) error) (res Result, err error) {
	le, res, err := l.Acquire(ctx, rule, key)
	if err != nil || le == nil {
		return res, err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	keeping, stop := context.WithCancel(context.Background())
	lost := make(chan error, 1)
	go func() { lost <- le.keep(keeping, cancel) }()
	defer func() { // also when fn panics
		stop()
		if err2 := <-lost; err2 != nil {
			err = errors.Join(err, err2)
		}
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), l.set.Timeout)
		le.release(rctx)
		done()
	}()
	return res, fn(fnCtx)
}

// keep renews le every third of its Window until ctx ends, and returns
// the error that lost it, after cancelling with it.
func (le *Lease) keep(ctx context.Context, cancel context.CancelCauseFunc) error {
	l := le.l
	every := time.Duration(le.u.p.window) * time.Microsecond / 3
	for {
		if l.sleep(ctx, every) != nil {
			return nil
		}
		err := le.Renew(ctx)
		switch {
		case err == nil:
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrClosed):
			cancel(err)
			return err
		case ctx.Err() != nil:
			return nil
		default:
			// Redis refused and the fallback could not extend it: the
			// lease holds until it expires, and is lost then.
			le.mu.Lock()
			expired := l.localNow() >= le.expires
			le.mu.Unlock()
			if expired {
				err = fmt.Errorf("%w: rule %q: it expired while it could not be renewed: %w", ErrLeaseLost, le.u.k.Rule, err)
				cancel(err)
				return err
			}
		}
	}
}

// AcquireWait takes one slot of key under rule as Acquire does, waiting
// for one until ctx ends. It does not poll Redis in a loop: after a
// rejection it waits until the earliest lease would expire, or a lease of
// this Limiter is released, or an eighth of the rule's Window (a release
// elsewhere may free a slot at any moment), whichever comes first. It
// returns the Result of the Acquire that succeeded, or of the last one with
// ctx's error.
func (l *Limiter) AcquireWait(ctx context.Context, rule Rule, key string) (*Lease, Result, error) {
	for {
		freed := l.leases.freed()
		le, res, err := l.Acquire(ctx, rule, key)
		if err != nil || le != nil {
			return le, res, err
		}
		wait := max(min(res.RetryAfter, rule.Limit.Window/8), time.Millisecond)
		if res.Banned {
			wait = res.RetryAfter
		}
		if err := l.sleepOr(ctx, wait, freed); err != nil {
			return nil, res, fmt.Errorf("rule %q has no free slot for key %q: %w", rule.Name, key, err)
		}
	}
}

// errFreed is the cause that ends sleepOr's wait when a lease is released.
var errFreed = errors.New("ratelimit: a lease was released")

// sleepOr waits for d on the limiter's clock (see sleep), until wake is
// closed (it returns nil then, as when d has passed), or until ctx ends.
func (l *Limiter) sleepOr(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	woken, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-wake:
			cancel(errFreed)
		case <-woken.Done():
		}
	}()
	err := l.sleep(woken, d)
	if context.Cause(woken) == errFreed {
		return nil
	}
	return err
}

// releaseLeases releases the leases the Limiter still holds, best effort,
// within Options.Timeout: Close calls it. The rest expire at their TTL.
func (l *Limiter) releaseLeases() {
	held := l.leases.all()
	if len(held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.set.Timeout)
	defer cancel()
	for _, le := range held {
		le.release(ctx)
	}
}

// renewOnRedis runs lua/renew.lua for the lease u at now: it moves the
// lease taken at taken to now, or with force records it at now past the
// limit (a dry run's). It returns how the call was sent, the key of the
// lease's log, and whether Redis renewed it.
func (l *Limiter) renewOnRedis(ctx context.Context, conn *redisConn, u *undo, now, taken int64, force bool) (sent, string, bool, error) {
	keys := redisKeys(l.set.KeyPrefix, u.k)
	key := keys.Meter(u.p.alg.redis.letter())
	args := []string{l.clockArg(now, false), itoa(u.p.window), u.member, itoa(u.p.rate), itoa(taken)}
	if force {
		args = append(args, "1")
	}
	var renewed bool
	s, err := l.send(ctx, conn, key, subject{"rule", u.k.Rule}, false, func(ctx context.Context, c rueidis.Client) error {
		v, err := renewScript.Exec(ctx, c, []string{key, keys.Reset}, args).AsInt64()
		renewed = v == 1
		return err
	})
	return s, key, renewed, err
}

// recordOver records the lease u of a rule in dry run that enforcing would
// have refused: under an id of its own at now, in Redis past the limit
// (renew.lua's ARGV[6]), or in the process, owed to Redis, when Redis cannot
// be used. It reports whether the lease was recorded.
func (l *Limiter) recordOver(ctx context.Context, u *undo) bool {
	now := l.localNow()
	u.member, u.now, u.local = l.member(l.seq.Add(1)), now, true
	conn := l.conn.Load()
	if !l.remote || conn == nil {
		l.local.addLease(u.k, &u.p, now, u.member, l.remote)
		return true
	}
	s, key, _, err := l.renewOnRedis(ctx, conn, u, now, now, true)
	if err != nil {
		u.local = false
		return false
	}
	if s.path == PathRedis {
		u.onRedis, u.key = true, key
	}
	l.local.addLease(u.k, &u.p, now, u.member, s.path != PathRedis)
	s.release()
	return true
}

package ratelimit

import (
	"context"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/crowd"
)

// The crowd at a full key: once a pair has no room left, this process'
// calls for it go to Redis a few at a time, and the others wait for them
// to land instead of all asking at once.
//
// A hot key under a crowd of callers spends most of its time full. Every
// call that went to Redis then would be rejected there, thousands a
// second for a rule of 100, and every one of them would take a slot of
// admission control from the calls of other keys; when the shield's
// cached rejection ends (a slot frees), the whole crowd would go at once,
// admission control would shed what it cannot serve in time, and those
// calls would come back Degraded from a healthy Redis.
//
// So a pair that Redis rejected, or that this process' own count found
// full (see hold), gets a crowd: a count of the calls on their way to
// Redis with a seat (flying) and of the seats (room). While every seat is
// taken, or others wait, a call waits until one of the pair's calls lands,
// then looks again (the shield first: a rejection that landed answers it
// at once). So does a call its own count finds full when a landing cached
// a rejection after the call looked at the shield (see hold). A call the
// own count finds full goes only when no other call of the pair flies:
// their landing may free the count, or cache a rejection. A rejection
// leaves one seat: one call probes, when the own count says a slot frees.
// An allowed call that leaves the pair full, on Redis and by the own
// count, caches the rejection the next call would get (see shieldFull) and
// lands as that rejection would. Any other allowed call leaves as many
// seats as Redis says remain, at least one; when that is more than half
// the rule, and no call flies or waits, the pair is no longer crowded and
// its crowd is dropped. So while demand exceeds the rule a freed slot
// costs Redis one call, the one it allows, and at most one more, a probe
// that finds the key full again (cached by the shield), when the allowed
// call's landing could not tell (calls of the pair on their way, another
// process' events), whatever the crowd.
//
// A call waits at most half of Options.Timeout for a seat, counted from its
// start. When its wait runs out while a call of its pair is still on its
// way with a seat, it is rejected in-process, as the shield would (see
// ranOut): the pair was full when its crowd formed, and the calls on their
// way take what freed since. Sending it instead was a flood: a process
// starved of CPU reads its replies late, so that every waiter's time ran
// out together, and thousands of seatless calls a second were rejected on
// Redis (or shed, Degraded), which delayed the landings further. A call
// that finds no call of its pair on its way goes to Redis without a seat.
// So no call takes more than 1.5 × Timeout. A call that admission control
// would shed waits for a landing of its pair in the same way, when one is
// on its way, instead of being decided Degraded.

// crowdOf returns k's crowd, or nil. The caller holds sh.mu.
func (sh *localShard) crowdOf(k *lkey, h uint64) *crowd.Crowd {
	if sh.crowds.Len() == 0 {
		return nil
	}
	return sh.crowds.Peek(k, h)
}

// gather returns k's crowd, making one with a single seat when it has
// none. The caller holds sh.mu.
func (sh *localShard) gather(k *lkey, h uint64) *crowd.Crowd {
	if c := sh.crowdOf(k, h); c != nil {
		return c
	}
	return sh.crowds.Add(k, h, crowd.New())
}

// land notes that a call of k landed: with a seat when hd says so, and on
// Redis when d is not nil, in which case Redis' answer sets the seats: one
// after a rejection (which gathers a crowd for a call that queues; record
// lands an allowed call that left the pair full as one), what remains
// after an allowed call (rate - count).
// After a rejection every waiting call looks again (the shield may answer
// it); otherwise the free seats go to the calls that wait, oldest first.
// The caller holds sh.mu.
func (sh *localShard) land(k *lkey, h uint64, hd *held, d *decision, rate int64) {
	seated := hd.seated
	hd.seated = false
	c := sh.crowdOf(k, h)
	if c == nil {
		if hd.queued && d != nil && !d.allowed {
			sh.gather(k, h) // a rejection: the pair is full
		}
		return
	}
	if seated {
		c.Stand()
	}
	switch {
	case d == nil:
		c.SeatWaiting()
	case !d.allowed:
		c.Rejected()
	case 2*(rate-d.count) > rate && c.Idle():
		// More than half the rule left, no call on its way and nobody
		// waiting: the pair is no longer crowded.
		sh.crowds.Remove(k, h)
	default:
		c.Left(rate - d.count)
	}
}

// dropCrowd forgets k's crowd, waking the calls that wait (a Reset). The
// caller holds sh.mu.
func (sh *localShard) dropCrowd(k *lkey, h uint64) {
	if sh.crowdOf(k, h) != nil {
		sh.crowds.Remove(k, h) // wakes them: see newLocalStore
	}
}

// onItsWay puts the call at the end of the queue of the first of legs'
// pairs that has a call on its way with a seat, and returns that leg's
// index and the seat to wait for; a nil seat when no pair has one.
func (s *localStore) onItsWay(legs []leg) (int, *crowd.Seat) {
	for i := range legs {
		k, p := legs[i].k, legs[i].p
		sh, h := s.atPlan(k, p)
		sh.mu.Lock()
		c := sh.crowdOf(k, h)
		if c != nil && c.Flying() > 0 {
			w := c.Wait()
			sh.mu.Unlock()
			return i, w
		}
		sh.mu.Unlock()
	}
	return 0, nil
}

// leave takes a call that stopped waiting out of k's queue, and reports
// whether it was given a seat meanwhile (it then flies with it).
func (s *localStore) leave(k lkey, p *plan, w *crowd.Seat) bool {
	sh, _ := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return w.Leave()
}

// giveBack returns a seat a call was given and will not use. The caller
// holds no lock.
func (s *localStore) giveBack(k lkey, p *plan, w *crowd.Seat) {
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c := sh.crowdOf(&k, h); c != nil {
		c.GiveBack()
	}
}

// await waits for a seat in lg's crowd (w), for at most half of timeout
// over all of the call's waits (wt): until w is woken, ctx ends or that
// time runs out, in which case it reports ranOut and lg no longer queues
// (see ranOut). A seat it was given is left in lg.seat for hold. ctx's
// end is returned as its error, the seat given back.
func await(ctx context.Context, wt *crowd.Waiting, s *localStore, lg *leg, w *crowd.Seat, timeout time.Duration) (ranOut bool, err error) {
	lg.waited = true
	woken, err := wt.Await(ctx, w, timeout/2)
	if woken {
		if w.Granted() {
			lg.seat = w
		}
		return false, nil
	}
	if s.leave(*lg.k, lg.p, w) {
		if err != nil {
			s.giveBack(*lg.k, lg.p, w)
			return false, err
		}
		lg.seat = w
		return false, nil
	}
	lg.queue = false
	return err == nil, err
}

// ranOut decides at now the call of lg (one that asks, not a peek) whose
// wait for a seat ran out: rejected, while a call of its pair is on its way
// with a seat (see crowd.go), with the process' own count's RetryAfter and
// ResetAfter, and the violation counted as the shield counts it. It
// reports false, deciding nothing, when no call of the pair is on its way,
// or when the violation is Redis' to count (one that would ban the key):
// the call then goes to Redis without a seat.
func (s *localStore) ranOut(lg *leg, now int64) (decision, bool) {
	k, p := *lg.k, lg.p
	sh, h := s.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c := sh.crowdOf(&k, h); c == nil || c.Flying() == 0 {
		return decision{}, false
	}
	if p.penalize && sh.ladders.WouldBan(&k, h, &p.penalty, now) {
		return decision{}, false
	}
	d := decision{count: p.rate, retry: 1}
	if m, count, asked := sh.measure(&k, h, p, now, lg.n, false, false); m != nil {
		d.reset = m.Reset(now, p.window, false)
		if count+asked > p.rate {
			d.retry = max(1, m.RetryIn(now, p.window, p.rate, asked))
		}
	}
	if p.penalize {
		sh.violate(&k, h, p, now, false, p, &d)
	}
	return d, true
}

package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/fleet"
	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/redis/rueidis"
)

// The fleet: while Redis can be used, every Limiter with a Redis client
// announces itself once per Options.HeartbeatInterval in the instances set
// of its key prefix (pair.FleetKey, lua/fleet.lua) and learns how many Limiters are
// live there. When it has to decide without Redis, it enforces its share of
// each rule, ceil(Rate / live Limiters), so that the fleet as a whole
// admits about the rule's rate (settings.degradedRate).
//
// The heartbeat's time is Redis' TIME, even when Options.Clock is set: a
// Limiter is live while its process runs, which is wall time, and the
// heartbeats of every instance are compared with each other, which needs
// one clock. A Clock may be a fake that stands still or jumps by hours in
// a test, or each instance's own; neither says whether another process is
// still running. Tests stay deterministic: the count only changes at a
// heartbeat, Stats.Instances shows it, and miniredis' SetTime sets the
// TIME a heartbeat reads.

// heartbeats announces the Limiter on conn at once and then every
// Options.HeartbeatInterval, until the Limiter is closed; then it withdraws
// the announcement. A heartbeat that fails (Redis cannot be used, no
// admission slot was to spare) keeps the count last seen; one goes while
// the breaker rests too (see sendBeat).
func (l *Limiter) heartbeats(conn *redisConn) {
	key := pair.FleetKey(l.set.KeyPrefix)
	t := time.NewTicker(l.set.HeartbeatInterval)
	defer t.Stop()
	kicked := false
	for {
		l.beat(conn, key, kicked)
		select {
		case <-l.done:
			l.withdraw(conn, key)
			return
		case <-t.C:
			kicked = false
		case <-l.hbKick:
			kicked = true
		}
	}
}

// kickHeartbeat makes the next heartbeat come now, without waiting: once
// a breaker closes, so that the fleet learns at once what this Limiter
// owes and this Limiter what the others do. (The write-back beats itself
// once it has brought everything: see writeBack.)
func (l *Limiter) kickHeartbeat() {
	select {
	case l.hbKick <- struct{}{}:
	default:
	}
}

// The fleet's reserve: what the other instances decided without Redis, and
// the write-back has not brought to Redis yet, is not in Redis' count, and
// an instance that decides on Redis meanwhile could admit the whole rule on
// top of it. So until every instance has written back, each decision on
// Redis counts a reserve for the others, on top of Redis' count (as held.owed
// counts the caller's own debts): the degraded share of each other live
// instance that may hold such decisions. Redis orders every decision, and
// the heartbeat tells which instances those are (lua/fleet.lua): those that
// said they owe Redis (their write-back is not done), and those that missed
// a heartbeat (Redis may be out of their reach: a partition). An instance
// whose breaker opened asks, with its first decision on Redis after (see
// settled), which other instances have not announced themselves since it
// opened: their calls failed too, likely, and they may owe Redis as well,
// so they count until they announce themselves again (this assumes that
// the hosts' clocks agree to well within a heartbeat period). And
// when Redis lost its data (the fleet's epoch, which outlives the set by a
// day, is newer than the one it announced itself in: see lua/fleet.lua),
// the others' decisions of the last window are gone
// from Redis with it: each instance reserves every other's share for one
// Window from when it learnt of the loss, and counts its own events of
// the window (its own count, which Redis lost too) where it counted only
// those it owes. The other kinds count the loss for as long as their
// meters count what it held (writeBackKind.lost): a fixed window until the
// window that held the loss ends, a calendar quota until its period ends,
// an approximate counter through the next window, fading as the counter
// weighs it, and a GCRA bucket less a token every emission interval, as
// the lost bucket would have drained. The reserve leaves an instance
// at least its own share, so that a fleet whose shares add up to more than
// the rule (Options.DegradedShare) is not shut out.
//
// So a window that spans a recovery admits at most the instances' shares
// together, Rate + instances - 1 for the exact log (docs/fallback.md, "A fleet
// across a recovery"); the price is that an instance that owes, or has gone
// away without withdrawing, holds back the others' admissions by its share
// until it has written back or its announcement runs out.

// reserve returns the events a decision on Redis through conn at now for
// p counts for the other instances (see above), whether a loss of Redis'
// data still counts at now (writeBackKind.lost), and when it was, on the
// process' own clock (now's; maxTime: not known), so that the process'
// own events after it, which Redis holds, do not count twice (see
// lostOwn).
func (l *Limiter) reserve(conn *redisConn, p *plan, now int64) (events int64, lost bool, lostAt int64) {
	rate := p.rate
	n := l.set.fleet.Load()
	if n <= 1 {
		return 0, false, 0
	}
	settled := l.settled(conn) // first: it may learn who owes
	share := l.set.degradedRate(rate)
	most := max(0, rate-share) // the reserve leaves this instance its share
	if !settled {
		// Its calls failed, and no heartbeat has said since whether
		// Redis lost its data or who owes: as if both.
		return min((n-1)*share, most), true, maxTime
	}
	events = min(min(l.fleet.Unsettled(), n-1)*share, most)
	if ls := l.fleet.Lost(); ls != nil {
		at, then := ls.On(l.sendsNow(p.alg.rules.timed()), p.prefetch, now, l.clock.Now())
		var still int64
		still, lost = p.alg.back.lost(*p, at, then, min((n-1)*share, most))
		events = max(events, still)
		lostAt = at - (then - now)
	}
	return max(events, 0), lost, lostAt
}

// heartbeat announces the Limiter once and stores the live count Redis
// returns. Two counts may not hold every live Limiter yet, so they raise
// the count last seen but never lower it, and an outage that starts then
// is met with the share of the fleet as it was, not with a larger one:
//   - a set younger than three heartbeat periods (Redis lost it: a restart
//     without persistence, a failover);
//   - the counts of the fleet.RejoinBeats heartbeats after one of this
//     Limiter's failed: the other instances' failed too (Redis refused them all, or
//     shed them under load), for long enough to be trimmed, and each is
//     back only at its next heartbeat.
func (l *Limiter) heartbeat(conn *redisConn, key string) { l.beat(conn, key, false) }

// beat is heartbeat; a kicked one (see kickHeartbeat) comes between two of
// the period's, is not one of the fleet.RejoinBeats, and may raise the count but
// never lowers it: only the period's heartbeats do.
func (l *Limiter) beat(conn *redisConn, key string, kicked bool) {
	// One heartbeat at a time, and none after the withdrawal: a beat the
	// write-back or a decision sends (see writeBack, settled) must not
	// announce again a Limiter that Close withdrew.
	l.beating.Lock()
	defer l.beating.Unlock()
	if l.withdrawn {
		return
	}
	// A heartbeat takes an admission slot only when one is to spare, unless
	// the last one found none: then it waits for one as a call does, so
	// that load never starves it for long enough that the other instances
	// trim this one and enlarge their shares.
	spare := !l.heartbeatStarved.Load()
	// Since an opening of this Limiter's breaker, the others must have
	// announced themselves again since it to count as settled (see
	// reserve): their calls failed too, likely, and they decided without
	// Redis.
	b := l.fleet.Begin()
	r, err := l.sendBeat(conn, key, spare)
	l.heartbeatStarved.Store(errors.Is(err, errShed))
	if err != nil {
		l.fleet.Missed()
		l.log.Log(logHeartbeat, slog.LevelDebug, "ratelimit: heartbeat failed; keeping the instance count last seen",
			"instances", l.fleet.Live(), "err", err)
		return
	}
	lost := l.fleet.Lost()
	l.fleet.Learn(b, r, kicked, int64(l.set.HeartbeatInterval/time.Microsecond), l.clock.Now(), l.localNow())
	if l.fleet.Lost() != lost {
		// Redis lost the bans too: the next call of a key this process
		// knows is banned goes to Redis again, which writes the ban back
		// on record (see decide.lua's ban_left).
		l.local.unshieldBans()
	}
}

// sendBeat runs lua/fleet.lua: this Limiter is live for three heartbeat
// periods, owes Redis or not, and counts the others as settled from the
// fleet's SettleFrom (see fleet.View.Begin).
func (l *Limiter) sendBeat(conn *redisConn, key string, spare bool) (fleet.Reply, error) {
	owes := "0"
	if l.owes(conn) {
		owes = "1"
	}
	period := int64(l.set.HeartbeatInterval / time.Microsecond)
	var r fleet.Reply
	run := func(ctx context.Context, c rueidis.Client) error {
		reply, err := fleetScript.Exec(ctx, c, []string{key, key + ":born", key + ":owing", key + ":epoch", key + ":lost"}, []string{l.id, itoa(period), owes, itoa(l.fleet.SettleFrom())}).AsIntSlice()
		if err != nil {
			return err
		}
		if len(reply) != 6 {
			return &callError{cause: misuse, err: errors.New("unexpected heartbeat reply")}
		}
		r = fleet.Reply{Live: reply[0], Age: reply[1], Unsettled: reply[2], Now: reply[3], Epoch: reply[4], LostBy: reply[5]}
		return nil
	}
	if conn != nil && conn.breakers.ForKey(key).Resting() {
		// The breaker rests, and the Limiter decides without Redis: that
		// is when the others must learn that it owes Redis, and that it
		// is live. The heartbeat goes all the same, once a period, within
		// Options.Timeout, without the breaker: it neither closes it nor
		// counts as its failure. Through the resting breaker it was never
		// sent, so the others counted this Limiter's share only once its
		// announcement was 1.5 periods old, and forgot it at 3, while it
		// still decided without Redis (TestRestingBreakerStillAnnounces).
		ctx, cancel := context.WithTimeout(context.Background(), l.set.Timeout)
		defer cancel()
		return r, run(ctx, conn.client)
	}
	err := l.sendWithoutFallback(context.Background(), conn, key, subject{"heartbeat", key}, "announcing the limiter", spare, run)
	return r, err
}

// owes reports whether the Limiter may owe Redis decisions it made
// without it: a breaker in front of conn that is not closed, or a decision
// begun behind one while it was not (breaker.Breaker.Hold), or events the
// write-back has not brought to Redis yet. A half-open breaker lets one
// probe through and decides the calls that come meanwhile without Redis:
// those may record their events just after a heartbeat that is that probe
// said nothing was owed. The heartbeat that follows the breaker's closing
// (see announce) says what is true then. The breakers come first: a
// decision that saw one not closed records its events before it releases
// its hold.
func (l *Limiter) owes(conn *redisConn) bool {
	for _, b := range conn.breakers.All() {
		if b.Owes() {
			return true
		}
	}
	return l.local.owing.Events() > 0
}

// settled reports whether a heartbeat since the last opening of this
// Limiter's breaker, and since its last failed call, has told which other
// instances may owe Redis and whether Redis lost its data (see reserve).
// When none has, it sends one at once (the calls that come meanwhile wait
// for it), unless one was tried less than Options.ProbeAfter ago: then it
// reports false, and the caller counts every other instance as owing and
// its own whole count, as after a loss.
func (l *Limiter) settled(conn *redisConn) bool {
	if l.fleet.Settled() {
		return true
	}
	// The calls that come meanwhile wait for it: one round trip, once.
	l.settling.Lock()
	defer l.settling.Unlock()
	if l.fleet.Settled() {
		return true
	}
	if !l.fleet.TrySettle(l.clock.Now(), int64(l.set.ProbeAfter/time.Microsecond)) {
		return false
	}
	l.beat(conn, pair.FleetKey(l.set.KeyPrefix), true)
	return l.fleet.Settled()
}

// noteFailure notes a call to Redis that failed as an outage: the next
// decision on Redis asks the fleet first (see settled), so that it learns
// at once whether Redis lost its data (a restart fails every call in
// flight), and counts the other instances that have not announced
// themselves since the first such failure: Redis may have failed them too.
func (l *Limiter) noteFailure() {
	if l.set.HeartbeatInterval > 0 {
		l.fleet.Failed(l.clock.Now())
	}
}

// withdraw removes the Limiter from the instances set when it closes, so
// that the others stop counting it at once rather than when its
// announcement runs out. It is the Limiter's last call: it waits for no
// admission slot (a closing Limiter under load has none to spare, and
// nothing after it to protect), only for Options.Timeout, and is skipped
// while the key's breaker is open.
func (l *Limiter) withdraw(conn *redisConn, key string) {
	l.beating.Lock()
	defer l.beating.Unlock()
	l.withdrawn = true
	if conn.breakers.ForKey(key).Resting() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.set.Timeout)
	defer cancel()
	if err := conn.client.Do(ctx, conn.client.B().Zrem().Key(key).Member(l.id).Build()).Error(); err != nil {
		l.log.Log(logHeartbeat, slog.LevelDebug, "ratelimit: could not withdraw the limiter from the fleet", "err", err)
	}
}

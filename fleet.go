package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/rueidis"
)

// The fleet: while Redis can be used, every Limiter with a Redis client
// announces itself once per Options.HeartbeatInterval in the instances set
// of its key prefix (fleetKey, lua/fleet.lua) and learns how many Limiters are
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
// the announcement. A heartbeat that fails (Redis cannot be used, the breaker
// is open, no admission slot was to spare) keeps the count last seen.
func (l *Limiter) heartbeats(conn *redisConn) {
	key := fleetKey(l.set.KeyPrefix)
	t := time.NewTicker(l.set.HeartbeatInterval)
	defer t.Stop()
	for {
		l.heartbeat(conn, key)
		select {
		case <-l.done:
			l.withdraw(conn, key)
			return
		case <-t.C:
		}
	}
}

// rejoinBeats is how many successful heartbeats after a failed one may
// raise the count but not lower it (see heartbeat).
const rejoinBeats = 3

// heartbeat announces the Limiter once and stores the live count Redis
// returns. Two counts may not hold every live Limiter yet, so they raise
// the count last seen but never lower it, and an outage that starts then
// is met with the share of the fleet as it was, not with a larger one:
//   - a set younger than three heartbeat periods (Redis lost it: a restart
//     without persistence, a failover);
//   - the counts of the rejoinBeats heartbeats after one of this Limiter's
//     failed: the other instances' failed too (Redis refused them all, or
//     shed them under load), for long enough to be trimmed, and each is
//     back only at its next heartbeat.
func (l *Limiter) heartbeat(conn *redisConn, key string) {
	period := int64(l.set.HeartbeatInterval / time.Microsecond)
	var live, age int64
	// A heartbeat takes an admission slot only when one is to spare, unless
	// the last one found none: then it waits for one as a call does, so
	// that load never starves it for long enough that the other instances
	// trim this one and enlarge their shares.
	spare := !l.heartbeatStarved.Load()
	err := l.sendWithoutFallback(context.Background(), conn, key, subject{"heartbeat", key}, "announcing the limiter", spare,
		func(ctx context.Context, c rueidis.Client) error {
			reply, err := fleetScript.exec(ctx, c, []string{key, key + ":born"}, []string{l.id, itoa(period)}).AsIntSlice()
			if err != nil {
				return err
			}
			if len(reply) != 2 {
				return &callError{cause: misuse, err: errors.New("unexpected heartbeat reply")}
			}
			live, age = reply[0], reply[1]
			return nil
		})
	l.heartbeatStarved.Store(errors.Is(err, errShed))
	if err != nil {
		l.rejoining.Store(rejoinBeats)
		l.log.log(logHeartbeat, slog.LevelDebug, "ratelimit: heartbeat failed; keeping the instance count last seen",
			"instances", l.set.fleet.Load(), "err", err)
		return
	}
	rejoining := l.rejoining.Load() > 0
	if rejoining {
		l.rejoining.Add(-1)
	}
	if age < 3*period || rejoining {
		live = max(live, l.set.fleet.Load())
	}
	l.set.fleet.Store(max(1, live))
}

// withdraw removes the Limiter from the instances set when it closes, so
// that the others stop counting it at once rather than when its
// announcement runs out. It is the Limiter's last call: it waits for no
// admission slot (a closing Limiter under load has none to spare, and
// nothing after it to protect), only for Options.Timeout, and is skipped
// while the key's breaker is open.
func (l *Limiter) withdraw(conn *redisConn, key string) {
	if conn.breakers.forKey(key).resting() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.set.Timeout)
	defer cancel()
	if err := conn.client.Do(ctx, conn.client.B().Zrem().Key(key).Member(l.id).Build()).Error(); err != nil {
		l.log.log(logHeartbeat, slog.LevelDebug, "ratelimit: could not withdraw the limiter from the fleet", "err", err)
	}
}

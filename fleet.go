package ratelimit

import (
	"context"
	"log/slog"
	"strconv"
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

// heartbeat announces the Limiter once and stores the live count Redis
// returns; it reports whether it succeeded.
func (l *Limiter) heartbeat(conn *redisConn, key string) bool {
	period := strconv.FormatInt(int64(l.set.HeartbeatInterval/time.Microsecond), 10)
	var live int64
	err := l.backgroundCall(context.Background(), conn, key, subject{"heartbeat", key}, "announcing the limiter",
		func(ctx context.Context, c rueidis.Client) (err error) {
			live, err = fleetScript.exec(ctx, c, []string{key}, []string{l.id, period}).AsInt64()
			return err
		})
	if err != nil {
		l.log.log(logHeartbeat, slog.LevelDebug, "ratelimit: heartbeat failed; keeping the instance count last seen",
			"instances", l.set.fleet.Load(), "err", err)
		return false
	}
	l.set.fleet.Store(max(1, live))
	return true
}

// withdraw removes the Limiter from the instances set, best effort, so
// that the others stop counting it before its announcement runs out.
func (l *Limiter) withdraw(conn *redisConn, key string) {
	l.backgroundCall(context.Background(), conn, key, subject{"heartbeat", key}, "withdrawing the limiter",
		func(ctx context.Context, c rueidis.Client) error {
			return c.Do(ctx, c.B().Zrem().Key(key).Member(l.id).Build()).Error()
		})
}

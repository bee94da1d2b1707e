package ratelimit

import (
	"log/slog"

	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/ratelimit-go/ratelimit/internal/redisio"
)

// watchConn holds a subscription to the fleet's channel (its key's name)
// on a connection of its own to the node that keeps the fleet's key, so
// that a Limiter whose calls were all answered without Redis (its shield
// held a rejection for each, or it had none) learns of a restart or a
// failover all the same: the connection ends with the server, and the
// Limiter notes it as a failed call (noteFailure), so that its next
// decision on Redis asks the fleet first whether Redis lost its data and
// who owes it (see settled). Without the watch it learnt that only at its
// next heartbeat, and meanwhile admitted up to a Rate on the empty Redis
// on top of what the others had admitted (docs/fallback.md, "Who learns
// of an outage").
//
// A server that refuses the subscription (an ACL user without the
// channel: grant it &<KeyPrefix>v1:{instances}; a cluster before Redis 7,
// which has no SSUBSCRIBE) leaves that gap open; the refusal is logged at
// Warn (as its own kind of line, throttled apart), and tried again every
// heartbeat period. Close waits for the watch to end: at most for a dial
// under way, bounded by the client's Dialer.Timeout (Dial sets it to
// Options.Timeout; see New), or for a subscription asked for, bounded by
// Options.Timeout.
func (l *Limiter) watchConn(conn *redisConn) {
	redisio.Watch(l.done, conn.client, redisio.WatchConfig{
		Channel: pair.FleetKey(l.set.KeyPrefix),
		Timeout: l.set.Timeout,
		Retry:   l.set.Timeout,
		Refused: l.set.HeartbeatInterval,
		Follow:  l.set.HeartbeatInterval,
		Ended: func(err error) {
			l.noteFailure()
			l.log.Log(logWatch, slog.LevelDebug, "ratelimit: the connection that watches Redis ended; the next decision on Redis asks the fleet first", "err", err)
		},
		Refusal: func(err error) {
			l.log.Log(logWatch, slog.LevelWarn, "ratelimit: Redis refused the subscription that watches it for restarts; until it is granted, this Limiter learns of a restart its calls did not meet only at its next heartbeat (the user's ACL: docs/operations.md)", "channel", pair.FleetKey(l.set.KeyPrefix), "err", err)
		},
	})
}

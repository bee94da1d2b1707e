package ratelimit

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/rueidis"
)

// Dial returns a Limiter that owns a rueidis client built from clientOpt and
// closes it on Close. It returns a working Limiter even when Redis is
// unreachable: until the client connects (retried in the background with
// backoff) every call is decided by Options.Degraded and marked Degraded.
//
// Dial sets clientOpt.DisableCache (the limiter reads nothing through the
// client-side cache, and servers without CLIENT TRACKING refuse it) and,
// when it is zero, clientOpt.Dialer.Timeout to Options.Timeout, so that a
// reconnect cannot hold calls up for long.
func Dial(clientOpt rueidis.ClientOption, opts Options) (*Limiter, error) {
	if len(clientOpt.InitAddress) == 0 {
		return nil, fmt.Errorf("%w: ClientOption.InitAddress is empty", ErrInvalidOptions)
	}
	l, err := newLimiter(opts, true)
	if err != nil {
		return nil, err
	}
	l.owned = true
	l.startWriteBack()
	clientOpt.DisableCache = true
	if clientOpt.Dialer.Timeout == 0 {
		clientOpt.Dialer.Timeout = l.set.Timeout
	}
	if c, err := rueidis.NewClient(clientOpt); err == nil {
		l.conn.Store(l.newConn(c))
		return l, nil
	} else {
		l.log.log(logConnect, slog.LevelWarn, "ratelimit: redis unreachable; deciding locally and retrying in the background", "err", err)
	}
	l.workers.Add(1)
	go func() {
		defer l.workers.Done()
		l.connect(clientOpt)
	}()
	return l, nil
}

// connect builds the client with backoff until it succeeds or the Limiter
// is closed.
func (l *Limiter) connect(clientOpt rueidis.ClientOption) {
	wait := 50 * time.Millisecond
	for {
		select {
		case <-l.done:
			return
		case <-time.After(wait):
		}
		c, err := rueidis.NewClient(clientOpt)
		if err == nil {
			select {
			case <-l.done: // closed meanwhile: nobody will close it
				c.Close()
			default:
				l.conn.Store(l.newConn(c))
				l.set.Logger.Info("ratelimit: connected to redis", "addr", clientOpt.InitAddress)
				l.kickWriteBack() // what was decided before it connected
			}
			return
		}
		l.log.log(logConnect, slog.LevelWarn, "ratelimit: redis still unreachable; deciding locally", "err", err)
		wait = min(2*wait, l.set.ProbeAfter)
	}
}

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
// Dial tries to connect once before it returns, within
// clientOpt.Dialer.Timeout (see below). When that try fails it logs at
// once, naming the address, that Redis cannot be reached and that decisions
// are local until it can (or, as an error, that Redis refused the
// credentials or the permission); the retries log again at most once per
// Options.LogInterval, and the connection when it is made. Right after
// Dial, [Limiter.Stats]' Connected says whether the first try connected,
// so that a program can tell its users where its limits are kept.
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
	c, err := rueidis.NewClient(clientOpt)
	if err == nil {
		l.conn.Store(l.newConn(c))
		return l, nil
	}
	if c != nil { // ForceSingleClient's, returned with the error: the retries build their own
		c.Close()
	}
	l.logNoClient(clientOpt, err, true)
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
		if err != nil && c != nil { // ForceSingleClient's: see Dial
			c.Close()
		}
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
		l.logNoClient(clientOpt, err, false)
		wait = min(2*wait, l.set.ProbeAfter)
	}
}

// logNoClient logs that no client could be built from clientOpt (err), at
// Dial (first) or in a retry: as an error when Redis refused the
// credentials or the permission (see refusal), as a warning that Redis
// cannot be reached otherwise. Both name the address, since err may not
// (a timeout's does not).
func (l *Limiter) logNoClient(clientOpt rueidis.ClientOption, err error, first bool) {
	if msg, ok := refusal(err); ok {
		l.log.Log(logAuth, slog.LevelError, msg, "addr", clientOpt.InitAddress, "err", err)
		return
	}
	msg := "ratelimit: redis still unreachable; deciding locally"
	if first {
		msg = "ratelimit: redis unreachable; deciding locally until it can be reached, retrying in the background"
	}
	l.log.Log(logConnect, slog.LevelWarn, msg, "addr", clientOpt.InitAddress, "err", err)
}

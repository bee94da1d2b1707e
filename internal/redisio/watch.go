package redisio

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// WatchConfig says how Watch follows a connection.
type WatchConfig struct {
	// Channel is subscribed to (SSUBSCRIBE on a cluster, so that the
	// connection is to the node that serves the channel's slot). Nothing
	// is expected on it: the subscription only holds the connection.
	Channel string
	// Timeout bounds each attempt to subscribe, and Retry is the pause
	// between two attempts after one that failed to reach the server.
	Timeout, Retry time.Duration
	// Refused is the pause after the server refused the subscription (an
	// ACL without the channel: NOPERM).
	Refused time.Duration
	// Ended is called when a subscription ends while done is open: the
	// server stopped, restarted, failed over, or closed the connection. It
	// is not called while none could be established.
	Ended func(error)
	// Refusal is called with each refusal of the server.
	Refusal func(error)
}

// Watch holds a subscription on a connection of its own until done is
// closed, so that the end of that connection tells its owner that the
// server went away without a call of its own failing: a restart closes
// every connection, even when no call was in flight. After an end it
// subscribes again at once (after cfg.Retry when the subscription lasted
// less, so that a server that ends each at once is not asked in a tight
// loop), then every cfg.Retry while the server cannot be reached
// (cfg.Refused while it refuses).
//
// The end is learnt as soon as the connection's reader sees it; a server
// that stops answering without closing is found by rueidis' own health
// checks, later.
func Watch(done <-chan struct{}, c rueidis.Client, cfg WatchConfig) {
	for {
		since, err := watchOnce(done, c, cfg)
		select {
		case <-done:
			return
		default:
		}
		pause := time.Duration(0)
		_, refused := rueidis.IsRedisErr(err)
		switch {
		case !since.IsZero():
			cfg.Ended(err)
			if time.Since(since) < cfg.Retry {
				pause = cfg.Retry
			}
		case refused:
			cfg.Refusal(err)
			pause = cfg.Refused
		default:
			pause = cfg.Retry
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// watchOnce subscribes on a dedicated connection and waits for its end
// or for done. It returns when the subscription was established (zero:
// it was not), and why it ended or could not be.
func watchOnce(done <-chan struct{}, c rueidis.Client, cfg WatchConfig) (since time.Time, err error) {
	// Closed, never given back to the client's pool: giving it back
	// unsubscribes, and a server that answers that with an error where
	// rueidis waits for the unsubscription (miniredis under SetError
	// does: the root's TestFleetShare) makes rueidis panic, taking it for
	// a bug of its own. Close releases it too.
	dc, _ := c.Dedicate()
	defer dc.Close()
	ended := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {}})
	sub := dc.B().Subscribe().Channel(cfg.Channel).Build()
	if c.Mode() == rueidis.ClientModeCluster {
		sub = dc.B().Ssubscribe().Channel(cfg.Channel).Build()
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	err = dc.Do(ctx, sub).Error()
	cancel()
	if err != nil {
		return time.Time{}, err
	}
	since = time.Now()
	select {
	case err := <-ended:
		return since, err
	case <-done:
		return since, nil
	}
}

package redisio

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
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
	// Follow is how often the watch checks that the client still sends
	// to the node it watches (Sentinel: the master it follows may have
	// changed, while the old one still runs).
	Follow time.Duration
	// Refused is the pause after the server refused the subscription (an
	// ACL without the channel: NOPERM).
	Refused time.Duration
	// Ended is called when a subscription ends while done is open: the
	// server stopped, restarted, failed over, closed the connection or
	// unsubscribed it, or the client sends to another node now (see
	// Watch). It is not called while none could be established.
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
// An end is also: the server's unsubscribing the connection (a Cluster
// does when the channel's slot moves to another master), and, every
// cfg.Follow, a client that no longer sends to the node the watch is on
// (a Sentinel client that follows a new master, while the old one still
// runs). The end of the connection is learnt as soon as its reader sees
// it; a server that stops answering without closing is found by rueidis'
// own health checks, later.
func Watch(done <-chan struct{}, c rueidis.Client, cfg WatchConfig) {
	for {
		since, err := watchOnce(done, c, cfg)
		select {
		case <-done:
			return
		default:
		}
		pause := time.Duration(0)
		switch refused := refusal(err); {
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
	// a bug of its own. Close releases it too. The node is read first: a
	// client that moves in between is seen to have moved at the next
	// check, at worst once too often.
	node := nodeOf(c)
	dc, _ := c.Dedicate()
	defer dc.Close()
	unsubscribed := make(chan struct{}, 1)
	ended := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(rueidis.PubSubMessage) {},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			if s.Kind == "unsubscribe" || s.Kind == "sunsubscribe" {
				select {
				case unsubscribed <- struct{}{}:
				default:
				}
			}
		},
	})
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
	return since, held(done, c, node, cfg.Follow, ended, unsubscribed)
}

// held waits while a subscription on c's node node holds: until the
// connection ends (ended), the server unsubscribes it, c sends to another
// node (checked every follow), or done. It returns why it ended (nil for
// done).
func held(done <-chan struct{}, c rueidis.Client, node string, follow time.Duration, ended <-chan error, unsubscribed <-chan struct{}) error {
	t := time.NewTicker(follow)
	defer t.Stop()
	for {
		select {
		case err := <-ended:
			return err
		case <-unsubscribed:
			return errUnsubscribed
		case <-t.C:
			if nodeOf(c) != node {
				return errMoved
			}
		case <-done:
			return nil
		}
	}
}

// refusal reports whether err is the server's refusal of the
// subscription, not a reply that asks to try again elsewhere or later (a
// Cluster's MOVED before the client learnt a slot's move, which it then
// refreshes; CLUSTERDOWN, TRYAGAIN, LOADING).
func refusal(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, moved := re.IsMoved()
	_, ask := re.IsAsk()
	return !moved && !ask && !re.IsClusterDown() && !re.IsTryAgain() && !re.IsLoading()
}

var (
	errUnsubscribed = errors.New("the server ended the subscription")
	errMoved        = errors.New("the client sends to another node now")
)

// nodeOf names the nodes c sends to ("" on a Cluster, whose slots move
// with their channels: see Watch).
func nodeOf(c rueidis.Client) string {
	if c.Mode() == rueidis.ClientModeCluster {
		return ""
	}
	addrs := slices.Sorted(maps.Keys(c.Nodes()))
	return strings.Join(addrs, ",")
}

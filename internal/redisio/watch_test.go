package redisio_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/redisio"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// watching runs Watch on a client of srv (as user, when not empty) until
// stop is called or the test ends, and returns the errors of the ends and
// refusals it sees.
func watching(t *testing.T, srv *redistest.Server, user string) (ended, refused <-chan error, stop func()) {
	return watchingEvery(t, []string{srv.Addr()}, user, 5*time.Millisecond)
}

// watchingEvery is watching with the pause retry after an attempt that
// failed, or a subscription that lasted less.
func watchingEvery(t *testing.T, addrs []string, user string, retry time.Duration) (ended, refused <-chan error, stop func()) {
	t.Helper()
	opt := rueidis.ClientOption{InitAddress: addrs, DisableCache: true}
	if user != "" {
		opt.Username, opt.Password = user, "pass"
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	e, r := make(chan error, 16), make(chan error, 16)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		redisio.Watch(done, c, redisio.WatchConfig{
			Channel: "watched", Timeout: time.Second, Retry: retry, Refused: 5 * time.Millisecond, Follow: time.Second,
			Ended:   func(err error) { send(e, err) },
			Refusal: func(err error) { send(r, err) },
		})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			<-stopped // Watch returns once done is closed
		})
	}
	t.Cleanup(func() { stop(); c.Close() })
	return e, r, stop
}

// send sends err on ch unless ch is full: a test that lets errors pile
// up has failed on their count already, and the watch must not block.
func send(ch chan error, err error) {
	select {
	case ch <- err:
	default:
	}
}

// subscribers returns how many connections srv has subscribed to the
// watched channel.
func subscribers(t *testing.T, srv *redistest.Server) string {
	return subscribersBy(t, srv, "NUMSUB")
}

// subscribersBy is subscribers through PUBSUB's sub (SHARDNUMSUB: a
// Cluster's shard channels).
func subscribersBy(t *testing.T, srv *redistest.Server, sub string) string {
	t.Helper()
	reply, err := srv.Do("PUBSUB", sub, "watched")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(reply)[1]
}

func waitSubscribers(t *testing.T, srv *redistest.Server, want string) {
	t.Helper()
	testkit.Eventually(t, "the watch's subscription", func() bool { return subscribers(t, srv) == want })
}

// TestWatchSeesARestart: the end of the server ends the watch's
// connection, once, without a call of the client's; the watch subscribes
// again once the server is back, and leaves the channel when done.
func TestWatchSeesARestart(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	ended, refused, stop := watching(t, srv, "")
	waitSubscribers(t, srv, "1")
	select {
	case err := <-ended:
		t.Fatalf("ended while the server ran: %v", err)
	default:
	}
	srv.Kill()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("an end without its cause")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's end did not end the watch")
	}
	srv.Restart()
	waitSubscribers(t, srv, "1")
	if len(ended) != 0 || len(refused) != 0 {
		t.Errorf("after one restart: %d more ends, %d refusals; want none", len(ended), len(refused))
	}
	stop()
	waitSubscribers(t, srv, "0") // the client stays open: its connection left the channel
	if len(ended) != 0 {
		t.Errorf("stopping the watch counted as an end")
	}
}

// TestWatchRefused: a user without the channel (Redis 7's default for a
// new ACL user) is refused, and told so each time, never as an end.
func TestWatchRefused(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	if _, err := srv.Do("ACL", "SETUSER", "nochan", "on", ">pass", "~*", "+@all", "resetchannels"); err != nil {
		t.Fatal(err)
	}
	ended, refused, _ := watching(t, srv, "nochan")
	for range 2 {
		select {
		case err := <-refused:
			if !strings.HasPrefix(err.Error(), "NOPERM") {
				t.Errorf("refused with %v; want NOPERM", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no refusal")
		}
	}
	if len(ended) != 0 {
		t.Errorf("%d ends of a subscription that never was", len(ended))
	}
}

// TestWatchNotInATightLoop: a subscription the server ends sooner than
// Retry after it began is not asked for again before Retry, so that a
// server (or a proxy) that ends each at once is not asked in a loop.
func TestWatchNotInATightLoop(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	ended, _, _ := watchingEvery(t, []string{srv.Addr()}, "", time.Hour)
	waitSubscribers(t, srv, "1")
	if _, err := srv.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed connection did not end the watch")
	}
	// A watch that asked again at once would be subscribed by now, and
	// would end again at the next kill.
	time.Sleep(100 * time.Millisecond)
	if n := subscribers(t, srv); n != "0" {
		t.Errorf("%s subscribers right after the end of a short subscription; want none before Retry (an hour)", n)
	}
}

// TestWatchFollowsItsSlot: on a Cluster the watch's shard subscription is
// on the master of the channel's slot; when the slot moves to another
// master, the old one unsubscribes the connection (it stays open), which
// the watch takes as an end, and it subscribes again on the new master.
func TestWatchFollowsItsSlot(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	cluster := redistest.StartCluster(t)
	ended, refused, _ := watchingEvery(t, cluster.Addrs(), "", 5*time.Millisecond)
	owner, err := cluster.NodeForKey("watched")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the watch on the slot's master", func() bool { return subscribersBy(t, owner, "SHARDNUMSUB") == "1" })
	var target *redistest.Server
	for i := range 3 {
		if n := cluster.Node(i); n != owner {
			target = n
			break
		}
	}
	slot, err := owner.Do("CLUSTER", "KEYSLOT", "watched")
	if err != nil {
		t.Fatal(err)
	}
	id, err := target.Do("CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*redistest.Server{target, owner} { // the new owner first, as redis-cli --cluster does
		if _, err := n.Do("CLUSTER", "SETSLOT", slot, "NODE", id); err != nil {
			t.Fatalf("CLUSTER SETSLOT %s NODE %s on %s: %v", slot, id, n.Addr(), err)
		}
	}
	select {
	case err := <-ended:
		t.Logf("ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the slot's move did not end the watch")
	}
	testkit.Eventually(t, "the watch on the slot's new master", func() bool { return subscribersBy(t, target, "SHARDNUMSUB") == "1" })
	if n := subscribersBy(t, owner, "SHARDNUMSUB"); n != "0" {
		t.Errorf("the old master still counts %s shard subscribers", n)
	}
	if len(refused) != 0 {
		t.Errorf("%d refusals (the first: %v); a MOVED before the client learnt the slot's move is no refusal", len(refused), <-refused)
	}
}

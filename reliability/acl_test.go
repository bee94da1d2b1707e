package reliability_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/conformance"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// limiterCommands are the commands a Limiter's Redis user needs, as
// docs/operations.md ("A Redis user for the limiter") lists them: those the
// library sends, those its scripts call, and those rueidis sends on each
// connection.
var limiterCommands = []string{
	// sent by the library and rueidis
	"evalsha", "eval", "script|load", "zrem", "subscribe", "ssubscribe", "ping", "hello", "cluster|slots",
	// called by the scripts
	"time", "get", "set", "del", "exists", "type", "hget", "hmget", "hset", "pexpire", "pttl",
	"zadd", "zcard", "zcount", "zrange", "zrangebyscore", "zrevrangebyscore", "zremrangebyscore", "zscore", "info",
}

// limiterACL is the ACL SETUSER rule of a Limiter's user whose KeyPrefix
// starts with prefix: its keys, the fleet's channel, and limiterCommands.
func limiterACL(user, pass, prefix string) []string {
	rule := []string{"ACL", "SETUSER", user, "on", ">" + pass, "resetkeys", "~" + prefix + "*", "resetchannels", "&" + prefix + "*", "-@all"}
	for _, c := range limiterCommands {
		rule = append(rule, "+"+c)
	}
	return rule
}

// TestLeastPrivilegeACL runs the behaviour suite on redis-server and on a
// Redis Cluster as a user with only limiterACL's permissions (on every
// node: a Cluster does not share its ACLs), then a fleet of two (see
// aclFleet, aclClusterFleet), and finds no command refused: Redis' ACL
// LOG, which records every refusal (a script's own calls, and the INFO
// fleet.lua makes under pcall, included), stays empty on every server.
func TestLeastPrivilegeACL(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Options{})
		client := aclUser(t, srv)
		runACL(t, "redis-acl", client)
		aclFleet(t, srv, client)
		checkACLLog(t, srv)
	})
	t.Run("cluster", func(t *testing.T) {
		cluster := redistest.StartCluster(t)
		nodes := []*redistest.Server{cluster.Node(0), cluster.Node(1), cluster.Node(2)}
		client := aclUser(t, nodes...)
		runACL(t, "cluster-acl", client)
		aclClusterFleet(t, cluster, client)
		checkACLLog(t, nodes...)
	})
}

// aclUser creates the limiter's user on each of servers, with limiterACL
// for the key prefixes of testkit.Isolated (t1:, t2:, …), and returns a
// function that makes a client of them (or of addr) as that user.
func aclUser(t *testing.T, servers ...*redistest.Server) func(testing.TB, ...string) rueidis.Client {
	t.Helper()
	const user, pass = "limiter", "limiter-pass"
	var addrs []string
	for _, srv := range servers {
		if _, err := srv.Do(limiterACL(user, pass, "t")...); err != nil {
			t.Fatalf("creating the limiter's user: %v", err)
		}
		// rueidis names itself with CLIENT SETINFO on each connection,
		// and ignores a refusal; a server before 7.2 has no such command.
		if _, err := srv.Do("ACL", "SETUSER", user, "+client|setinfo"); err != nil && !strings.Contains(err.Error(), "Unknown command") {
			t.Fatalf("granting CLIENT SETINFO: %v", err)
		}
		addrs = append(addrs, srv.Addr())
	}
	return func(t testing.TB, addr ...string) rueidis.Client {
		if len(addr) == 0 {
			addr = addrs
		}
		opt := testkit.ClientOption(addr...)
		opt.Username, opt.Password = user, pass
		opt.Dialer = net.Dialer{Timeout: time.Second}
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatalf("rueidis.NewClient as %s: %v", user, err)
		}
		t.Cleanup(c.Close)
		return c
	}
}

// runACL runs the behaviour suite on limiters of clients that client
// makes.
func runACL(t *testing.T, name string, client func(testing.TB, ...string) rueidis.Client) {
	conformance.Run(t, conformance.Backend{Name: name, New: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
		return testkit.NewLimiter(t, client(t), testkit.Isolated(opts))
	}, Two: func(t testing.TB, opts, other ratelimit.Options) (*ratelimit.Limiter, *ratelimit.Limiter) {
		opts = testkit.Isolated(opts)
		other.KeyPrefix = opts.KeyPrefix
		return testkit.NewLimiter(t, client(t), opts), testkit.NewLimiter(t, client(t), other)
	}})
}

// checkACLLog fails the test for every refusal each of servers logged.
func checkACLLog(t *testing.T, servers ...*redistest.Server) {
	t.Helper()
	for _, srv := range servers {
		log, err := srv.Do("ACL", "LOG")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(log) != "" {
			t.Errorf("%s refused commands of the limiter's user:\n%s", srv.Addr(), log)
		}
	}
}

// aclFleet runs what the behaviour suite does not, two Limiters on clients
// made by client: their heartbeats (lua/fleet.lua: the first makes the
// fleet's epoch, and reads INFO), their watches' subscriptions, decisions
// without Redis while one's connections are refused (through a proxy) and
// their write-back once they are not, and each one's withdrawal at Close.
func aclFleet(t *testing.T, srv *redistest.Server, client func(testing.TB, ...string) rueidis.Client) {
	t.Helper()
	proxy := redistest.NewProxy(t, srv.Addr())
	var logs testkit.SyncBuffer
	opts := testkit.OutageOptions(testkit.NewClock(), &logs, nil)
	opts.KeyPrefix, opts.HeartbeatInterval = "tfleet:", 50*time.Millisecond
	a := testkit.NewLimiter(t, client(t, proxy.Addr()), opts)
	b := testkit.NewLimiter(t, client(t, srv.Addr()), opts)
	testkit.Eventually(t, "both count two instances", func() bool { return a.Stats().Instances == 2 && b.Stats().Instances == 2 })
	testkit.Eventually(t, "both watches subscribed", func() bool {
		reply, err := srv.Do("PUBSUB", "NUMSUB", "tfleet:v1:{instances}")
		return err == nil && strings.Fields(reply)[1] == "2"
	})
	rule := ratelimit.Rule{Name: "acl", Limit: ratelimit.PerMinute(1000)}
	proxy.Refuse(true)
	proxy.ResetAll()
	testkit.Eventually(t, "a call allowed without Redis", func() bool { return testkit.Allow(t, a, rule, "k").Degraded })
	proxy.Refuse(false)
	testkit.Eventually(t, "back on Redis, everything written back", func() bool {
		return !testkit.Allow(t, a, rule, "k").Degraded && a.Stats().WrittenBack > 0 && a.Stats().WriteBackPending == 0
	})
	a.Close()
	b.Close()
	if n, err := srv.Do("ZCARD", "tfleet:v1:{instances}"); err != nil || n != "0" {
		t.Errorf("the instances set after both closed: %v, %v; want both withdrawn", n, err)
	}
}

// aclClusterFleet is aclFleet's fleet on a Cluster, without the outage:
// heartbeats on the master of the fleet's key, the watches' shard
// subscriptions there, and the withdrawals.
func aclClusterFleet(t *testing.T, cluster *redistest.Cluster, client func(testing.TB, ...string) rueidis.Client) {
	t.Helper()
	opts := testkit.Options(testkit.NewClock())
	opts.KeyPrefix, opts.HeartbeatInterval = "tfleet:", 50*time.Millisecond
	key := "tfleet:v1:{instances}"
	owner, err := cluster.NodeForKey(key)
	if err != nil {
		t.Fatal(err)
	}
	a := testkit.NewLimiter(t, client(t), opts)
	b := testkit.NewLimiter(t, client(t), opts)
	testkit.Eventually(t, "both count two instances", func() bool { return a.Stats().Instances == 2 && b.Stats().Instances == 2 })
	testkit.Eventually(t, "both watches subscribed on the fleet key's master", func() bool {
		reply, err := owner.Do("PUBSUB", "SHARDNUMSUB", key)
		return err == nil && strings.Fields(reply)[1] == "2"
	})
	a.Close()
	b.Close()
	if n, err := owner.Do("ZCARD", key); err != nil || n != "0" {
		t.Errorf("the instances set after both closed: %v, %v; want both withdrawn", n, err)
	}
}

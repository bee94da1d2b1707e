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

// TestLeastPrivilegeACL runs the behaviour suite on redis-server as a user
// with only limiterACL's permissions, then a fleet of two (see aclFleet),
// and finds no command refused: Redis' ACL LOG, which records every
// refusal (a script's own calls, and the INFO fleet.lua makes under pcall,
// included), stays empty.
func TestLeastPrivilegeACL(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	srv := redistest.Start(t, redistest.Options{})
	const user, pass = "limiter", "limiter-pass"
	if _, err := srv.Do(limiterACL(user, pass, "t")...); err != nil { // testkit.Isolated's prefixes: t1:, t2:, …
		t.Fatalf("creating the limiter's user: %v", err)
	}
	// rueidis names itself with CLIENT SETINFO on each connection, and
	// ignores a refusal; a server before 7.2 has no such command.
	if _, err := srv.Do("ACL", "SETUSER", user, "+client|setinfo"); err != nil && !strings.Contains(err.Error(), "Unknown command") {
		t.Fatalf("granting CLIENT SETINFO: %v", err)
	}
	client := func(t testing.TB, addr ...string) rueidis.Client {
		if len(addr) == 0 {
			addr = []string{srv.Addr()}
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
	conformance.Run(t, conformance.Backend{Name: "redis-acl", New: func(t testing.TB, opts ratelimit.Options) *ratelimit.Limiter {
		return testkit.NewLimiter(t, client(t), testkit.Isolated(opts))
	}, Two: func(t testing.TB, opts, other ratelimit.Options) (*ratelimit.Limiter, *ratelimit.Limiter) {
		opts = testkit.Isolated(opts)
		other.KeyPrefix = opts.KeyPrefix
		return testkit.NewLimiter(t, client(t), opts), testkit.NewLimiter(t, client(t), other)
	}})
	aclFleet(t, srv, client)
	log, err := srv.Do("ACL", "LOG")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(log) != "" {
		t.Errorf("Redis refused commands of the limiter's user:\n%s", log)
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

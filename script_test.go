package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/script"
	"github.com/redis/rueidis"
)

// scriptTestClient returns a client of the servers at addrs, closed at
// cleanup, wrapped as a Limiter wraps its client.
func scriptTestClient(t *testing.T, addrs ...string) *script.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis.NewClient(%v): %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return &script.Client{Client: c}
}

// countingClient counts the commands sent through it.
type countingClient struct {
	rueidis.Client
	sent int
}

func (c *countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.sent++
	return c.Client.Do(ctx, cmd)
}

// fleetBeat runs the heartbeat's script (fleet.lua, which adds state and reads
// Redis' TIME) once and returns the live count it answers.
func fleetBeat(t *testing.T, c rueidis.Client, id string) int64 {
	t.Helper()
	reply, err := fleetScript.Exec(context.Background(), c, []string{"s:v1:{instances}", "s:v1:{instances}:born", "s:v1:{instances}:owing", "s:v1:{instances}:epoch", "s:v1:{instances}:lost"}, []string{id, "1000000", "0", "0"}).AsIntSlice()
	if err != nil || len(reply) != 6 {
		t.Fatalf("fleet.lua: %v, %v", reply, err)
	}
	return reply[0]
}

// TestScriptFirstLine: scripts are sent with their first line ("#!lua")
// to a server that takes it (redis-server 7, a Cluster of them), and to one
// that rejects it as a syntax error (miniredis, Redis before 7) without it,
// after one refusal per client: from then on a call costs one command, as
// before.
func TestScriptFirstLine(t *testing.T) {
	mr := miniredis.RunT(t)
	counted := &countingClient{Client: scriptTestClient(t, mr.Addr()).Client}
	c := &script.Client{Client: counted}
	if n := fleetBeat(t, c, "a"); n != 1 {
		t.Fatalf("first heartbeat on miniredis counted %d; want 1", n)
	}
	if !c.PlainOnly.Load() {
		t.Fatal("miniredis took a script's first line; want it rejected, and the client to send scripts without it")
	}
	before := counted.sent
	if n := fleetBeat(t, c, "b"); n != 2 {
		t.Fatalf("second heartbeat on miniredis counted %d; want 2", n)
	}
	if got := counted.sent - before; got != 1 {
		t.Errorf("a script call after the first cost %d commands; want 1 (EVALSHA)", got)
	}
	// A client that is not wrapped learns nothing, and still works.
	plain, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if n := fleetBeat(t, plain, "c"); n != 3 {
		t.Fatalf("heartbeat through an unwrapped client counted %d; want 3", n)
	}

	if testing.Short() {
		t.Skip("-short: no redis-server is started")
	}
	srv := redistest.Start(t, redistest.Options{})
	c = scriptTestClient(t, srv.Addr())
	if n := fleetBeat(t, c, "a"); n != 1 || c.PlainOnly.Load() {
		t.Errorf("redis-server: heartbeat counted %d, first line rejected: %v; want 1, taken", n, c.PlainOnly.Load())
	}
	cl := redistest.StartCluster(t)
	c = scriptTestClient(t, cl.Addrs()...)
	if n := fleetBeat(t, c, "a"); n != 1 || c.PlainOnly.Load() {
		t.Errorf("cluster: heartbeat counted %d, first line rejected: %v; want 1, taken", n, c.PlainOnly.Load())
	}
}

// TestScriptsAtMaxmemory: on a redis-server out of memory (maxmemory
// reached, noeviction) Redis refuses a script that adds state before it
// runs, even one whose first write removes (fleet.lua trims first), and
// runs undo.lua, which only removes, for every kind of state.
func TestScriptsAtMaxmemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no redis-server is started")
	}
	srv := redistest.Start(t, redistest.Options{Args: []string{"--maxmemory-policy", "noeviction"}})
	c := scriptTestClient(t, srv.Addr())
	ctx := context.Background()
	do := func(args ...string) rueidis.RedisResult {
		return c.Do(ctx, c.B().Arbitrary(args...).Build())
	}
	const (
		log     = "s:v1:{1:r:=k}:l"
		counter = "s:v1:{1:r:=k}:c"
		bucket  = "s:v1:{1:r:=k}:g"
		quota   = "s:v1:{1:r:=k}:q"
	)
	for _, cmd := range [][]string{
		{"ZADD", log, "1", "m1", "2", "m2"},
		{"HSET", counter, "w", "41", "c", "5", "p", "1"},
		{"SET", bucket, "5000 0 4900 0 0 0|m1 4900 0 0 0 1"}, // the reservation m1 took its last token
		{"SET", quota, "1000 4"},
	} {
		if err := do(cmd...).Error(); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
	}
	// Any write that grows Redis is now refused: it uses more than a byte.
	if err := do("CONFIG", "SET", "maxmemory", "1").Error(); err != nil {
		t.Fatal(err)
	}
	if err := do("SET", "one-more", "x").Error(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("SET at maxmemory: %v; want refused with OOM", err)
	}

	err := fleetScript.Exec(ctx, c, []string{"s:v1:{instances}", "s:v1:{instances}:born", "s:v1:{instances}:owing", "s:v1:{instances}:epoch", "s:v1:{instances}:lost"}, []string{"a", "1000000", "0", "0"}).Error()
	if re, ok := rueidis.IsRedisErr(err); !ok || !strings.HasPrefix(re.Error(), "OOM") {
		t.Errorf("fleet.lua at maxmemory: %v; want refused with OOM", err)
	}
	if n, _ := do("EXISTS", "s:v1:{instances}").AsInt64(); n != 0 {
		t.Error("fleet.lua wrote at maxmemory")
	}

	for _, u := range []struct {
		key  string
		kind *algorithm
		args []string
		want string // the state left, by GET, HGET c or ZCARD
	}{
		{log, algSliding, []string{"m1", "1"}, "1"},
		{counter, algCounter, []string{"", "2", "41"}, "3"},
		{bucket, algGCRA, []string{"m1", "1", "100", "1"}, "4900 g5000"}, // one event costs 100 µs; marked as moved back from 5000 (see lua/gcra.lua)
		{quota, algQuota, []string{"", "1", "1000"}, "1000 3 g"},         // marked as given back (see lua/decide.lua)
	} {
		back, err := u.kind.redis.scripts().undo.Exec(ctx, c, []string{u.key}, u.args).AsInt64()
		if err != nil || back == 0 {
			t.Errorf("undo.lua %q at maxmemory = %d, %v; want events taken back", u.args, back, err)
			continue
		}
		var got string
		switch u.kind.redis.letter() {
		case 'l':
			n, _ := do("ZCARD", u.key).AsInt64()
			got = strconv.FormatInt(n, 10)
		case 'c':
			got, _ = do("HGET", u.key, "c").ToString()
		default:
			got, _ = do("GET", u.key).ToString()
		}
		if got != u.want {
			t.Errorf("after undo.lua %q at maxmemory the state is %q; want %q", u.args, got, u.want)
		}
	}
	if c.PlainOnly.Load() {
		t.Error("redis-server rejected a script's first line")
	}
}

package main

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// naiveScript is the sliding log most ports of the classic Redis recipe
// run: trim what left the window, count what is left, record the event if
// it fits, keep the key a window. The client passes the time.
//
// KEYS[1] the log; ARGV now (µs), window (µs), rate, a unique member.
var naiveScript = rueidis.NewLuaScript(`
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return 1
end
return 0`)

// cheapestScript is the cheapest exact sliding log: count the live
// events by score, record the event if it fits, keep the key a window. It
// never trims (the key's expiry does) and answers allowed or not; the
// overload issue asks for it beside any target out of reach.
var cheapestScript = rueidis.NewLuaScript(`
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('ZCOUNT', KEYS[1], string.format('(%d', now - window), '+inf') < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return 1
end
return 0`)

// naive is naiveScript (or cheapestScript) through the same kind of client as ours: the
// sliding log without anything this project adds (penalties, exact
// Result fields, a fallback, a clock of the caller's).
type naive struct {
	script *rueidis.Lua
	c      rueidis.Client
	prefix string
	window string
	rate   string
	id     string
	seq    atomic.Uint64
}

func (n *naive) Allow(ctx context.Context, key string) (bool, error) {
	now := strconv.FormatInt(time.Now().UnixMicro(), 10)
	member := n.id + strconv.FormatUint(n.seq.Add(1), 36)
	v, err := n.script.Exec(ctx, n.c, []string{n.prefix + key}, []string{now, n.window, n.rate, member}).AsInt64()
	return v == 1, err
}

var (
	naiveContender    = contender{name: "naive sliding log", remote: true, open: openScript(naiveScript, "naive:")}
	cheapestContender = contender{name: "cheapest exact log", remote: true, open: openScript(cheapestScript, "cheapest:")}
)

// openScript opens a contender that runs script through rueidis.
func openScript(script *rueidis.Lua, prefix string) func(addr string, s spec) (limiter, func(), error) {
	return func(addr string, s spec) (limiter, func(), error) {
		c, err := rueidisClient(addr)
		if err != nil {
			return nil, nil, err
		}
		n := &naive{
			script: script, c: c, prefix: prefix + s.name + ":",
			window: strconv.FormatInt(s.window.Microseconds(), 10),
			rate:   strconv.Itoa(s.rate),
			id:     strconv.FormatInt(time.Now().UnixNano(), 36) + "-",
		}
		return n, c.Close, nil
	}
}

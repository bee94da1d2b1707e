package main

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"
)

// cheapestGCRAScript is the cheapest GCRA there is with Redis' clock: read
// TIME, GET the theoretical arrival time (µs), allow if the bucket has room,
// SET it with an expiry. It answers allowed or not and nothing else; case G
// runs it beside our GCRA rule so that a target against the floor can be
// judged against what any GCRA script reaches on the same machine.
//
// KEYS[1] the TAT; ARGV the emission interval (µs), the burst.
var cheapestGCRAScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
local T, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
tat = math.max(tat, now) + T
if tat - now > burst * T then
  return 0
end
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
return 1`)

// cheapestGCRA runs cheapestGCRAScript through the same kind of client as
// ours.
type cheapestGCRA struct {
	c      rueidis.Client
	prefix string
	args   []string
}

func (g *cheapestGCRA) Allow(ctx context.Context, key string) (bool, error) {
	v, err := cheapestGCRAScript.Exec(ctx, g.c, []string{g.prefix + key}, g.args).AsInt64()
	return v == 1, err
}

var cheapestGCRAContender = contender{
	name:   "cheapest GCRA script",
	remote: true,
	open: func(addr string, s spec) (limiter, func(), error) {
		c, err := rueidisClient(addr)
		if err != nil {
			return nil, nil, err
		}
		emission := max(s.window.Microseconds()/int64(s.rate), 1)
		g := &cheapestGCRA{c: c, prefix: "gcra:" + s.name + ":",
			args: []string{strconv.FormatInt(emission, 10), strconv.Itoa(s.rate)}}
		return g, c.Close, nil
	},
}

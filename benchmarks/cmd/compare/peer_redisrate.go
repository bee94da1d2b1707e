package main

import (
	"context"

	"github.com/go-redis/redis_rate/v10"
)

// redisRate is github.com/go-redis/redis_rate/v10: GCRA (a leaky bucket) in
// one Lua script over go-redis. Burst = Rate lets a whole window's worth
// through at once, as a sliding log does; after that it spaces events
// Window/Rate apart instead of waiting for the oldest to leave.
type redisRate struct {
	l     *redis_rate.Limiter
	limit redis_rate.Limit
	// prefix keeps cases apart; redis_rate adds its own "rate:" in front.
	prefix string
}

func (r *redisRate) Allow(ctx context.Context, key string) (bool, error) {
	res, err := r.l.Allow(ctx, r.prefix+key, r.limit)
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

var redisRateContender = contender{
	name:   "redis_rate/v10",
	remote: true,
	open: func(addr string, s spec) (limiter, func(), error) {
		c := goRedisClient(addr)
		limit := redis_rate.Limit{Rate: s.rate, Burst: s.rate, Period: s.window}
		return &redisRate{l: redis_rate.NewLimiter(c), limit: limit, prefix: s.name + ":"}, func() { c.Close() }, nil
	},
}

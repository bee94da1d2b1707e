package main

import (
	"context"

	ulimiter "github.com/ulule/limiter/v3"
	redisstore "github.com/ulule/limiter/v3/drivers/store/redis"
)

// ulule is github.com/ulule/limiter/v3 with its Redis store over go-redis:
// a fixed-window counter (INCRBY + PEXPIRE in one script), which lets up to
// twice the rate through across a window boundary.
type ulule struct {
	l *ulimiter.Limiter
}

func (u *ulule) Allow(ctx context.Context, key string) (bool, error) {
	c, err := u.l.Get(ctx, key)
	if err != nil {
		return false, err
	}
	return !c.Reached, nil
}

var ululeContender = contender{
	name:   "ulule/limiter/v3",
	remote: true,
	open: func(addr string, s spec) (limiter, func(), error) {
		c := goRedisClient(addr)
		store, err := redisstore.NewStoreWithOptions(c, ulimiter.StoreOptions{Prefix: "limiter:" + s.name})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		l := ulimiter.New(store, ulimiter.Rate{Period: s.window, Limit: int64(s.rate)})
		return &ulule{l: l}, func() { c.Close() }, nil
	},
}

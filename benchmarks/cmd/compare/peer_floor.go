package main

import (
	"context"

	"github.com/redis/rueidis"
)

// floorScript is the cheapest Redis-side decision there is: an EVALSHA
// that does nothing. No limiter that runs one script per call can beat it.
var floorScript = rueidis.NewLuaScript("return 1")

// floor sends floorScript with the key as KEYS[1], through the same kind of
// client as ours.
type floor struct {
	c rueidis.Client
}

func (f *floor) Allow(ctx context.Context, key string) (bool, error) {
	err := floorScript.Exec(ctx, f.c, []string{key}, nil).Error()
	return err == nil, err
}

var floorContender = contender{
	name:   "floor (EVALSHA return 1)",
	remote: true,
	open: func(addr string, _ spec) (limiter, func(), error) {
		c, err := rueidisClient(addr)
		if err != nil {
			return nil, nil, err
		}
		return &floor{c: c}, c.Close, nil
	},
}

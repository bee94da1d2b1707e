package main

import (
	"context"
	"sync"

	"golang.org/x/time/rate"
)

// xTimeRate is golang.org/x/time/rate, one token bucket per key in a
// sync.Map: refilled at Rate/Window per second, Burst = Rate. Keys are
// never forgotten.
type xTimeRate struct {
	m     sync.Map // key → *rate.Limiter
	limit rate.Limit
	burst int
}

func (x *xTimeRate) Allow(_ context.Context, key string) (bool, error) {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(x.limit, x.burst))
	}
	return v.(*rate.Limiter).Allow(), nil
}

func newXTimeRate(s spec) *xTimeRate {
	return &xTimeRate{limit: rate.Limit(float64(s.rate) / s.window.Seconds()), burst: s.rate}
}

var xTimeRateContender = contender{
	name: "x/time/rate + sync.Map",
	open: func(_ string, s spec) (limiter, func(), error) {
		return newXTimeRate(s), func() {}, nil
	},
}

package main

import (
	"context"

	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
)

// sethvargo is github.com/sethvargo/go-limiter's memory store: a token
// bucket per key (Tokens per Interval) in a map under one RWMutex, swept by
// a background goroutine.
type sethvargo struct {
	s golimiter.Store
}

func (s *sethvargo) Allow(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := s.s.Take(ctx, key)
	return ok, err
}

func openSethvargo(_ string, s spec) (limiter, func(), error) {
	st, err := memorystore.New(&memorystore.Config{Tokens: uint64(s.rate), Interval: s.window})
	if err != nil {
		return nil, nil, err
	}
	return &sethvargo{s: st}, func() { st.Close(context.Background()) }, nil
}

var sethvargoContender = contender{name: "sethvargo/go-limiter (memory)", open: openSethvargo}

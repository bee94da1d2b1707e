package main

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// naiveLogCapacity is the number of keys the naive exact log keeps.
const naiveLogCapacity = 65_536

// naiveLog is the in-process exact sliding log at its plainest: one
// sync.Mutex over a golang-lru simplelru.LRU of timestamp rings (capacity
// 65,536 keys), time.Now per call. A call drops the timestamps at or before
// now - window from the head of the key's ring, rejects when the ring holds
// rate of them, and appends now otherwise.
type naiveLog struct {
	mu     sync.Mutex
	lru    *simplelru.LRU[string, *ring]
	rate   int
	window int64 // ns
}

// ring is a growable circular buffer of timestamps (ns), oldest at head;
// it doubles when full.
type ring struct {
	ts   []int64
	head int
	n    int
}

func (r *ring) push(t int64) {
	if r.n == len(r.ts) {
		grown := make([]int64, max(4, 2*len(r.ts)))
		for i := range r.n {
			grown[i] = r.ts[(r.head+i)%len(r.ts)]
		}
		r.ts, r.head = grown, 0
	}
	r.ts[(r.head+r.n)%len(r.ts)] = t
	r.n++
}

func (l *naiveLog) Allow(_ context.Context, key string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UnixNano()
	r, ok := l.lru.Get(key)
	if !ok {
		r = &ring{}
		l.lru.Add(key, r)
	}
	cut := now - l.window
	for r.n > 0 && r.ts[r.head] <= cut {
		r.head++
		if r.head == len(r.ts) {
			r.head = 0
		}
		r.n--
	}
	if r.n >= l.rate {
		return false, nil
	}
	r.push(now)
	return true, nil
}

var naiveLogContender = contender{
	name: "naive exact log (simplelru, one mutex)",
	open: func(_ string, s spec) (limiter, func(), error) {
		lru, err := simplelru.NewLRU[string, *ring](naiveLogCapacity, nil)
		if err != nil {
			return nil, nil, err
		}
		return &naiveLog{lru: lru, rate: s.rate, window: s.window.Nanoseconds()}, func() {}, nil
	},
}

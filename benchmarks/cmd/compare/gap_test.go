package main

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLocalGap measures ours and the naive exact log (case D's
// contenders) in one loop each, from one goroutine, where a profile can
// tell their costs apart (see BENCHMARKS.md, "What stands between the local
// path and its targets"): on one key, whose log stays in cache, the gap is
// what each call does beside the log; on 10,000 keys it adds what their
// logs cost in memory. The window is a millisecond, so that one key's log
// holds a millisecond of calls, and the rate, 10^9, never rejects.
func BenchmarkLocalGap(b *testing.B) {
	s := spec{name: "gap", rate: 1_000_000_000, window: time.Millisecond}
	for _, n := range []int{1, numKeys} {
		for _, c := range []contender{oursLocal, naiveLogContender} {
			b.Run(c.name+"/keys="+strconv.Itoa(n), func(b *testing.B) {
				l, closeFn, err := c.open("", s)
				if err != nil {
					b.Fatal(err)
				}
				defer closeFn()
				ctx, keys := context.Background(), manyKeys[:n]
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					if ok, err := l.Allow(ctx, keys[i%len(keys)]); !ok || err != nil {
						b.Fatalf("call %d: allowed %v, err %v", i, ok, err)
					}
				}
			})
		}
	}
}

// BenchmarkLocalHot measures case I's contenders (one hot key, mostly
// allowed) from g goroutines sharing b.N calls, where a profile can see
// what contention costs each of them.
func BenchmarkLocalHot(b *testing.B) {
	s := spec{name: "i", rate: 1_000_000, window: hotWindow}
	for _, g := range []int{1, 16, 256} {
		for _, c := range []contender{oursLocal, naiveLogContender, oursGCRALocal, sethvargoContender} {
			b.Run(c.name+"/g="+strconv.Itoa(g), func(b *testing.B) {
				l, closeFn, err := c.open("", s)
				if err != nil {
					b.Fatal(err)
				}
				defer closeFn()
				ctx := context.Background()
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				for range g {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, err := l.Allow(ctx, "hot"); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

package main

import (
	"context"
	"strconv"
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

package ratelimit

import (
	"context"
	"testing"
	"time"
)

// TestGrantEndsByItsScriptsTime: with Options.Clock the grant script
// decides at the time the Limiter sends it (ARGV[1], the call's time), and
// the grant's slots are usable until that time plus Prefetch, not the
// clock's reading when the request left, which a call that waited for
// another's request (up to Options.Timeout) reads later: a slot used after
// its stamp (a log's) or its events' time (a bucket's) leaves the rule's
// bound. Same environment as writeback_test.go: miniredis, a fake clock.
func TestGrantEndsByItsScriptsTime(t *testing.T) {
	for _, r := range []Rule{
		{Name: "log", Limit: Limit{Rate: 100, Window: time.Second}, Prefetch: 20 * time.Millisecond},
		{Name: "bucket", Kind: GCRA, Limit: Limit{Rate: 100, Window: time.Second}, Prefetch: 20 * time.Millisecond},
	} {
		t.Run(r.Name, func(t *testing.T) {
			e := newWBEnv(t, Options{})
			p, err := r.compile()
			if err != nil {
				t.Fatal(err)
			}
			k, _ := localKey(r.Name, "k")
			l := e.l
			g := l.pairOf(k, &p)
			// The call's time; the request leaves 5ms later.
			now := e.clk.Now().UnixMicro()
			e.clk.advance(5 * time.Millisecond)
			g.mu.Lock()
			g.asking = make(chan struct{})
			g.mu.Unlock()
			l.askFor(context.Background(), l.conn.Load(), g, &p, k, 3, 0, now, nil)
			g.mu.Lock()
			defer g.mu.Unlock()
			if s, _ := g.Live(); s.N == 0 {
				t.Fatal("no grant")
			}
			if end, until := now+p.prefetch, g.Until(); until > end {
				t.Errorf("the grant made at %dµs is usable until %dµs, %v past its time plus Prefetch", now, until, time.Duration(until-end)*time.Microsecond)
			}
		})
	}
}

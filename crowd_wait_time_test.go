package ratelimit

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestCallHeldAtTheTimeItGoesOnAfterWaiting: without Options.Clock the
// script decides at Redis' TIME, when the call arrives, so a call that
// waited for its crowd's seat must hold the process' own count at the
// time it goes on, not at its first reading of the clock (see
// Limiter.afterWaiting), through Allow and through AllowGroup. Here the
// call on its way took a GCRA bucket's one token and the call waits while
// the token comes back: held at its first reading, the own count was
// still full, the call was sent held back, and Redis rejected it on held
// a key with room. AllowGroup did so before; TestHotKeyCrowd saw it as
// tens of probes a second at a GCRA bucket, each rejected.
func TestCallHeldAtTheTimeItGoesOnAfterWaiting(t *testing.T) {
	const emission = 200 * time.Millisecond
	rule := Rule{Name: "hot", Kind: GCRA, Limit: Limit{Rate: 1, Window: emission, Burst: 1}}
	for _, c := range pairWays(rule) {
		t.Run(c.name, func(t *testing.T) {
			// Without Options.Clock, miniredis' TIME is the process' clock.
			// Timeout 2s: the call waits up to 1s for a seat.
			l, err := New(miniClient(t, miniredis.RunT(t)), Options{Timeout: 2 * time.Second, HeartbeatInterval: -1, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			// A call of the pair is on its way with the crowd's one seat,
			// the bucket's token reserved in the process' own count.
			p, sh, _, cw := crowdOnItsWay(t, l, rule, c, 1)
			took := l.localNow()
			lg := leg{k: &c.k, p: &p, n: 1}
			hd, _ := l.local.hold(&lg, took)
			if !hd.reserved {
				t.Fatalf("the call on its way was not reserved: %+v", hd)
			}
			hd.seated = true

			done := c.inBackground(l)
			// The call queues for the seat: with the seat stood up for a
			// moment, the crowd is full only when a call waits.
			waitUntil(t, sh, done, "the call on its way landed", func() bool {
				cw.Stand()
				defer cw.Sit()
				return cw.Full()
			})
			// The token is back, by the process' clock and by Redis', by
			// the time the call on its way lands: Redis allowed it (not
			// in Redis here, which holds nothing), leaving the bucket full
			// as of its time.
			time.Sleep(time.Until(time.UnixMicro(took).Add(emission + emission/4)))
			d := decision{allowed: true, count: 1, reset: int64(emission / time.Microsecond)}
			l.local.record(c.k, &p, took, l.localNow(), 1, false, &d, &hd, 0)

			a := <-done
			if a.err != nil || len(a.rs) == 0 {
				t.Fatalf("after the landing: %+v, %v", a.rs, a.err)
			}
			for i, r := range a.rs {
				if !r.Allowed || r.Degraded {
					t.Errorf("Result %d = %+v, want allowed on Redis: the token was back when the call went on", i, r)
				}
			}
		})
	}
}

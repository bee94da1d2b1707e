package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
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
	roomy := Rule{Name: "roomy", Limit: PerMinute(1000)}
	for _, c := range []struct {
		name string
		k    lkey
		ask  func(*Limiter) ([]Result, error)
	}{
		{"Allow", lkey{Rule: rule.Name, Key: "k"}, func(l *Limiter) ([]Result, error) {
			r, err := l.Allow(context.Background(), rule, "k")
			return []Result{r}, err
		}},
		{"AllowGroup", lkey{Rule: rule.Name, Key: "k", Group: "g"}, func(l *Limiter) ([]Result, error) {
			return l.AllowGroup(context.Background(), "g", []Check{{Rule: rule, Key: "k"}, {Rule: roomy, Key: "k"}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mr := miniredis.RunT(t) // its TIME is the process' clock
			client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			// Timeout 2s: the call waits up to 1s for a seat.
			l, err := New(client, Options{Timeout: 2 * time.Second, HeartbeatInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()

			// A call of the pair is on its way with the crowd's one seat,
			// the bucket's token reserved in the process' own count.
			p, err := rule.compile()
			if err != nil {
				t.Fatal(err)
			}
			sh, h := l.local.atPlan(&c.k, &p)
			sh.mu.Lock()
			cw := sh.gather(&c.k, h)
			cw.Sit()
			sh.mu.Unlock()
			took := l.localNow()
			lg := leg{k: &c.k, p: &p, n: 1}
			hd, _ := l.local.hold(&lg, took)
			if !hd.reserved {
				t.Fatalf("the call on its way was not reserved: %+v", hd)
			}
			hd.seated = true

			type answer struct {
				rs  []Result
				err error
			}
			done := make(chan answer, 1)
			go func() {
				rs, err := c.ask(l)
				done <- answer{rs, err}
			}()
			// The call queues for the seat: with the seat stood up for a
			// moment, the crowd is full only when a call waits.
			queued := func() bool {
				sh.mu.Lock()
				defer sh.mu.Unlock()
				cw.Stand()
				defer cw.Sit()
				return cw.Full()
			}
			for !queued() {
				select {
				case a := <-done:
					t.Fatalf("decided before the call on its way landed: %+v, %v", a.rs, a.err)
				case <-time.After(time.Millisecond):
				}
			}
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

package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/httplimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
	"github.com/redis/rueidis"
)

// TestTwoShopsAcrossRedisRestart is issue #27's two demo shops on one
// redis-server, each `-serve` with default Options under `hey -c 50` on the
// flash sale (100 orders in any 10 seconds, for both shops together);
// Redis is killed at 3s and restarted a window later, as the orders of the
// outage's first second leave the window (it lost its data). The issue's
// run accepted 150 and 149 orders in one 10-second window that began after
// the outage did: each shop decided on Redis before the other's orders
// made without it were written back, and Redis had lost the orders made on
// it before the kill.
//
// Each shop's share during the outage is 50 (two instances). The orders
// accepted whose whole request and response fall inside one interval
// shorter than the window are at most:
//   - in an interval that holds the kill: for each shop, what it had
//     accepted in it before the kill, or its share, whichever is more;
//   - in any other interval: the two shares, 100.
//
// One more case is documented (docs/fallback.md, "The bounds"): while one
// shop alone decides without Redis, the other, which still decides on it,
// counts that shop's share only from the heartbeat that says it owes, so
// up to Rate + share may pass meanwhile. On a loaded machine this happens
// with Redis up: a shop's calls time out and its breaker opens, or its
// calls are shed by admission control, and it allows its share without
// Redis. Such an allowed order (a lapse) raises the bound of every
// interval that holds it by that shop's share; on a quiet machine there is
// none, and the bounds above are checked as they stand.
//
// From one window after Redis came back on, each whole window accepts at
// least 90 (the shops' demand exceeds the sale).
func TestTwoShopsAcrossRedisRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two shops for 35 seconds")
	}
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server")
	}
	redis := redistest.Start(t, redistest.Options{})
	const shops, conns = 2, 50
	var urls []string
	var lims []*ratelimit.Limiter
	var paths shopPaths
	for shop := range shops {
		lim, err := ratelimit.Dial(rueidis.ClientOption{InitAddress: []string{redis.Addr()}},
			ratelimit.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnDecision: paths.hook(shop)})
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		lims = append(lims, lim)
		srv := httptest.NewServer(newShop(lim, httplimit.IPOptions{}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	// The first shop counts the second at its next heartbeat (5 s).
	for _, lim := range lims {
		testkit.Eventually(t, "each shop counts both", func() bool { return lim.Stats().Instances == shops })
	}

	var crowd orderCrowd
	stop := make(chan struct{})
	for shop, url := range urls {
		crowd.order(t, shop, url, conns, stop)
	}
	window := flashSaleRule.Limit.Window
	time.Sleep(3 * time.Second)
	killFrom := time.Now()
	redis.Kill()
	killIn := time.Now()
	time.Sleep(window) // the first orders leave the window as Redis comes back
	redis.Restart()
	back := time.Now()
	time.Sleep(2*window + time.Second)
	close(stop)
	crowd.wg.Wait()
	t.Logf("statuses %v", crowd.statuses)
	crowd.checkStatuses(t)
	accepted := crowd.accepted

	rate := int(flashSaleRule.Limit.Rate)
	share := (rate + shops - 1) / shops
	w := window - time.Microsecond
	lapses := paths.lapses(killFrom, back)
	for shop, at := range lapses {
		if len(at) > 0 {
			t.Logf("shop %d allowed %d orders without Redis while Redis was up (from +%v): its calls were shed or timed out",
				shop, len(at), at[0].Sub(killFrom.Add(-3*time.Second)).Round(time.Millisecond))
		}
	}
	for i, first := range accepted {
		from, to := first.span.Start, first.span.Start.Add(w)
		n := 0
		for _, o := range accepted {
			if !o.span.Start.Before(from) && o.span.End.Before(to) {
				n++
			}
		}
		bound := shops * share
		if !killIn.Before(from) && killFrom.Before(to) {
			// The interval may hold the kill: each shop's own orders
			// before it, or its share.
			own := make([]int, shops)
			for _, o := range accepted {
				if !o.span.Start.After(killIn) && o.span.End.After(killFrom.Add(-w)) {
					own[o.shop]++
				}
			}
			bound = 0
			for _, o := range own {
				bound += max(o, share)
			}
		}
		for _, at := range lapses {
			if lapsedIn(at, from, to) {
				bound += share
			}
		}
		if n > bound {
			t.Fatalf("%d orders accepted inside one window from +%v (the kill at +%v, Redis back at +%v), more than %d (interval %d)",
				n, from.Sub(killFrom.Add(-3*time.Second)).Round(time.Millisecond), 3*time.Second, back.Sub(killFrom.Add(-3*time.Second)).Round(time.Millisecond), bound, i)
		}
	}
	for a := back.Add(window); !a.Add(window).After(back.Add(2*window + time.Second)); a = a.Add(window) {
		n := 0
		for _, o := range accepted {
			if !o.span.End.Before(a) && o.span.End.Before(a.Add(window)) {
				n++
			}
		}
		t.Logf("the window %v after Redis came back accepted %d", a.Sub(back).Round(time.Millisecond), n)
		if 10*n < 9*rate {
			t.Errorf("the window %v after Redis came back accepted %d, under 0.9 × %d", a.Sub(back).Round(time.Millisecond), n, rate)
		}
	}
}

// shopPaths records where each shop allowed its flash-sale orders, and when.
type shopPaths struct {
	mu        sync.Mutex
	decisions []shopDecision
}

// shopDecision is one flash-sale order a shop allowed: when the decision
// was reported and where it was made.
type shopDecision struct {
	shop int
	at   time.Time
	path ratelimit.Path
}

// hook is the shop's Options.OnDecision.
func (p *shopPaths) hook(shop int) func(ratelimit.Decision) {
	return func(d ratelimit.Decision) {
		if d.Rule.Name != flashSaleRule.Name || d.Err != nil || !d.Result.Allowed {
			return
		}
		p.mu.Lock()
		p.decisions = append(p.decisions, shopDecision{shop: shop, at: time.Now(), path: d.Path})
		p.mu.Unlock()
	}
}

// lapses returns, per shop, the times of the orders it allowed without
// Redis while Redis was up: before the kill at killFrom, or after the
// shop's first decision on Redis once Redis was back at back.
func (p *shopPaths) lapses(killFrom, back time.Time) map[int][]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	sort.Slice(p.decisions, func(i, j int) bool { return p.decisions[i].at.Before(p.decisions[j].at) })
	recovered := map[int]bool{}
	lapses := map[int][]time.Time{}
	for _, d := range p.decisions {
		switch {
		case d.path == ratelimit.PathRedis && d.at.After(back):
			recovered[d.shop] = true
		case (d.path == ratelimit.PathLocal || d.path == ratelimit.PathShed) && (d.at.Before(killFrom) || recovered[d.shop]):
			lapses[d.shop] = append(lapses[d.shop], d.at)
		}
	}
	return lapses
}

// lapsedIn says whether a time of at (sorted) falls in [from, to).
func lapsedIn(at []time.Time, from, to time.Time) bool {
	i := sort.Search(len(at), func(i int) bool { return !at[i].Before(from) })
	return i < len(at) && at[i].Before(to)
}

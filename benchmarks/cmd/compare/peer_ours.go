package main

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/redis/rueidis"
)

// ours is github.com/ratelimit-go/ratelimit: an exact sliding log (or, for
// a GCRA spec, a token bucket), in Redis through rueidis or, without a
// client, in process.
type ours struct {
	l        *ratelimit.Limiter
	rule     ratelimit.Rule
	degraded atomic.Int64
}

func (o *ours) Allow(ctx context.Context, key string) (bool, error) {
	r, err := o.l.Allow(ctx, o.rule, key)
	if r.Degraded {
		o.degraded.Add(1)
	}
	return r.Allowed, err
}

func (o *ours) Degraded() int64 { return o.degraded.Load() }

// ourRule is the Rule of spec s; a penalty rule warns from 3 violations and
// bans at 10 for a minute (a mostly-allowed case never violates); a GCRA
// rule takes Burst = Rate, as redis_rate's contender does.
func ourRule(s spec) ratelimit.Rule {
	r := ratelimit.Rule{Name: s.name, Kind: s.kind, Limit: ratelimit.Limit{Rate: s.rate, Window: s.window}}
	if s.kind == ratelimit.GCRA {
		r.Limit.Burst = s.rate
	}
	if s.penalty {
		r.Penalty = &ratelimit.Penalty{WarnAfter: 3, BanAfter: 10, BanFor: time.Minute}
	}
	r.Prefetch = s.prefetch
	return r
}

// ourOptions are the default Options, with the log discarded.
func ourOptions() ratelimit.Options {
	return ratelimit.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func openOurs(addr string, s spec) (limiter, func(), error) {
	var c rueidis.Client
	if addr != "" {
		var err error
		if c, err = rueidisClient(addr); err != nil {
			return nil, nil, err
		}
	}
	l, err := ratelimit.New(c, ourOptions())
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, nil, err
	}
	closeAll := func() {
		l.Close()
		if c != nil {
			c.Close()
		}
	}
	return &ours{l: l, rule: ourRule(s)}, closeAll, nil
}

var (
	oursRemote = contender{name: "ratelimit", remote: true, open: openOurs}
	oursLocal  = contender{name: "ratelimit (local only)", open: openOurs}
	// oursPenalty is ours under the same spec with a Penalty added.
	oursPenalty = contender{name: "ratelimit + penalty", remote: true,
		open: func(addr string, s spec) (limiter, func(), error) {
			s.penalty = true
			return openOurs(addr, s)
		}}
	// oursPrefetch is ours under the same spec with Prefetch 20ms (see
	// Rule.Prefetch).
	oursPrefetch = oursAs("ratelimit, Prefetch 20ms", ratelimit.SlidingLog, 20*time.Millisecond)
	// oursGCRAPrefetch, oursFixed and oursFixedPrefetch are case P's kinds
	// whose grant costs Redis the same whatever its size: GCRA with and
	// without Prefetch, and the fixed window with and without it.
	oursGCRAPrefetch  = oursAs("ratelimit GCRA, Prefetch 20ms", ratelimit.GCRA, 20*time.Millisecond)
	oursFixed         = oursAs("ratelimit fixed window", ratelimit.FixedWindow, 0)
	oursFixedPrefetch = oursAs("ratelimit fixed window, Prefetch 20ms", ratelimit.FixedWindow, 20*time.Millisecond)
	// oursGCRA and oursGCRALocal are ours under the same spec with a rule
	// of Kind GCRA (Burst = Rate), on Redis and in process.
	oursGCRA      = contender{name: "ratelimit GCRA", remote: true, open: openOursGCRA}
	oursGCRALocal = contender{name: "ratelimit GCRA (local only)", open: openOursGCRA}
)

func openOursGCRA(addr string, s spec) (limiter, func(), error) {
	s.kind = ratelimit.GCRA
	return openOurs(addr, s)
}

// oursAs is ours on Redis under the same spec with a rule of the given
// kind and Prefetch.
func oursAs(name string, kind ratelimit.Kind, prefetch time.Duration) contender {
	return contender{name: name, remote: true, open: func(addr string, s spec) (limiter, func(), error) {
		s.kind, s.prefetch = kind, prefetch
		return openOurs(addr, s)
	}}
}

package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ratelimit-go/ratelimit/internal/grant"
	"github.com/ratelimit-go/ratelimit/internal/ledger"
	"github.com/ratelimit-go/ratelimit/internal/script"
	"github.com/redis/rueidis"
)

// A rule with Prefetch lets a process decide a hot pair's calls from slots
// it took from Redis ahead of them (lua/grant.lua). The grant is exact: at
// Redis' time t it takes g slots only if the log's count (future stamps of
// other grants included) plus g fits the Rate, and stamps them t +
// Prefetch. The process uses them while its clock reads less than the time
// it sent the request plus Prefetch, so that every use happens no later
// than its stamp, and the log counts it at least a Window after the use:
// any Window-long interval holds at most Rate allowed calls, fleet-wide.
// The price is under-admission: slots a process took and did not use count
// until they are given back (with its next request for the pair, when its
// grant lapses on a cold pair, or at Close), or a Window after their stamp.
//
// When Redis has no slot for a request, the next waits until one frees (as
// Redis' reply says, within Options.ShieldMax), or Prefetch at least, and
// meanwhile the pair's calls are rejected in-process (under a rule without
// a penalty, the shield on), as the hot-key shield answers a full key: the
// slots that free are left to that request, one script for many of them,
// where calls sent to Redis would take them one by one. While its calls
// keep coming the pair stays hot.

// maxPrefetch bounds Rule.Prefetch: the log's expiry, ttl.lua's second
// past the window from every call, must outlive a grant's stamps.
const maxPrefetch = 500 * time.Millisecond

// maxPrefetchPairs bounds the pairs whose grants a Limiter keeps; the least
// recently used one's unused slots are given back when it is dropped.
const maxPrefetchPairs = 4096

// composeGrant returns lua/grant.lua composed for kind (the name of its
// pieces in lua/), or nil when the kind has no grant pieces: it takes no
// Prefetch.
func composeGrant(kind string) *script.Script {
	if !luaPieces.Has(kind, "take") {
		return nil
	}
	return script.New(script.AddsState, compose("grant", allowVariant(kind, false)))
}

// setPrefetch checks r.Prefetch and sets p's; it returns what is wrong, or
// "".
func (p *plan) setPrefetch(r *Rule) string {
	if r.Prefetch == 0 {
		return ""
	}
	bound := maxPrefetch // a calendar quota's period is a day at least
	if r.Limit.Window > 0 {
		bound = min(r.Limit.Window/10, maxPrefetch)
	}
	switch {
	case r.Prefetch < 0:
		return fmt.Sprintf("Prefetch %v is negative", r.Prefetch)
	case p.alg.redis.scripts().grant == nil:
		return fmt.Sprintf("Prefetch is not for a %s rule", p.alg.rules.name())
	case r.Prefetch < time.Microsecond:
		return fmt.Sprintf("Prefetch %v is shorter than 1µs", r.Prefetch)
	case r.Prefetch > bound:
		return fmt.Sprintf("Prefetch %v is longer than %v: min(Window / 10, %v)", r.Prefetch, bound, maxPrefetch)
	}
	p.prefetch = r.Prefetch.Microseconds()
	return ""
}

// prefetcher holds the grants of the Limiter's prefetching pairs, what
// they owe Redis, and their counts (see Stats).
type prefetcher struct {
	once  sync.Once
	pairs *lru.Cache[lkey, *pairGrants]
	backs ledger.Queue[grantBack]

	grants, granted, used, returned atomic.Uint64
}

// pairGrants is one pair's grants in this process (internal/grant's Pair:
// its slots, the next grant, the calls that wait, its rate, the wait after
// a refused request), and the request on its way. Its lock guards it.
type pairGrants struct {
	mu sync.Mutex
	grant.Pair[lkey, plan]

	asking chan struct{} // closed when the request on its way returns
}

// grantBack is what a process gives back of a grant (see grant.Back).
type grantBack = grant.Back[lkey, plan]

// terms is what internal/grant reads of p.
func (p *plan) terms() grant.Terms {
	return grant.Terms{Rate: p.rate, Prefetch: p.prefetch, Records: p.keepsRecords()}
}

// grantBooks is where a pair's grants report what they close: the
// process' own count, and the give-backs owed for the write-back's loop.
type grantBooks struct{ l *Limiter }

var _ grant.Books[lkey, plan] = grantBooks{}

// Unmirror takes n events counted for k at at out of the process' own
// count (slots of a grant given back unused).
func (b grantBooks) Unmirror(k lkey, p *plan, at, n int64) { b.l.local.unmirror(k, p, at, n) }

// Owe owes gb to Redis, for the write-back's loop, woken at once.
func (b grantBooks) Owe(gb grantBack) {
	b.l.prefetch.backs.Add(gb, maxOwedSettles)
	b.l.kickWriteBack()
}

// allowedFrom is the Result of a call allowed from a grant (see grant.Use).
func allowedFrom(u grant.Use) Result {
	return Result{Allowed: true, Limit: u.Limit, Remaining: u.Remaining, ResetAfter: u.ResetAfter}
}

// pairOf returns k's grants, made for p when there are none.
func (l *Limiter) pairOf(k lkey, p *plan) *pairGrants {
	f := &l.prefetch
	f.once.Do(func() {
		f.pairs, _ = lru.NewWithEvict[lkey, *pairGrants](maxPrefetchPairs, func(_ lkey, g *pairGrants) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, b := range g.Drop() {
				f.backs.Add(b, maxOwedSettles)
			}
		})
	})
	if g, ok := f.pairs.Peek(k); ok {
		return g
	}
	g := &pairGrants{Pair: grant.New[lkey, plan](k, *p, p.terms(), grantBooks{l})}
	if prev, found, _ := f.pairs.PeekOrAdd(k, g); found {
		return prev
	}
	return g
}

// sameLimit reports whether q limits as p does: a grant made under p
// stands under q (a quota's period may differ: a grant's slots end with
// the period they were taken in).
func (p *plan) sameLimit(q *plan) bool {
	return p.alg == q.alg && p.rate == q.rate && p.window == q.window && p.prefetch == q.prefetch &&
		p.penalize == q.penalize && p.emit == q.emit && p.period == q.period && p.loc == q.loc
}

// prefetched decides a plain call (Allow or AllowN) of a rule with
// Prefetch: from the pair's grant when it holds the slots, otherwise on
// Redis (see onRedis), after asking for a grant when the pair is hot.
func (l *Limiter) prefetched(ctx context.Context, conn *redisConn, r *Rule, p *plan, k lkey, n, now int64, res *Result) (Path, error) {
	g := l.pairOf(k, p)
	if path := l.fromGrant(ctx, conn, g, p, k, n, now, res); path != PathNone {
		return path, nil
	}
	path, err := l.onRedis(ctx, conn, r, p, k, n, false, nil, now, res)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.Roll(now)
	switch {
	case err != nil:
	case res.Banned:
		g.Ban() // a ban stops this process' admits from slots at once
	case res.Allowed:
		g.Allowed(n)
	}
	return path, err
}

// bannedElsewhere closes k's grants, if the process holds any, when a call
// that took no slot found the key banned: a Peek, an AllowAll, a Reserve,
// or a rule of the same name without Prefetch.
func (l *Limiter) bannedElsewhere(k lkey) {
	if l.prefetch.pairs == nil {
		return
	}
	if g, ok := l.prefetch.pairs.Peek(k); ok {
		g.mu.Lock()
		g.Ban()
		g.mu.Unlock()
	}
}

// fromGrant allows the call from g when it holds n slots, waiting for a
// request on its way (within Options.Timeout), or asking for a grant of its
// own when the pair is hot: at least two allowed events in the last
// Prefetch, or a call rejected in-process in the last Prefetch (it then
// asks for what the request Redis had no slot for asked). Until the next
// request after one Redis had no slot for, it rejects the call in-process
// under a rule without a penalty (see reject). It returns the path of what
// it decided into res, or PathNone. now is the call's time; a slot's use is
// judged at the clock's reading after any wait, so that it is never later
// than the grant's end.
func (l *Limiter) fromGrant(ctx context.Context, conn *redisConn, g *pairGrants, p *plan, k lkey, n, now int64, res *Result) Path {
	at := now
	var deadline time.Time
	g.mu.Lock()
	if !g.Plan().sameLimit(p) {
		// The rule changed under its name: the grant was made, and its
		// Results are reported, under the old one.
		l.giveBackLater(g)
		g.SetPlan(*p, p.terms())
	}
	g.Roll(now)
	for {
		g.Current(at, n)
		if g.Has(at, n) {
			l.useGrant(conn, g, k, n, at, res)
			return PathPrefetch
		}
		if g.asking == nil {
			break
		}
		var end waitEnd
		switch at, end = l.waitOnWay(ctx, g, n, &deadline, res); end {
		case waitServed:
			return PathPrefetch
		case waitOver:
			return PathNone
		}
	}
	if g.Paused(at) { // no slot was free a moment ago
		return g.reject(p, at, res)
	}
	want := g.Wanted(at, p.prefetch)
	if want < 2 { // cold: what a lapsed grant left goes back
		if at >= g.Until() {
			l.giveBackLater(g)
		}
		g.mu.Unlock()
		return PathNone
	}
	return l.askOwn(ctx, conn, g, p, k, n, want, at, res)
}

// askOwn asks, at at, for a grant of want slots beside the call's n (g.mu
// held, the pair hot, no request on its way), whose grant serves the call
// first (see grant.Pair.Install); what lapsed goes back with the request.
// It returns PathPrefetch when the grant served the call, PathShield when
// Redis had no slot and the call is rejected in-process (see reject),
// PathNone otherwise; g.mu is unlocked.
func (l *Limiter) askOwn(ctx context.Context, conn *redisConn, g *pairGrants, p *plan, k lkey, n, want, at int64, res *Result) Path {
	// This call is the first its own grant serves, before the calls that
	// wait for it (they queue after it).
	g.asking = make(chan struct{})
	g.ResetQueue()
	w := g.Enqueue(n)
	var backs []grantBack
	if at >= g.Until() {
		// What the lapsed grant left, and what the one before it left,
		// go back with the request (retiring it first would send the
		// latter on its own: a script more).
		backs = g.Drop()
	} else if b, ok := g.TakePending(); ok {
		backs = []grantBack{b}
	}
	want = g.Ask(want) + n
	g.mu.Unlock()
	l.request(ctx, conn, g, p, k, want, n, backs)
	at = l.localNow()
	g.mu.Lock()
	if u, ok := w.Served(); ok {
		*res = allowedFrom(u)
		g.mu.Unlock()
		return PathPrefetch
	}
	w.Leave()
	if g.Paused(at) {
		return g.reject(p, at, res)
	}
	g.mu.Unlock()
	return PathNone
}

// waitEnd is how waitOnWay's wait ended.
type waitEnd int

const (
	waitServed waitEnd = iota // the grant the request brought served the call (g.mu unlocked)
	waitCame                  // the request came without serving it (g.mu held)
	waitOver                  // the deadline or the context ended the wait (g.mu unlocked)
)

// waitOnWay waits, with g.mu held, for the request on its way, queued so
// that the grant it brings serves the call's n events as it comes, after
// the calls that waited before it (see grant.Pair.Install), until
// *deadline (set, and the call counted in the pair's demand, at its first
// wait: Options.Timeout from then). It returns the clock's reading after the wait, and how it
// ended; res holds the call's Result when the grant served it.
func (l *Limiter) waitOnWay(ctx context.Context, g *pairGrants, n int64, deadline *time.Time, res *Result) (int64, waitEnd) {
	ch := g.asking
	w := g.Enqueue(n)
	if deadline.IsZero() {
		g.Waited(n)
		*deadline = time.Now().Add(l.set.Timeout)
	}
	g.mu.Unlock()
	came := l.awaitGrant(ctx, ch, *deadline)
	at := l.localNow()
	g.mu.Lock()
	if u, ok := w.Served(); ok {
		*res = allowedFrom(u)
		g.mu.Unlock()
		return at, waitServed
	}
	w.Leave()
	if !came {
		g.mu.Unlock()
		return at, waitOver
	}
	return at, waitCame
}

// reject rejects a call at at in-process into res, and returns
// PathShield, when Redis had no slot for the pair's last request, under a
// rule without a penalty and with the hot-key shield on (Options.ShieldMax
// not negative), until the pair's next request (see askFor): so
// that the slots that free meanwhile are left to that request, one script
// for many of them, instead of going one by one to calls sent to Redis,
// two scripts each (see crowd.go), which the fleet's instances would race
// for. It answers what a rejection of one event at the request's time
// answers, its RetryAfter no earlier than the next request. Otherwise
// (under a penalty a rejection counts a violation; a request not made
// asks nothing of Redis) Redis or the shield decides: it returns PathNone.
// Either way it unlocks g.
func (g *pairGrants) reject(p *plan, at int64, res *Result) Path {
	defer g.mu.Unlock()
	rj, ok := g.Reject(at)
	if !ok {
		return PathNone
	}
	*res = Result{Limit: int(p.rate), RetryAfter: rj.RetryAfter, ResetAfter: rj.ResetAfter}
	return PathShield
}

// askFor asks Redis at now for want slots of k's meter into g, whose
// asking the caller set, giving back backs (what earlier grants left); the
// grant becomes g's live one or its next (see grant.Pair.Install), and
// asking is closed. least is the events of the call that asks (0: none
// asks): Redis grants that many slots at least, or none (see askGrant).
func (l *Limiter) askFor(ctx context.Context, conn *redisConn, g *pairGrants, p *plan, k lkey, want, least, now int64, backs []grantBack) {
	id := l.member(l.seq.Add(1)) + "g"
	// The grant's time: Redis' usable and empty run from the time it
	// took the slots at, its TIME, no earlier than the clock's reading
	// as the request leaves; or, when the process sends its own time
	// (Options.Clock, a quota's period), now, which may be earlier.
	sent := min(now, l.localNow())
	backsDone := l.local.backsDone(k)
	rep, ok := l.askGrant(ctx, conn, p, k, want, least, id, backs, now)
	got, none := rep.got, rep.none
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.asking)
	g.asking = nil
	if ok && got == 0 {
		l.noSlot(g, p, sent, want, none)
	}
	if !ok || got == 0 {
		return
	}
	g.Granted()
	nx := grant.Slots[plan]{Plan: *p, Terms: p.terms(), ID: id, N: got, Until: sent + rep.usable, Count: rep.count,
		At: rep.at, Mark: rep.mark, Empty: sent + rep.empty}
	if rep.pace > 0 {
		l.paced(g, p, sent, want, rep.pace, nx.Empty)
	}
	l.prefetch.used.Add(uint64(g.Install(nx, l.localNow())))
	// The process' own count holds the grant's slots, stamped at the
	// grant's last instant: one entry for the grant instead of one a use,
	// no earlier than any use (so that the degraded share counts them a
	// window after their uses at least), and in the window or period
	// Redis took them in. What goes back unused leaves it (grant.Pair's
	// Drop, or the leftover of a grant that ends).
	l.local.addEvents(k, p, nx.Until-1, got, "", false)
	// A bucket's reply carries Redis' whole state, as a decision's does:
	// the own count merges it, keeping the later (see localShard.mirror),
	// so that it counts the other instances' events too, and a fallback
	// right after a grant starts from the fleet's bucket at its share, as
	// it does after a decision on Redis, not from this process' grants
	// alone (TestPrefetchFleetKill/gcra: it admitted its share's burst on
	// top of the fleet's at the kill), less what settles gave back since
	// the request left (TestGCRASettleBetweenGrantAndRecord).
	l.local.copyBucket(k, p, sent, rep.empty, backsDone)
	l.prefetch.grants.Add(1)
	l.prefetch.granted.Add(uint64(got))
	if l.closed.Load() {
		l.giveBackLater(g) // Close gave back what it found already
	}
}

// noSlot notes in g that Redis had no slot for a request sent at sent for
// want (none: the retry and reset of a rejection of one event, µs from its
// reply, or nil when the grant was refused for another reason): no request
// is made before Prefetch from sent, and under a rule without a penalty,
// the shield on, none before a slot frees (within Options.ShieldMax); the
// pair's calls are rejected in-process meanwhile (see reject). Slots that
// give-backs and Resets free are left to that request, as the hot-key
// shield leaves them (see grant.Pair.Refused). The caller holds g.mu.
func (l *Limiter) noSlot(g *pairGrants, p *plan, sent, want int64, none []int64) {
	r := grant.Refusal{Sent: sent, Want: want, Prefetch: p.prefetch, Shield: none != nil && l.shieldsGrants(p)}
	var at int64
	if r.Shield {
		at = l.localNow()
		r.RetryAt, r.ResetAt, r.MaxWait = at+none[0], at+none[1], max(0, int64(l.set.ShieldMax/time.Microsecond))
	}
	g.Refused(r, at)
}

// shieldsGrants reports whether the calls of a pair of p's whose request
// Redis refused are rejected in-process until its next request (see
// reject): under a rule without a penalty, the shield on.
func (l *Limiter) shieldsGrants(p *plan) bool { return !p.penalize && l.set.ShieldMax >= 0 }

// paced notes in g that Redis granted less than was asked (want, sent at
// sent) of a meter that frees room continuously: the next request waits
// pace µs (lua/grant.lua), within Options.ShieldMax, so that it finds more
// than the little freed since, and meanwhile the calls the grant's slots
// cannot take are rejected in-process as when Redis had no slot (see
// reject), RetryAfter at that request, ResetAfter at empty (see
// grant.Pair.Paced). The caller holds g.mu.
func (l *Limiter) paced(g *pairGrants, p *plan, sent, want, pace, empty int64) {
	g.Paced(grant.Refusal{Sent: sent, Want: want, Prefetch: p.prefetch, Shield: l.shieldsGrants(p),
		RetryAt: sent + pace, ResetAt: empty, MaxWait: max(0, int64(l.set.ShieldMax/time.Microsecond))})
}

// giveBackLater closes g's grant and owes what it and the one before it
// did not use to Redis, for the write-back's loop, woken at once. The
// caller holds g.mu.
func (l *Limiter) giveBackLater(g *pairGrants) {
	if bs := g.Drop(); len(bs) > 0 {
		for _, b := range bs {
			l.prefetch.backs.Add(b, maxOwedSettles)
		}
		l.kickWriteBack()
	}
}

// useGrant allows the call for n events at now from g into res (the
// process' own count holds the grant's slots already: see askFor), and
// unlocks g. When the grant runs low (see grant.Pair.Use), no request is on
// its way and Redis had slots at the last, this call asks for the next
// grant before it returns (it is allowed already), so that the pair's
// other calls need not wait for it.
func (l *Limiter) useGrant(conn *redisConn, g *pairGrants, k lkey, n, now int64, res *Result) {
	u, want := g.Use(n, now)
	*res = allowedFrom(u)
	refresh := want > 0 && g.asking == nil && !g.Paused(now)
	var p plan
	var backs []grantBack
	if refresh {
		p = *g.Plan()
		g.asking = make(chan struct{})
		g.ResetQueue()
		if b, ok := g.TakePending(); ok {
			backs = []grantBack{b}
		}
	}
	g.mu.Unlock()
	l.prefetch.used.Add(uint64(n))
	if refresh {
		ctx, cancel := context.WithTimeout(context.Background(), l.set.Timeout)
		defer cancel()
		l.request(ctx, conn, g, &p, k, want, 0, backs)
	}
}

// request is askFor at the clock's reading now (after any wait, so that
// the slots are stamped no earlier than the grant's end, its time plus
// Prefetch), timed: the pair learns its round trip (see
// grant.Pair.RoundTrip).
func (l *Limiter) request(ctx context.Context, conn *redisConn, g *pairGrants, p *plan, k lkey, want, least int64, backs []grantBack) {
	sent := l.localNow()
	l.askFor(ctx, conn, g, p, k, want, least, sent, backs)
	rt := max(0, l.localNow()-sent)
	g.mu.Lock()
	g.RoundTrip(p.prefetch, want, rt)
	g.mu.Unlock()
}

// awaitGrant waits until ch is closed (it reports true), ctx ends or
// deadline passes. A request that returned by then wins: a caller woken
// late (its goroutine waited for a core behind busy ones) finds the
// request returned and its timer fired together, and select would pick
// one of them at random.
func (l *Limiter) awaitGrant(ctx context.Context, ch <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// grantReply is what Redis answered a request for slots (lua/grant.lua):
// the slots granted, the meter's count before them, µs from the grant they
// may be used, where they went and the pair's last Reset (for their
// give-back), µs from the grant until the meter is empty and until the next
// request is worth making (see lua/grant.lua); and when Redis had no slot for them (want > 0, got 0) the
// retry and reset of a rejection of one event (µs from its reply).
type grantReply struct {
	got, count, usable, at, mark, empty, pace int64
	none                                      []int64
}

// askGrant asks Redis for want slots of k's meter at now under id, giving
// back backs, and returns its reply; ok is false when Redis could not be
// asked (backs are then owed). Redis grants least slots at least (the
// events of the call that asks), or none: a grant too small for its call
// served nothing, held its slots unused while the call went to Redis, and
// was not a refusal, so the pair's next call asked again, one script more
// for each call while a full key freed its slots one by one.
func (l *Limiter) askGrant(ctx context.Context, conn *redisConn, p *plan, k lkey, want, least int64, id string, backs []grantBack, now int64) (rep grantReply, ok bool) {
	ks := redisKeys(l.set.KeyPrefix, k)
	keys := []string{ks.Meter(p.alg.redis.letter()), ks.Reset}
	if p.penalize {
		keys = append(keys, ks.Penalty)
	}
	var extra int64
	if want > 0 {
		var ok bool
		if extra, ok = l.alsoCounted(conn, k, p, now); !ok {
			// Redis lost its data less than a window ago: no slot now
			// (askFor: none for Prefetch), and the pair's calls go to
			// Redis, which counts what the fleet may owe it.
			if want = 0; len(backs) == 0 {
				return grantReply{}, true
			}
		}
	}
	args := l.grantArgs(p, want, least, extra, id, backs, now)
	var reply []int64
	s, err := l.send(ctx, conn, keys[0], subject{"rule", k.Rule}, false, func(ctx context.Context, c rueidis.Client) (err error) {
		reply, err = p.alg.redis.scripts().grant.Exec(ctx, c, keys, args).AsIntSlice()
		return err
	})
	s.release() // no grant is decided without Redis
	sent := err == nil && s.path == PathRedis
	for _, b := range backs {
		if sent {
			l.prefetch.returned.Add(uint64(b.To - b.From + 1))
		} else {
			l.prefetch.backs.Add(b, maxOwedSettles) // giving back twice removes nothing more
		}
	}
	switch {
	case !sent || len(reply) < 3:
		return grantReply{}, false
	case len(reply) == 5:
		rep.none = reply[3:]
	case len(reply) == 8:
		rep.usable, rep.at, rep.mark, rep.empty, rep.pace = reply[3], reply[4], reply[5], reply[6], reply[7]
	}
	rep.got, rep.count = reply[0], reply[1]
	return rep, true
}

// grantArgs are lua/grant.lua's arguments for a request at now for want
// slots of p's meter, least of them at least, under id, counting extra on
// top of it, giving back backs.
func (l *Limiter) grantArgs(p *plan, want, least, extra int64, id string, backs []grantBack, now int64) []string {
	instances := int64(1)
	if l.set.fleet != nil {
		instances = max(1, l.set.fleet.Load())
	}
	second, fifth, member := p.alg.redis.args(*p)
	fifthArg := id
	if !member {
		fifthArg = itoa(fifth)
	}
	args := make([]string, 0, 10+5*len(backs))
	args = append(args, l.clockArg(now, p.alg.rules.timed()), itoa(second), itoa(p.rate), itoa(want), fifthArg,
		itoa(p.prefetch), itoa(instances), itoa(extra), id, itoa(least))
	for _, b := range backs {
		args = append(args, b.ID, itoa(b.From), itoa(b.To), itoa(b.Mark), itoa(b.At))
	}
	return args
}

// alsoCounted returns what a decision on Redis for k at now counts on top
// of Redis' log, as grant.lua must count it too: this process' events of
// the pair decided without Redis that the write-back has not brought yet,
// and the fleet's reserve for other instances' (see Limiter.reserve and
// hold). It reports false when Redis lost its data less than a window ago
// (the reserve is then the fleet's whole share, not a count of events):
// no grant then. Without it, a grant after an outage took slots that were
// not free.
func (l *Limiter) alsoCounted(conn *redisConn, k lkey, p *plan, now int64) (int64, bool) {
	reserve, lost, _ := l.reserve(conn, p, now)
	if lost {
		return 0, false
	}
	sh, h := l.local.atPlan(&k, p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, owed := sh.owedOf(&k, h, p, now)
	return reserve + owed, true
}

// giveGrantsBack sends what grants owe Redis (the write-back's loop calls
// it), a pair at a time; what still cannot be sent is owed again.
func (l *Limiter) giveGrantsBack(ctx context.Context) {
	conn := l.conn.Load()
	for _, b := range l.prefetch.backs.Take() {
		l.askGrant(ctx, conn, &b.Plan, b.Key, 0, 0, "", []grantBack{b}, l.localNow())
	}
}

// returnGrants gives back what every grant holds unused, within
// Options.Timeout: Close calls it.
func (l *Limiter) returnGrants() {
	f := &l.prefetch
	if f.pairs == nil {
		return
	}
	for _, k := range f.pairs.Keys() {
		if g, ok := f.pairs.Peek(k); ok {
			g.mu.Lock()
			for _, b := range g.Drop() {
				f.backs.Add(b, maxOwedSettles)
			}
			g.mu.Unlock()
		}
	}
	if !f.backs.Pending() || l.conn.Load() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.set.Timeout)
	defer cancel()
	l.giveGrantsBack(ctx)
}

// voidGrant drops k's grant (a Reset cleared its slots on Redis).
func (l *Limiter) voidGrant(k lkey) {
	if l.prefetch.pairs == nil {
		return
	}
	if g, ok := l.prefetch.pairs.Peek(k); ok {
		g.mu.Lock()
		g.Void()
		g.mu.Unlock()
	}
}

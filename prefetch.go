package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
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
	pairs *lru.Cache[lkey, *grant]
	backs owedQueue[grantBack]

	grants, granted, used, returned atomic.Uint64
}

// grant is one pair's slots in this process, and the rate of its allowed
// calls. Its lock guards it.
type grant struct {
	mu    sync.Mutex
	p     plan
	local *localStore // the process' own count, where a grant's slots are mirrored
	id    string      // the member id of the slots: id:1 .. id:slots ("": none)
	slots int64       // granted
	used  int64       // used: id:1 .. id:used
	until int64       // µs, the process' clock: usable while it reads less
	count int64       // the meter's count at the grant, before its slots
	at    int64       // where the slots went (lua/grant.lua: a window's or period's index)
	mark  int64       // the pair's last Reset when they were granted
	empty int64       // µs, the process' clock: the meter is empty then if nothing else comes
	full  int64       // µs: Redis had no slot to grant; none is asked for before this

	// When Redis last had no slot for a request, under a rule without a
	// penalty: until full the pair's calls without a slot are rejected
	// in-process (see reject), as a rejection of one event at the
	// request's time answers them, a slot freed at retryAt, the log empty
	// at resetAt (µs, the process' clock); the last was rejected at
	// knocked; wanted is what the request asked for, what the pair still
	// wants while its calls keep coming (see fromGrant).
	noSlot                            bool
	retryAt, resetAt, knocked, wanted int64

	// The pair's allowed events in the current Prefetch-long bucket of
	// the process' clock and in the one before it, and the events of its
	// calls that waited for a grant on its way in them (see demand).
	bucket, cur, prev int64
	waits, waitsPrev  int64

	asking  chan struct{} // closed when the request on its way returns
	pending grantBack     // what the grant before this one left unused: goes back with the next request

	// next is a grant that came while this one still had slots: its
	// slots are used once this one's run out or lapse (see current), so
	// that a request made ahead of need leaves none of them unused.
	next nextGrant
	// lat is the round trip of the pair's requests (µs, the process'
	// clock, smoothed): the next grant is asked for while what is left
	// lasts that long at the pair's rate (see useGrant). capSlots caps
	// the slots a request asks for (see request); 0: none.
	lat, capSlots int64

	// queue holds the calls that wait for the request on its way, first
	// come first: the grant it brings serves them before any other call
	// (see serve).
	queue []*grantWaiter
}

// grantWaiter is a call waiting for a request on its way: n events; done
// when the grant it brought served it (res is its Result), gone when it
// stopped waiting.
type grantWaiter struct {
	n          int64
	done, gone bool
	res        Result
}

// nextGrant is a grant that waits for the live one to run out or lapse:
// the grant's fields as they are when it is live, and the plan it was
// made under.
type nextGrant struct {
	p                                    plan
	id                                   string
	slots, until, count, at, mark, empty int64
}

// grantBack is what a process gives back of a grant: slots from .. to of
// id in k's meter, which went where at says, under the Reset mark.
type grantBack struct {
	k        lkey
	p        plan
	id       string
	from, to int64
	at, mark int64
}

// pair returns k's grant, made for p (in the process' store local) when
// there is none.
func (f *prefetcher) pair(k lkey, p *plan, local *localStore) *grant {
	f.once.Do(func() {
		f.pairs, _ = lru.NewWithEvict[lkey, *grant](maxPrefetchPairs, func(k lkey, g *grant) {
			g.mu.Lock()
			defer g.mu.Unlock()
			for _, b := range g.drop(k) {
				f.backs.add(b, maxOwedSettles)
			}
		})
	})
	if g, ok := f.pairs.Peek(k); ok {
		return g
	}
	g := &grant{p: *p, local: local}
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

// roll moves the rate's buckets to now's.
func (g *grant) roll(now int64) {
	switch b := floorDiv(now, g.p.prefetch); {
	case b == g.bucket+1:
		g.bucket, g.prev, g.cur = b, g.cur, 0
		g.waitsPrev, g.waits = g.waits, 0
	case b > g.bucket:
		g.bucket, g.prev, g.cur = b, 0, 0
		g.waitsPrev, g.waits = 0, 0
	}
}

// has reports whether n slots are usable at now.
func (g *grant) has(now, n int64) bool {
	return g.id != "" && now < g.until && g.slots-g.used >= n
}

// current makes the next grant live when the live one cannot serve n
// events at now (it ran out or lapsed); what it left goes back with the
// pair's next request (see retire). The caller holds g.mu.
func (l *Limiter) current(g *grant, k lkey, now, n int64) {
	if g.next.id == "" || g.has(now, n) {
		return
	}
	l.retire(g, k)
	nx := g.next
	g.next = nextGrant{}
	g.live(nx)
}

// live makes nx the live grant, none of its slots used. The caller holds
// g.mu and retired the live one.
func (g *grant) live(nx nextGrant) {
	g.p, g.id, g.slots, g.used, g.until, g.count = nx.p, nx.id, nx.slots, 0, nx.until, nx.count
	g.at, g.mark, g.empty = nx.at, nx.mark, nx.empty
}

// install makes the grant nx at now the pair's live one, or its next when
// the live one still serves calls: its slots are then used after the live
// one's. The grant it makes live serves the calls that waited for it first
// (see serve). The caller holds g.mu.
func (l *Limiter) install(g *grant, k lkey, nx nextGrant, now int64) {
	if g.has(now, 1) {
		if g.next.id != "" {
			// A third grant (a pair asks once at a time, and not while a
			// next one waits): the live one makes way.
			l.current(g, k, g.until, 1)
		}
		if g.has(now, 1) {
			g.next = nx
			return
		}
	}
	l.retire(g, k)
	g.live(nx)
	l.serve(g, now)
}

// serve allows, from the live grant at now, the calls that waited for it,
// first come first, while it holds their slots: each is decided at the
// grant's coming, at a reading of the clock after its wait. Those it
// cannot serve wake and try again. The caller holds g.mu.
func (l *Limiter) serve(g *grant, now int64) {
	for _, w := range g.queue {
		if w.gone || w.done {
			continue
		}
		if !g.has(now, w.n) {
			break
		}
		g.used += w.n
		g.cur += w.n
		w.done = true
		w.res = g.result(now)
		l.prefetch.used.Add(uint64(w.n))
	}
	g.queue = nil
}

// result is the Result of a call allowed from the live grant at now, its
// slots counted used: Remaining is the meter's count at the grant less
// what this process used of it since; ResetAfter when the meter is empty
// if nothing else comes (a log: when the slots' stamp leaves the window).
func (g *grant) result(now int64) Result {
	return Result{Allowed: true, Limit: int(g.p.rate), Remaining: int(max(0, g.p.rate-g.count-g.used)),
		ResetAfter: time.Duration(g.empty-now) * time.Microsecond}
}

// closeNext closes the next grant and returns what of it is unused: all.
func (g *grant) closeNext(k lkey) (grantBack, bool) {
	nx := g.next
	if nx.id == "" {
		return grantBack{}, false
	}
	g.next = nextGrant{}
	g.local.unmirror(k, &nx.p, nx.until-1, nx.slots)
	return grantBack{k: k, p: nx.p, id: nx.id, from: 1, to: nx.slots, at: nx.at, mark: nx.mark}, true
}

// leftover closes the grant and returns what of it goes back to Redis, if
// anything: its unused slots, and a bucket's grant even when it was all
// used, since it is a reservation (lua/gcra.lua's gcra.take) that Redis
// keeps until it is settled.
func (g *grant) leftover(k lkey) (grantBack, bool) {
	b := grantBack{k: k, p: g.p, id: g.id, from: g.used + 1, to: g.slots, at: g.at, mark: g.mark}
	g.id, g.slots, g.used = "", 0, 0
	if b.id == "" {
		return b, false
	}
	unused := b.from <= b.to
	if unused {
		g.local.unmirror(k, &g.p, g.until-1, b.to-b.from+1)
	}
	return b, unused || b.p.keepsRecords()
}

// drop closes the grant and returns what it owes Redis: what it, the next
// one and the grant before it left unused.
func (g *grant) drop(k lkey) []grantBack {
	var out []grantBack
	if b, ok := g.leftover(k); ok {
		out = append(out, b)
	}
	if b, ok := g.closeNext(k); ok {
		out = append(out, b)
	}
	if g.pending.id != "" {
		out = append(out, g.pending)
		g.pending = grantBack{}
	}
	return out
}

// prefetched decides a plain call (Allow or AllowN) of a rule with
// Prefetch: from the pair's grant when it holds the slots, otherwise on
// Redis (see onRedis), after asking for a grant when the pair is hot.
func (l *Limiter) prefetched(ctx context.Context, conn *redisConn, r *Rule, p *plan, k lkey, n, now int64, res *Result) (Path, error) {
	g := l.prefetch.pair(k, p, l.local)
	if path := l.fromGrant(ctx, conn, g, p, k, n, now, res); path != PathNone {
		return path, nil
	}
	path, err := l.onRedis(ctx, conn, r, p, k, n, false, nil, now, res)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.roll(now)
	switch {
	case err != nil:
	case res.Banned:
		l.banned(g, k)
	case res.Allowed:
		g.cur += n
	}
	return path, err
}

// banned closes g's grants: a ban stops this process' admits from slots
// at once. What the live one left goes back with the pair's next request
// (see retire), the next one's through the write-back's loop. The caller
// holds g.mu.
func (l *Limiter) banned(g *grant, k lkey) {
	l.retire(g, k)
	if b, ok := g.closeNext(k); ok {
		l.prefetch.backs.add(b, maxOwedSettles)
		l.kickWriteBack()
	}
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
		l.banned(g, k)
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
func (l *Limiter) fromGrant(ctx context.Context, conn *redisConn, g *grant, p *plan, k lkey, n, now int64, res *Result) Path {
	at := now
	var deadline time.Time
	g.mu.Lock()
	if !g.p.sameLimit(p) {
		// The rule changed under its name: the grant was made, and its
		// Results are reported, under the old one.
		l.giveBackLater(g, k)
		g.p = *p
	}
	g.roll(now)
	for {
		l.current(g, k, at, n)
		if g.has(at, n) {
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
	want := g.demand()
	if at < g.full { // no slot was free a moment ago
		return g.reject(p, at, res)
	}
	if want < 2 && g.noSlot && at < g.knocked+p.prefetch {
		want = max(g.wanted, 2) // the calls kept coming while Redis had no slot
	}
	if want < 2 { // cold: what a lapsed grant left goes back
		if at >= g.until {
			l.giveBackLater(g, k)
		}
		g.mu.Unlock()
		return PathNone
	}
	return l.askOwn(ctx, conn, g, p, k, n, want, at, res)
}

// askOwn asks, at at, for a grant of want slots beside the call's n (g.mu
// held, the pair hot, no request on its way), whose grant serves the call
// first (see serve); what lapsed goes back with the request. It returns
// PathPrefetch when the grant served the call, PathShield when Redis had
// no slot and the call is rejected in-process (see reject), PathNone
// otherwise; g.mu is unlocked.
func (l *Limiter) askOwn(ctx context.Context, conn *redisConn, g *grant, p *plan, k lkey, n, want, at int64, res *Result) Path {
	// This call is the first its own grant serves (see serve), before the
	// calls that wait for it.
	w := &grantWaiter{n: n}
	g.asking, g.queue = make(chan struct{}), []*grantWaiter{w}
	var backs []grantBack
	if at >= g.until {
		// What the lapsed grant left, and what the one before it left,
		// go back with the request (retiring it first would send the
		// latter on its own: a script more).
		backs = g.drop(k)
	} else if g.pending.id != "" {
		backs, g.pending = []grantBack{g.pending}, grantBack{}
	}
	want = g.ask(want) + n
	g.mu.Unlock()
	l.request(ctx, conn, g, p, k, want, backs)
	at = l.localNow()
	g.mu.Lock()
	if w.done {
		*res = w.res
		g.mu.Unlock()
		return PathPrefetch
	}
	w.gone = true
	if at < g.full {
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
// the calls that waited before it (see serve), until *deadline (set, and
// the call counted in the pair's demand, at its first wait: Options.Timeout
// from then). It returns the clock's reading after the wait, and how it
// ended; res holds the call's Result when the grant served it.
func (l *Limiter) waitOnWay(ctx context.Context, g *grant, n int64, deadline *time.Time, res *Result) (int64, waitEnd) {
	ch := g.asking
	w := &grantWaiter{n: n}
	g.queue = append(g.queue, w)
	if deadline.IsZero() {
		g.waits += n
		*deadline = time.Now().Add(l.set.Timeout)
	}
	g.mu.Unlock()
	came := l.awaitGrant(ctx, ch, *deadline)
	at := l.localNow()
	g.mu.Lock()
	if w.done {
		*res = w.res
		g.mu.Unlock()
		return at, waitServed
	}
	w.gone = true
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
func (g *grant) reject(p *plan, at int64, res *Result) Path {
	defer g.mu.Unlock()
	if !g.noSlot {
		return PathNone
	}
	g.knocked = at
	*res = Result{Limit: int(p.rate), RetryAfter: time.Duration(max(g.full, g.retryAt)-at) * time.Microsecond,
		ResetAfter: time.Duration(max(0, g.resetAt-at)) * time.Microsecond}
	return PathShield
}

// demand is the pair's allowed events in the last Prefetch, its rate, or
// the events of its calls that waited for a grant in it, when more (they
// were not allowed while they waited, and are calls of the pair all the
// same): a grant holds at most that many slots (beside the call that
// asks; see ask).
func (g *grant) demand() int64 { return max(g.prev, g.cur, g.waitsPrev, g.waits) }

// ask caps want, the slots a request asks for, at capSlots (see request):
// a slot costs Redis a few µs (its ZADD member, its trim, its Lua string),
// and a grant Redis takes longer to make than Prefetch lapses on its way
// while the pair's calls wait for it. The caller holds g.mu.
func (g *grant) ask(want int64) int64 {
	if g.capSlots > 0 {
		return max(1, min(want, g.capSlots))
	}
	return want
}

// askFor asks Redis at now for want slots of k's meter into g, whose
// asking the caller set, giving back backs (what earlier grants left); the
// grant becomes g's live one or its next (see install), and asking is
// closed.
func (l *Limiter) askFor(ctx context.Context, conn *redisConn, g *grant, p *plan, k lkey, want, now int64, backs []grantBack) {
	id := l.member(l.seq.Add(1)) + "g"
	// The grant's time: Redis' usable and empty run from the time it
	// took the slots at, its TIME, no earlier than the clock's reading
	// as the request leaves; or, when the process sends its own time
	// (Options.Clock, a quota's period), now, which may be earlier.
	sent := min(now, l.localNow())
	rep, ok := l.askGrant(ctx, conn, p, k, want, id, backs, now)
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
	g.noSlot, g.wanted = false, 0
	nx := nextGrant{p: *p, id: id, slots: got, until: sent + rep.usable, count: rep.count,
		at: rep.at, mark: rep.mark, empty: sent + rep.empty}
	if rep.pace > 0 {
		l.paced(g, p, sent, want, rep.pace, nx.empty)
	}
	l.install(g, k, nx, l.localNow())
	// The process' own count holds the grant's slots, stamped at the
	// grant's last instant: one entry for the grant instead of one a use,
	// no earlier than any use (so that the degraded share counts them a
	// window after their uses at least), and in the window or period
	// Redis took them in. What goes back unused leaves it (leftover).
	l.local.addEvents(k, p, nx.until-1, got, "", false)
	// A bucket's reply carries Redis' whole state, as a decision's does:
	// the own count merges it, keeping the later (see localShard.mirror),
	// so that it counts the other instances' events too, and a fallback
	// right after a grant starts from the fleet's bucket at its share, as
	// it does after a decision on Redis, not from this process' grants
	// alone (TestPrefetchFleetKill/gcra: it admitted its share's burst on
	// top of the fleet's at the kill).
	l.local.copyBucket(k, p, sent, rep.empty)
	l.prefetch.grants.Add(1)
	l.prefetch.granted.Add(uint64(got))
	if l.closed.Load() {
		l.giveBackLater(g, k) // Close gave back what it found already
	}
}

// noSlot notes in g that Redis had no slot for a request sent at sent for
// want (none: the retry and reset of a rejection of one event, µs from its
// reply, or nil when the grant was refused for another reason): no request
// is made before Prefetch from sent, and under a rule without a penalty,
// the shield on, none before a slot frees (within Options.ShieldMax); the
// pair's calls are rejected in-process meanwhile (see reject). Slots that
// give-backs and Resets free are left to that request, as the hot-key
// shield leaves them. The caller holds g.mu.
func (l *Limiter) noSlot(g *grant, p *plan, sent, want int64, none []int64) {
	g.full = sent + p.prefetch
	g.noSlot = none != nil && !p.penalize && l.set.ShieldMax >= 0
	if !g.noSlot {
		return
	}
	at := l.localNow()
	g.retryAt, g.resetAt, g.wanted = at+none[0], at+none[1], want
	if sm := int64(l.set.ShieldMax / time.Microsecond); sm > 0 {
		g.full = max(g.full, min(g.retryAt, at+sm))
	} else {
		g.full = max(g.full, g.retryAt)
	}
}

// paced notes in g that Redis granted less than was asked (want, sent at
// sent) of a meter that frees room continuously: the next request waits
// pace µs (lua/grant.lua), within Options.ShieldMax, so that it finds more
// than the little freed since, and meanwhile the calls the grant's slots
// cannot take are rejected in-process as when Redis had no slot (see
// reject), RetryAfter at that request, ResetAfter at empty. The caller
// holds g.mu.
func (l *Limiter) paced(g *grant, p *plan, sent, want, pace, empty int64) {
	g.retryAt, g.full = sent+pace, sent+pace
	if sm := int64(l.set.ShieldMax / time.Microsecond); sm > 0 {
		g.full = min(g.full, sent+max(sm, p.prefetch))
	}
	g.noSlot = !p.penalize && l.set.ShieldMax >= 0
	g.resetAt, g.wanted = empty, want
}

// retire closes g's grant: what it left unused goes back with the pair's
// next request, and what was to go back with it already (a ban closed a
// grant in between) through the write-back's loop. The caller holds g.mu.
func (l *Limiter) retire(g *grant, k lkey) {
	if b, ok := g.leftover(k); ok {
		if g.pending.id != "" {
			l.prefetch.backs.add(g.pending, maxOwedSettles)
			l.kickWriteBack()
		}
		g.pending = b
	}
}

// giveBackLater closes g's grant and owes what it and the one before it
// did not use to Redis, for the write-back's loop, woken at once. The
// caller holds g.mu.
func (l *Limiter) giveBackLater(g *grant, k lkey) {
	if bs := g.drop(k); len(bs) > 0 {
		for _, b := range bs {
			l.prefetch.backs.add(b, maxOwedSettles)
		}
		l.kickWriteBack()
	}
}

// useGrant allows the call for n events at now from g into res (the
// process' own count holds the grant's slots already: see askFor), and
// unlocks g.
// Remaining is the log's count at the grant, less what this process used of
// it since; ResetAfter when the slot's stamp leaves the window. When the
// grant runs low (less than a quarter of the pair's demand left, or an
// eighth of its Prefetch, or what is left lasts less than a request's
// round trip at the pair's rate), and no next grant waits, this call asks
// for the next before it returns (it is allowed already), so that the
// pair's other calls need not wait for it: for the pair's demand less what
// this grant still serves before it lapses, as the next one's slots are
// used after this one's.
func (l *Limiter) useGrant(conn *redisConn, g *grant, k lkey, n, now int64, res *Result) {
	g.used += n
	g.cur += n
	p := g.p
	*res = g.result(now)
	demand, left, rest := g.demand(), g.slots-g.used, g.until-now
	serves := min(left, demand*rest/p.prefetch) // at the pair's rate, before it lapses
	low := 4*left < demand || 8*rest < p.prefetch || serves*p.prefetch < g.lat*demand || rest < g.lat
	want := demand - serves
	refresh := g.asking == nil && g.next.id == "" && now >= g.full && low && want > 0
	want = g.ask(want)
	var backs []grantBack
	if refresh {
		g.asking, g.queue = make(chan struct{}), nil
		if g.pending.id != "" {
			backs, g.pending = []grantBack{g.pending}, grantBack{}
		}
	}
	g.mu.Unlock()
	l.prefetch.used.Add(uint64(n))
	if refresh {
		ctx, cancel := context.WithTimeout(context.Background(), l.set.Timeout)
		defer cancel()
		l.request(ctx, conn, g, &p, k, want, backs)
	}
}

// minCapSlots is the least g.capSlots halves a request to.
const minCapSlots = 64

// request is askFor at the clock's reading now (after any wait, so that
// the slots are stamped no earlier than the grant's end, its time plus
// Prefetch), timed: g.lat learns its round trip, and g.capSlots halves
// the request after a round trip longer than half of Prefetch (down to
// minCapSlots), and doubles after one shorter than a quarter, until it no
// longer caps (see ask).
func (l *Limiter) request(ctx context.Context, conn *redisConn, g *grant, p *plan, k lkey, want int64, backs []grantBack) {
	sent := l.localNow()
	l.askFor(ctx, conn, g, p, k, want, sent, backs)
	rt := max(0, l.localNow()-sent)
	g.mu.Lock()
	switch {
	case 2*rt > p.prefetch:
		g.capSlots = max(minCapSlots, want/2)
	case 4*rt < p.prefetch && g.capSlots > 0:
		if g.capSlots *= 2; g.capSlots > 1<<40 {
			g.capSlots = 0
		}
	}
	if g.lat == 0 {
		g.lat = rt
	} else {
		g.lat = (3*g.lat + rt) / 4
	}
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
// asked (backs are then owed).
func (l *Limiter) askGrant(ctx context.Context, conn *redisConn, p *plan, k lkey, want int64, id string, backs []grantBack, now int64) (rep grantReply, ok bool) {
	ks := redisKeys(l.set.KeyPrefix, k)
	keys := []string{ks.meter(p.alg), ks.reset}
	if p.penalize {
		keys = append(keys, ks.penalty)
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
	args := l.grantArgs(p, want, extra, id, backs, now)
	var reply []int64
	s, err := l.send(ctx, conn, keys[0], subject{"rule", k.rule}, false, func(ctx context.Context, c rueidis.Client) (err error) {
		reply, err = p.alg.redis.scripts().grant.Exec(ctx, c, keys, args).AsIntSlice()
		return err
	})
	sent := err == nil && s.path == PathRedis
	for _, b := range backs {
		if sent {
			l.prefetch.returned.Add(uint64(b.to - b.from + 1))
		} else {
			l.prefetch.backs.add(b, maxOwedSettles) // giving back twice removes nothing more
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
// slots of p's meter under id, counting extra on top of it, giving back
// backs.
func (l *Limiter) grantArgs(p *plan, want, extra int64, id string, backs []grantBack, now int64) []string {
	instances := int64(1)
	if l.set.fleet != nil {
		instances = max(1, l.set.fleet.Load())
	}
	second, fifth, member := p.alg.redis.args(*p)
	fifthArg := id
	if !member {
		fifthArg = itoa(fifth)
	}
	args := make([]string, 0, 9+5*len(backs))
	args = append(args, l.clockArg(now, p.alg.rules.timed()), itoa(second), itoa(p.rate), itoa(want), fifthArg,
		itoa(p.prefetch), itoa(instances), itoa(extra), id)
	for _, b := range backs {
		args = append(args, b.id, itoa(b.from), itoa(b.to), itoa(b.mark), itoa(b.at))
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
	reserve, lost := l.reserve(conn, p, now)
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
	for _, b := range l.prefetch.backs.take() {
		l.askGrant(ctx, conn, &b.p, b.k, 0, "", []grantBack{b}, l.localNow())
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
			for _, b := range g.drop(k) {
				f.backs.add(b, maxOwedSettles)
			}
			g.mu.Unlock()
		}
	}
	if !f.backs.pending() || l.conn.Load() == nil {
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
		g.drop(k)
		g.full, g.noSlot, g.wanted = 0, false, 0 // the log is empty
		g.mu.Unlock()
	}
}

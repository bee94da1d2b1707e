package ratelimit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/rueidis"
)

// Check is one (rule, key) pair of AllowAll.
type Check struct {
	Rule Rule
	Key  string
	N    int // events asked for (0: 1)
}

// AllowAll applies several (rule, key) pairs to one request, such as a
// global, a per-user and a per-IP limit, and allows it only if every pair
// allows it. The pairs are asked in order, each recording its events if it
// allows; the first denial stops the walk: later pairs are not asked, and
// the events the earlier pairs recorded are taken back, so a denied request
// costs no pair anything. (A rule in dry run never denies.)
//
// It returns the Results of the pairs asked: all of them when the request
// is allowed, up to and including the denying one otherwise; the request is
// allowed when the last Result is. The Results of pairs whose events were
// taken back say so: their Remaining counts those events as left. An error stops the walk the same way
// and takes back what was recorded.
//
// Taking back is best effort: while Redis cannot be used, events recorded
// on Redis by the earlier pairs stay recorded (the error is logged). Put the
// pair most likely to deny first, and a denied request rarely records
// anything.
//
// A GCRA pair other than the last is recorded as a reservation (see
// Reserve), so that taking it back frees exactly what it took whatever
// calls came between: a bucket cannot give tokens back by moving its TAT.
// When the request is allowed, that reservation is settled at its cost,
// which on Redis takes one more call for each such pair: put a GCRA pair
// last, where nothing is ever taken back, to save it.
func (l *Limiter) AllowAll(ctx context.Context, checks []Check) ([]Result, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	results := make([]Result, 0, len(checks))
	undos := make([]undo, len(checks))
	for i := range checks {
		c := &checks[i]
		n := int64(c.N)
		if n == 0 {
			n = 1
		}
		// A later pair may deny: a kind whose events cannot be taken
		// back from its meter records them as a reservation (see
		// undo.exact). The last pair is never taken back.
		undos[i].exact = i < len(checks)-1
		res, err := l.ask(ctx, &c.Rule, c.Key, n, false, &undos[i])
		if err != nil {
			l.takeBack(undos[:i], results[:i])
			return results, err
		}
		results = append(results, res)
		if !res.Allowed {
			l.takeBack(undos[:i], results[:i])
			return results, nil
		}
		if res.DryRun {
			undos[i] = undo{} // a dry run's rejection recorded nothing
		}
	}
	for i := range undos {
		if u := &undos[i]; u.exact && (u.local || u.onRedis) {
			l.keepAsTaken(ctx, u) // the request is allowed: its record is not needed
		}
	}
	return results, nil
}

// undo is what one allowed call recorded: events in the local limiter at a
// time, and, when Redis decided, events in Redis under the call's member id.
type undo struct {
	k       lkey
	p       plan
	n       int64
	local   bool  // events were recorded (or mirrored) locally at now
	now     int64 // µs
	conn    *redisConn
	key     string // the Redis log or counter key
	member  string // the call's member id
	win     int64  // approximate rule: the window Redis recorded the events in
	onRedis bool   // Redis decided the call: its events are in Redis too
	lease   bool   // the call is an Acquire (see lease.go)
	reserve bool   // the call is a Reserve (see reserve.go)
	// exact: the call is an AllowAll pair of a kind that keeps records
	// (see recordKeeper) that a later pair may undo: it is recorded as a
	// reservation, taken back as one cancelled, and settled at its cost
	// once the request is allowed.
	exact bool
	rec   uint64 // the number of the call whose record holds the events (see records), 0: none
}

// named reports whether the call's events are recorded under an id of
// their own wherever they are (an Acquire's, a Reserve's), so that they
// can be found later, written back by the write-back included. u may be
// nil.
func (u *undo) named() bool { return u != nil && (u.lease || u.reserve || u.exact) }

// records reports whether the call's events are recorded under its id in
// a meter that keeps records by id (see recordKeeper): a Reserve's, or an
// exact AllowAll pair's, of such a kind. u may be nil.
func (u *undo) records() bool { return u != nil && (u.reserve || u.exact) && u.p.keepsRecords() }

// recordAs notes that the call numbered seq records its events under seq
// when it records them by id (see records): in this process' own count
// (see hold), and under its member id in Redis' meter (<kind>.hold). It
// returns the id, or 0. u may be nil.
func (u *undo) recordAs(seq uint64) uint64 {
	if !u.records() {
		return 0
	}
	u.rec = seq
	return seq
}

// recordID is the id the call's events are recorded under in this
// process' meter when it keeps records by id, or 0 (see records): the
// number of the call (l.seq) whose member id names the record on Redis.
// u may be nil.
func (u *undo) recordID() uint64 {
	if u.records() {
		return u.rec
	}
	return 0
}

// at notes that the call decided locally at now. u may be nil.
func (u *undo) at(now int64) {
	if u != nil {
		u.local, u.now = true, now
	}
}

// onRedisCall notes that Redis decided the call under its member id (an
// approximate rule's events in window win), and that the decision was
// mirrored locally at mirrored. u may be nil.
func (u *undo) onRedisCall(conn *redisConn, key, member string, win, mirrored int64) {
	if u != nil {
		u.conn, u.key, u.member, u.win, u.onRedis = conn, key, member, win, true
		u.at(mirrored)
	}
}

// takeBack removes the events the allowed calls of us recorded, and
// counts them as left again in their results rs, if not nil: a Remaining that counts
// them, and no ResetAfter for a state they alone filled. It asks Redis
// without waiting on a caller's context: the request is over.
func (l *Limiter) takeBack(us []undo, rs []Result) {
	for i := range us {
		u := &us[i]
		if rs != nil && (u.local || u.onRedis) {
			r := &rs[i]
			r.Remaining = min(r.Remaining+int(u.n), r.Limit)
			if r.Remaining == r.Limit {
				r.ResetAfter = 0
			}
		}
		if u.local {
			l.local.unrecord(u.k, &u.p, u.now, u.n, u.recordID())
		}
		if !u.onRedis {
			continue
		}
		err := l.undoOnRedis(context.Background(), u.conn, u, u.key, u.n, fmt.Sprintf("taking back %d events", u.n))
		if err != nil {
			l.log.Log(logOutage, slog.LevelWarn, "ratelimit: AllowAll could not take events back", "err", err)
		}
	}
}

// undoOnRedis takes back from key the n events u's call recorded under its
// member id (lua/undo.lua, composed for u's kind); what says what is not
// done when Redis cannot be used.
func (l *Limiter) undoOnRedis(ctx context.Context, conn *redisConn, u *undo, key string, n int64, what string) error {
	third, fourth := u.p.alg.redis.undoArgs(u.p, u.win)
	args := []string{u.member, itoa(n), itoa(third), itoa(fourth)}
	return l.sendWithoutFallback(ctx, conn, key, subject{"rule", u.k.Rule}, what, false,
		func(ctx context.Context, c rueidis.Client) error {
			return u.p.alg.redis.scripts().undo.Exec(ctx, c, []string{key}, args).Error()
		})
}

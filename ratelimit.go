package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/breaker"
	"github.com/ratelimit-go/ratelimit/internal/clock"
	"github.com/ratelimit-go/ratelimit/internal/crowd"
	"github.com/ratelimit-go/ratelimit/internal/fleet"
	"github.com/ratelimit-go/ratelimit/internal/logthrottle"
	"github.com/ratelimit-go/ratelimit/internal/redisio"
	"github.com/ratelimit-go/ratelimit/internal/script"
	"github.com/redis/rueidis"
)

// Limiter decides whether callers may proceed. It keeps an exact sliding
// log per (rule, key) in Redis, or in process when it has no Redis or Redis
// cannot be used. Every method is safe for concurrent use.
type Limiter struct {
	set     settings
	local   *localStore
	changes *breaker.Queue
	log     *logthrottle.Log[logKind]

	deadlines *redisio.SharedDeadline // bounds Redis calls by Options.Timeout

	remote bool                      // a Redis is configured
	conn   atomic.Pointer[redisConn] // nil until a client exists
	owned  bool                      // Close closes the client

	id  string        // random per Limiter: the start of every member it writes
	seq atomic.Uint64 // the rest of the member

	clock clock.Process // the local path's time when Options.Clock is nil

	shed    atomic.Uint64 // decisions shed by admission control
	outages atomic.Uint64 // decisions made without Redis because it could not be used

	wbKick chan struct{} // wakes the write-back (see writeback.go)

	heartbeatStarved atomic.Bool // the last heartbeat found no admission slot to spare
	writeBackStarved atomic.Bool // the last write-back batch found none
	hbKick           chan struct{}
	beating          sync.Mutex // one heartbeat at a time; guards withdrawn
	withdrawn        bool       // Close withdrew the Limiter from the fleet
	// fleet is what the heartbeats told of the other Limiters, for the
	// fleet's reserve (see fleet.go).
	fleet    *fleet.View
	settling sync.Mutex // one settling heartbeat at a time (see settled)

	leases   leaseSet   // the leases handed out (see lease.go)
	settles  settles    // the reservations' counts, and what their settles owe Redis (see reserve.go)
	prefetch prefetcher // the grants of the pairs of rules with Prefetch (see prefetch.go)

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{}  // closed by Close
	workers   sync.WaitGroup // goroutines that Close waits for
}

// redisConn holds a client and the breakers in front of it; an atomic
// pointer to it can be swapped in once Dial has connected.
type redisConn struct {
	client   rueidis.Client
	breakers breaker.Set
}

func (l *Limiter) newConn(c rueidis.Client) *redisConn {
	conn := &redisConn{client: &script.Client{Client: c}, breakers: newBreakers(c.Mode() == rueidis.ClientModeCluster, &l.set, l.changes)}
	if conn.breakers.Cluster() {
		l.workers.Add(1)
		go func() {
			defer l.workers.Done()
			conn.followMasters(l.done, l.set.Timeout)
		}()
	}
	if l.set.HeartbeatInterval > 0 {
		l.workers.Add(2)
		go func() {
			defer l.workers.Done()
			l.heartbeats(conn)
		}()
		go func() {
			defer l.workers.Done()
			l.watchConn(conn)
		}()
	}
	return conn
}

// New returns a Limiter that keeps its state in Redis through client. It
// does not wait for Redis: the first call contacts it, and so does the
// Limiter's announcement to the fleet (see Options.HeartbeatInterval), from
// a goroutine of its own. With a nil client it returns a local-only limiter,
// whose results are never Degraded and which announces nothing.
//
// The client stays the caller's: Close does not close it. Its
// ClientOption.Dialer.Timeout bounds how long a reconnect may hold calls up
// (rueidis' default is 5s, longer than Options.Timeout); set it to about
// Options.Timeout, as Dial does.
func New(client rueidis.Client, opts Options) (*Limiter, error) {
	l, err := newUnstarted(client, opts)
	if err != nil {
		return nil, err
	}
	if client != nil {
		l.startWriteBack()
	}
	return l, nil
}

// newUnstarted is New without the write-back's goroutine (see
// startWriteBack).
func newUnstarted(client rueidis.Client, opts Options) (*Limiter, error) {
	l, err := newLimiter(opts, client != nil)
	if err != nil {
		return nil, err
	}
	if client != nil {
		l.conn.Store(l.newConn(client))
	}
	return l, nil
}

// startWriteBack starts the goroutine that writes back what was decided
// without Redis (see writeBackLoop); Close stops it.
func (l *Limiter) startWriteBack() {
	l.workers.Add(1)
	go func() {
		defer l.workers.Done()
		l.writeBackLoop()
	}()
}

func newLimiter(opts Options, remote bool) (*Limiter, error) {
	set, err := opts.settings()
	if err != nil {
		return nil, err
	}
	var raw [9]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("ratelimit: drawing the limiter id: %w", err)
	}
	l := &Limiter{
		set:       set,
		local:     newLocalStore(set.LocalCapacity),
		changes:   breaker.NewQueue(),
		log:       logthrottle.New(set.Logger, set.LogInterval, logKinds),
		deadlines: redisio.NewSharedDeadline(set.Timeout),
		clock:     clock.NewProcess(),
		remote:    remote,
		id:        base64.RawURLEncoding.EncodeToString(raw[:]),
		done:      make(chan struct{}),
		wbKick:    make(chan struct{}, 1),
		hbKick:    make(chan struct{}, 1),
		fleet:     fleet.New(set.fleet),
	}
	l.local.owing.SetMax(int64(set.WriteBackMax))
	if remote {
		l.workers.Add(1)
		go func() {
			defer l.workers.Done()
			l.changes.Run(l.done, l.announce)
		}()
	}
	return l, nil
}

// announce reports a breaker state change to the log (each kind at most
// once per LogInterval) and to the user's hook (every one, in order).
func (l *Limiter) announce(bc breaker.Change) {
	c := BreakerChange{Breaker: bc.Name, From: breakerState(bc.From), To: breakerState(bc.To)}
	kind, level, msg := logHalfOpen, slog.LevelInfo, "ratelimit: redis circuit breaker half-open; probing redis"
	switch c.To {
	case BreakerOpen:
		kind, level, msg = logOpen, slog.LevelWarn, "ratelimit: redis circuit breaker open; deciding locally"
		l.fleet.Opened(l.clock.Now()) // the other instances' too, likely: see reserve
	case BreakerClosed:
		kind, msg = logClosed, "ratelimit: redis circuit breaker closed; deciding on redis again"
		l.kickWriteBack()
		l.kickHeartbeat()
	}
	l.log.Log(kind, level, msg, "breaker", c.Breaker, "from", c.From.String(), "to", c.To.String())
	if l.set.OnBreakerChange != nil {
		l.set.OnBreakerChange(c)
	}
}

// Allow reports whether one event for key may happen now under rule, and
// records it if so. It is AllowN(ctx, rule, key, 1).
func (l *Limiter) Allow(ctx context.Context, rule Rule, key string) (Result, error) {
	return l.ask(ctx, &rule, key, 1, false, nil)
}

// AllowN reports whether n events for key may happen now under rule, and
// records all n if so; a rejected call records nothing. n must be between 1
// and rule.Limit.Rate, or a GCRA rule's Burst (ErrInvalidN otherwise).
//
// A rejection is a Result with Allowed == false and a nil error. Errors are
// invalid input, ErrClosed, the caller's ctx ending (ctx.Err()), and Redis
// error replies that mean misuse (ErrRedis); an unreachable, slow or
// overloaded Redis is no error: the call is decided by Options.Degraded and
// the Result is Degraded.
func (l *Limiter) AllowN(ctx context.Context, rule Rule, key string, n int) (Result, error) {
	return l.ask(ctx, &rule, key, int64(n), false, nil)
}

// Peek reports what Allow would answer now, recording nothing and counting
// no violation. Its Remaining is Rate - count.
func (l *Limiter) Peek(ctx context.Context, rule Rule, key string) (Result, error) {
	return l.ask(ctx, &rule, key, 1, true, nil)
}

// ask makes one decision (see route), applies the rule's dry run and reports the
// decision to Options.OnDecision. When u is not nil it learns what the call
// recorded (see AllowAll).
//
// The decision is made into the named result res, which is what the caller
// reads: a local Result returned would be copied as a block just after its
// fields were stored one by one, which stalls the processor on every call.
func (l *Limiter) ask(ctx context.Context, r *Rule, key string, n int64, peek bool, u *undo) (res Result, err error) {
	rep := l.reporter()
	var path Path
	path, err = l.route(ctx, r, key, n, peek, u, &res)
	if err == nil {
		res.dryRun(r.DryRun)
	}
	if rep.on() {
		rep.report(Decision{Rule: *r, Key: key, N: int(n), Peek: peek, Reserve: u != nil && u.reserve, Result: res, Err: err, Path: path})
	}
	return res, err
}

// route decides a call on the path the limiter's state allows: Redis, the
// shield, or without Redis. When u is not nil it learns what the call
// recorded, so that AllowAll can take it back.
func (l *Limiter) route(ctx context.Context, r *Rule, key string, n int64, peek bool, u *undo, res *Result) (Path, error) {
	if err := l.usable(ctx); err != nil {
		return PathNone, err
	}
	// The rule's plan, compiled once for every call with an equal rule
	// (see cachedPlan); it may be shared, so a quota's period is set on
	// a copy. The buffers are zeroed only when they are used.
	p := r.hit()
	if p == nil {
		var buf plan
		var err error
		if p, err = r.cachedPlan(&buf); err != nil {
			return PathNone, err
		}
	}
	if err := p.takes(r, n, peek, u); err != nil {
		return PathNone, err
	}
	var k lkey
	if !k.Set(r.Name, key) {
		return PathNone, emptyKey(r.Name)
	}
	// The call's time, read once: the Clock's reading is the time every
	// path decides at. Without a Clock the script reads Redis' TIME, and
	// now is the process clock for the local paths.
	now := l.localNow()
	if p.alg.rules.timed() {
		var buf plan
		buf = *p
		p = &buf
		*p = p.alg.rules.setTime(*p, now)
	}
	if u != nil {
		*u = undo{k: k, p: *p, n: n, lease: u.lease, reserve: u.reserve, exact: u.exact && p.keepsRecords()}
	}
	if !l.remote {
		if u.records() {
			u.rec = l.seq.Add(1) // the id its record is kept under
		}
		l.alone(p, &k, n, peek, u, now, res)
		return PathLocal, nil
	}
	return l.routeRemote(ctx, r, p, &k, n, peek, u, now, res)
}

// routeRemote is route's way for a Limiter with Redis, once the call's
// plan p, key k and time now are known: without Redis while Dial has not
// connected, from the grants a prefetching rule holds, or on Redis (see
// onRedis).
func (l *Limiter) routeRemote(ctx context.Context, r *Rule, p *plan, k *lkey, n int64, peek bool, u *undo, now int64, res *Result) (Path, error) {
	conn := l.conn.Load()
	if conn == nil {
		s := sent{path: PathLocal}
		if u.named() && !peek {
			seq := l.seq.Add(1)
			s.member = l.member(seq) // Dial has not connected yet: see below
			u.member, u.rec = s.member, seq
		}
		*res = l.withoutRedis(r, p, *k, n, peek, s, u, now)
		return PathLocal, nil
	}
	if p.prefetch > 0 && u == nil && !peek {
		return l.prefetched(ctx, conn, r, p, *k, n, now, res)
	}
	path, err := l.onRedis(ctx, conn, r, p, *k, n, peek, u, now, res)
	if res.Banned {
		l.bannedElsewhere(*k) // a ban stops this process' admits from slots at once
	}
	return path, err
}

// onRedis decides a call on Redis (or from the shield), or, when the
// pipeline says Redis cannot be used, without it. A call whose pair is
// crowded waits for a seat, and a call admission control would shed waits
// for its pair's call on the way, when one is (see crowd.go).
func (l *Limiter) onRedis(ctx context.Context, conn *redisConn, r *Rule, p *plan, k lkey, n int64, peek bool, u *undo, now int64, res *Result) (Path, error) {
	// What this process' own count adds to Redis' decision, with the
	// call's events reserved in it when they fit (see mirror.go).
	legs := [1]leg{{k: &k, p: p, n: n, peek: peek, queue: !peek && l.set.ShieldMax >= 0 && !p.alg.rules.leased(), carry: true}}
	if !p.alg.rules.leased() {
		legs[0].reserve, legs[0].lost, legs[0].lostAt = l.reserve(conn, p, now)
	}
	var w crowd.Waiting
	defer w.Stop()
	for {
		path, seat, err := l.redisOnce(ctx, conn, r, legs[:], u, now, res)
		if seat == nil {
			return path, err
		}
		ranOut, err := await(ctx, &w, l.local, &legs[0], seat, l.set.Timeout)
		if err != nil {
			return PathNone, err
		}
		now = l.afterWaiting(p.alg.rules.timed(), now)
		if ranOut {
			if d, ok := l.local.ranOut(&legs[0], now); ok {
				d.fill(res, p.rate, false)
				return PathShield, nil
			}
		}
	}
}

// afterWaiting returns the time a call read at now goes on at after it
// waited for its pair's calls to land (see crowd.go): the process clock's
// reading again, when the script reads Redis' TIME (no Options.Clock, and
// the call's time is not fixed, timed, as a quota's period fixes it, see
// sendsNow).
// Redis then decides the call when it arrives, so the process' own count
// must be held at that time too: read at the call's first reading, up to
// half of Timeout earlier, it counts every event allowed while the call
// waited and none of the time that passed, and holds back (held) what
// Redis would allow. Under a crowd at a GCRA bucket or an approximate
// counter, whose count falls with every µs, each such call was rejected on
// Redis on held, and woke the crowd to probe again.
func (l *Limiter) afterWaiting(timed bool, now int64) int64 {
	if l.sendsNow(timed) {
		return now
	}
	return max(now, l.localNow())
}

// redisOnce is one try of onRedis at now: it returns a seat to wait for,
// and nothing else, when the call must wait for its pair's calls on the
// way.
func (l *Limiter) redisOnce(ctx context.Context, conn *redisConn, r *Rule, legs []leg, u *undo, now int64, res *Result) (Path, *crowd.Seat, error) {
	lg := &legs[0]
	p, k, n, peek := lg.p, *lg.k, lg.n, lg.peek
	if path, ok := l.unsent(conn, r, lg, u, now, res); ok {
		return path, nil, nil
	}
	if testHookShieldLooked != nil {
		testHookShieldLooked()
	}
	seq := l.seq.Add(1)
	lg.id = u.recordAs(seq)
	if _, w := l.local.holdLegs(legs, now); w != nil {
		return PathNone, w, nil
	}
	hd := &lg.hd
	var keys [3]string
	var argv [callArgs]string
	sc, ks, args := l.encode(&keys, &argv, lg, u, seq, now)
	var d decision
	s, err := l.sendHeld(ctx, conn, ks[0], subject{"rule", r.Name}, legs, now, func(ctx context.Context, c rueidis.Client) (err error) {
		d, err = redisDecision(ctx, c, sc, p, now, ks, args)
		return err
	}, nil)
	if err != nil {
		return PathRedis, nil, err
	}
	if s.path == PathShed && lg.queue {
		// Admission control had no slot: while a call of the pair is on
		// its way, wait for its answer instead (see crowd.go).
		if _, w := l.local.onItsWay(legs); w != nil {
			return PathNone, w, nil
		}
	}
	if s.path != PathRedis {
		return l.notOnRedis(r, lg, s, u, seq, now, res), nil, nil
	}
	l.local.record(k, p, now, l.receivedAt(now), n, peek, &d, hd, lg.shieldMax(&l.set))
	if d.allowed && !peek && u != nil {
		u.onRedisCall(conn, ks[0], l.callMember(p, args, seq), d.win, now)
	}
	d.fill(res, p.rate, false)
	return PathRedis, nil, nil
}

// notOnRedis decides without Redis the call of lg, numbered seq, that the
// pipeline did not end on Redis (s says why), and ends the hold it took
// on the breaker (see sent.release).
func (l *Limiter) notOnRedis(r *Rule, lg *leg, s sent, u *undo, seq uint64, now int64, res *Result) Path {
	if (s.mayHaveRun() || u.named()) && !lg.peek {
		// A lease or a reservation is written back under its own id, so
		// that its Renew, Release or Settle finds it in Redis.
		s.member = l.member(seq) // its own string: what is owed may wait long
		if u != nil {
			u.member = s.member
		}
	}
	*res = l.withoutRedis(r, lg.p, *lg.k, lg.n, lg.peek, s, u, now)
	s.release()
	return s.path
}

// unsent answers a call of onRedis at now that is not to be sent: one
// whose breaker is resting (decided now, holding nothing for a call that
// is not sent), or one the shield holds a rejection for. A call given a
// seat after waiting is sent.
func (l *Limiter) unsent(conn *redisConn, r *Rule, lg *leg, u *undo, now int64, res *Result) (Path, bool) {
	if lg.seat != nil {
		return PathNone, false
	}
	p, k, n, peek := lg.p, *lg.k, lg.n, lg.peek
	// A rejection cached after the call's time answers it when the call
	// waited for it, or when the time is the process' own, which never
	// goes back: the call came late (see shielded).
	late := lg.waited || l.set.Clock == nil
	if b := pairBreaker(&conn.breakers, l.set.KeyPrefix, &k, p); b.Resting() && b.Hold() {
		if testHookResting != nil {
			testHookResting()
		}
		path := l.resting(r, p, k, n, peek, u, now, late, b, res)
		b.Release()
		return path, true
	}
	if l.set.ShieldMax >= 0 {
		if d, ok := l.local.shielded(k, p, now, n, peek, late); ok {
			d.fill(res, p.rate, false)
			return PathShield, true
		}
	}
	return PathNone, false
}

// encode returns the script for the call of lg at now, numbered seq, and
// writes its keys and arguments into keys and argv (see encodeCall): a
// peek sends n as 0, a plan the call's time fixed (a quota's period) is
// decided at that time whatever the clock, an Acquire sends the leases
// Redis may have lost count in this very decision (see
// lua/concurrency.lua), and a Reserve of a kind whose events have no
// member runs allow.lua's Reserve variant (see withRecord).
func (l *Limiter) encode(keys *[3]string, argv *[callArgs]string, lg *leg, u *undo, seq uint64, now int64) (*script.Script, []string, []string) {
	sentN := lg.n
	if lg.peek {
		sentN = 0
	}
	var leases []string
	if u != nil && u.lease {
		leases = l.leases.onRedis(*lg.k, now)
	}
	p := lg.p
	ks, args := encodeCall(keys, argv, l.set.KeyPrefix, *lg.k, p, now, l.sendsNow(p.alg.rules.timed()), sentN, l.id, seq, &lg.hd, leases)
	if u != nil && (u.reserve || u.exact) && !p.alg.back.named() {
		ks, args = l.withRecord(ks, args, lg, seq, now)
		return p.alg.redis.scripts().reserve[b2i(p.penalize)], ks, args
	}
	return p.alg.redis.scripts().allow[b2i(p.penalize)], ks, args
}

// member returns the member id of the Limiter's call numbered seq: unique
// across processes (the Limiter's random id) and calls (seq, from l.seq).
// encodeCall writes the same bytes without building the string.
func (l *Limiter) member(seq uint64) string { return l.id + strconv.FormatUint(seq, 10) }

// callMember returns the member id of the call numbered seq whose script
// arguments are args (see member): its ARGV[5] when the kind sends it
// there, so that it costs no second string. The id then keeps the call's
// arguments in memory: for what lives about as long as a call or a lease
// (an undo, a lease's id), not for what the write-back may owe.
func (l *Limiter) callMember(p *plan, args []string, seq uint64) string {
	if _, _, byMember := p.alg.redis.args(*p); byMember {
		return args[4]
	}
	return l.member(seq)
}

// takes returns what is wrong with a call for n events under p, the plan
// of r, made by the method u says (nil: a rate method's): n out of bounds,
// or a method that does not take the rule's kind.
func (p *plan) takes(r *Rule, n int64, peek bool, u *undo) error {
	switch {
	case n < 1 || n > p.rate:
		return p.invalidN(n, r.Name)
	case u != nil && u.lease && !p.alg.rules.leased():
		return fmt.Errorf("%w: rule %q is a %v rule: Acquire takes a Concurrency rule", ErrInvalidRule, r.Name, r.Kind)
	case p.alg.rules.leased() && !peek && (u == nil || !u.lease):
		return fmt.Errorf("%w: rule %q is a concurrency rule: take a slot with Acquire, and give it back with Release", ErrInvalidRule, r.Name)
	}
	return nil
}

// invalidN is the error of a call for n events that can never fit under p.
func (p *plan) invalidN(n int64, rule string) error {
	return fmt.Errorf("%w: n = %d is outside 1..%d, the %s of rule %q", ErrInvalidN, n, p.rate, p.alg.rules.capacity(), rule)
}

// withRecord adds to the keys and arguments of a Reserve's call of lg at
// now, numbered seq, what allow.lua's Reserve variant reads: every key of
// the pair, ARGV[6], and the reservation's record and how long it is kept,
// or, for a kind that keeps the record in its meter, its member id (see
// lua/allow.lua).
func (l *Limiter) withRecord(ks, args []string, lg *leg, seq uint64, now int64) ([]string, []string) {
	pk := redisKeys(l.set.KeyPrefix, *lg.k)
	if len(args) == 5 {
		args = append(args[:5:5], "0")
	}
	if lg.p.keepsRecords() {
		return []string{ks[0], pk.Penalty, pk.Reset}, append(args[:len(args):len(args)], l.member(seq))
	}
	keys := []string{ks[0], pk.Penalty, pk.Reset, recordKey(l.set.KeyPrefix, *lg.k, l.member(seq))}
	return keys, append(args[:len(args):len(args)], itoa(ttl(lg.p.kept(now))))
}

// redisDecision runs s, the rule's script, for one call.
func redisDecision(ctx context.Context, c rueidis.Client, s *script.Script, p *plan, now int64, keys []string, args []string) (decision, error) {
	resp := s.Exec(ctx, c, keys, args)
	if err := resp.Error(); err != nil {
		return decision{}, err
	}
	d, err := parseReply(resp, p, now)
	if err != nil {
		return decision{}, &callError{cause: misuse, err: err}
	}
	return d, nil
}

// testHookShieldLooked, when set by a test, runs when a call of onRedis
// looked at the shield and found nothing, before it is held.
var testHookShieldLooked func()

// testHookResting, when set by a test, runs when a call begins to be
// decided without Redis because its breaker rests.
var testHookResting func()

// resting decides a call whose breaker is resting (open, and not yet due
// to let a probe through: send would not send it) as redisOnce would, with
// its shard's lock taken once instead of for the shield, the hold, its
// release and the decision: from the shield when it holds a rejection
// (see shielded; late as redisOnce passes it), otherwise as withoutRedis
// decides it.
func (l *Limiter) resting(r *Rule, p *plan, k lkey, n int64, peek bool, u *undo, now int64, late bool, b *breaker.Breaker, res *Result) Path {
	s := sent{path: PathLocal, b: b, cause: errBreakerOpen}
	if u.named() && !peek {
		seq := l.seq.Add(1)
		s.member = l.member(seq) // see redisOnce
		if u != nil {
			u.member, u.rec = s.member, seq
		}
	}
	shield := l.set.ShieldMax >= 0
	if !shield || l.policy(r) != DegradedLocal {
		if shield {
			if d, ok := l.local.shielded(k, p, now, n, peek, late); ok {
				d.fill(res, p.rate, false)
				return PathShield
			}
		}
		*res = l.withoutRedis(r, p, k, n, peek, s, u, now)
		return PathLocal
	}
	rate := l.set.degradedRate(p.rate)
	share := *p
	share = share.alg.rules.degrade(share, &l.set)
	var d decision
	if l.local.shieldOrAdmit(&d, &k, p, &share, rate, now, n, peek, late, s.member, u.recordID()) {
		d.fill(res, p.rate, false)
		return PathShield
	}
	l.outages.Add(1)
	u.at(now)
	d.fill(res, rate, true)
	return PathLocal
}

// policy is how r is decided while Redis cannot be used.
func (l *Limiter) policy(r *Rule) DegradedPolicy {
	if r.Degraded == DegradedDefault {
		return l.set.Degraded
	}
	return r.Degraded
}

// withoutRedis decides a call without Redis: in a local-only Limiter on the
// local log at the rule's rate, otherwise as the rule's degraded policy says
// (s says why Redis was not used, and which breaker stands in front of the
// key).
func (l *Limiter) withoutRedis(r *Rule, p *plan, k lkey, n int64, peek bool, s sent, u *undo, now int64) Result {
	if !l.remote {
		var res Result
		l.alone(p, &k, n, peek, u, now, &res)
		return res
	}
	if s.path == PathShed {
		l.shed.Add(1)
	} else {
		l.outages.Add(1)
	}
	rate := l.set.degradedRate(p.rate)
	switch l.policy(r) {
	case DegradedAllow:
		remaining := rate
		if !peek {
			remaining = max(0, rate-n)
		}
		return Result{Allowed: true, Limit: int(rate), Remaining: int(remaining), Degraded: true}
	case DegradedDeny:
		retry := l.set.ProbeAfter
		if s.b != nil && s.path == PathLocal {
			retry = s.b.UntilProbe()
		}
		return Result{Limit: int(rate), RetryAfter: retry, Degraded: true}
	}
	u.at(now)
	// What is decided here is decided under the degraded share, and owed
	// to Redis under the rule itself (p).
	share := *p
	share = share.alg.rules.degrade(share, &l.set)
	d := l.local.admit(&k, &share, rate, now, n, peek, p, s.member, u.recordID())
	return d.result(rate, true)
}

// alone decides a call of a local-only Limiter into res: on the local
// log, at the rule's rate.
//
// A call that AllowAll may take back (u), or whose time fixed its plan
// (timed), is decided at its own reading; any other call of the process
// clock at the shard's latest when that is later (see admitAt).
func (l *Limiter) alone(p *plan, k *lkey, n int64, peek bool, u *undo, now int64, res *Result) {
	u.at(now)
	mono := u == nil && l.set.Clock == nil && !p.alg.rules.timed()
	var d decision
	l.local.admitAt(&d, k, p, p.rate, now, mono, n, peek, nil, "", u.recordID())
	d.fill(res, p.rate, false)
}

// receivedAt is when a decision Redis made is copied locally: at the call's
// time now when a Clock is set, and on receipt otherwise, so that the
// shield's deadlines (now + RetryAfter) never mix Redis' clock with the
// process'.
func (l *Limiter) receivedAt(now int64) int64 {
	if l.set.Clock != nil {
		return now
	}
	return l.clock.Now()
}

// Now returns the time the Limiter decides at: Options.Clock's reading,
// or the process clock's when Options.Clock is nil. A calendar quota's
// period is the one that holds it (see Limit.PeriodAt).
func (l *Limiter) Now() time.Time {
	if l.set.Clock != nil {
		return l.set.Clock.Now()
	}
	return time.Now()
}

// sendsNow reports whether a script decides at the call's time rather
// than at Redis' TIME (see lua/now.lua): with Options.Clock set, and for a
// rule whose kind the call's time fixes (timed, a quota's period).
func (l *Limiter) sendsNow(timed bool) bool { return l.set.Clock != nil || timed }

// clockArg is a script's ARGV[1], the time it decides at: now when
// sendsNow, and "" (Redis' TIME) otherwise.
func (l *Limiter) clockArg(now int64, timed bool) string {
	if l.sendsNow(timed) {
		return itoa(now)
	}
	return ""
}

// localNow is the time of the local path, in µs.
func (l *Limiter) localNow() int64 {
	if l.set.Clock != nil {
		return l.set.Clock.Now().UnixMicro()
	}
	return l.clock.Now()
}

// result turns a decision under limit into a Result.
func (d *decision) result(limit int64, degraded bool) Result {
	var r Result
	d.fill(&r, limit, degraded)
	return r
}

// fill sets r to the Result of a decision under limit.
func (d *decision) fill(r *Result, limit int64, degraded bool) {
	remaining := limit - d.count
	if d.banned || remaining < 0 {
		remaining = 0
	}
	// Field by field, every field: a composite literal is built aside
	// and copied, which reads back a block its own small stores just
	// wrote (a stall on every call).
	r.Allowed, r.Limit, r.Remaining = d.allowed, int(limit), int(remaining)
	r.RetryAfter, r.ResetAfter = 0, time.Duration(d.reset)*time.Microsecond
	r.Violations, r.Warned, r.Banned = int(d.violations), d.warned, d.banned
	r.BannedFor, r.Degraded, r.DryRun = 0, degraded, false
	if d.banned {
		r.BannedFor = time.Duration(d.banLeft) * time.Microsecond
	}
	if !d.allowed {
		r.RetryAfter = time.Duration(d.retry) * time.Microsecond
	}
}

// Reset forgets everything about key under rule: its log (and its
// approximate counter), its violations and its ban, in Redis and in the
// local limiter, what the local limiter still owed Redis included. When
// Redis cannot be used it still clears the local state, and returns an
// error wrapping ErrUnavailable and the cause: Redis still holds the old
// state until the write-back applies the Reset there, before anything
// decided after it (see Options.WriteBackMax).
func (l *Limiter) Reset(ctx context.Context, rule Rule, key string) error {
	return l.byHand(ctx, &rule, key, handChange{
		what: fmt.Sprintf("reset of key %q: redis may still hold the old state", key),
		local: func(k lkey, p *plan, now int64) {
			l.local.reset(k, p, now)
			l.leases.lose(k)
			l.settles.resets.reset(k)
			l.voidGrant(k)
		},
		redis: func(keys *pairKeys, p *plan, now int64) (*script.Script, []string, []string) {
			return resetScript, append([]string{keys.Reset, keys.Penalty}, keys.Meters...), []string{itoa(now), itoa(ttl(p.kept(now)))}
		},
		owe: l.local.oweReset,
	})
}

// Close withdraws the Limiter's announcement to the fleet (best effort,
// within Options.Timeout), stops the Limiter's goroutines and, for a
// Limiter made by Dial, closes its client. Later calls return ErrClosed.
// Close is idempotent.
func (l *Limiter) Close() {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.releaseLeases()
		l.returnGrants()
		close(l.done)
		l.workers.Wait()
		l.returnGrants() // what the write-back's loop had taken of them when it stopped, and owed again
		l.logDroppedAtClose()
		l.deadlines.Stop()
		if conn := l.conn.Load(); conn != nil && l.owned {
			conn.client.Close()
		}
	})
}

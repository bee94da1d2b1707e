// Package grant keeps one prefetching pair's slots in a process (see
// docs/prefetch.md): the grant its calls use now and the one that waits for
// it, the calls that wait for a request on its way, the pair's recent rate
// and the size of its next request, and what goes back to Redis unused. It
// knows nothing of Redis, of the Limiter or of the rule's kind: its caller
// asks Redis for grants, decides the calls a grant cannot, and keeps the
// books a Pair reports to ([Books]). The caller's key and plan types are
// its type parameters K and P, carried and never read.
//
// Times are µs of the process' clock; counts are events, a slot each.
//
// # Rules
//
//   - A grant's slots are usable while the clock reads less than its Until
//     ([Pair.Has]).
//   - A grant that comes while the live one still has slots waits for them
//     to be used or to lapse ([Pair.Install]), and becomes live then
//     ([Pair.Current]): a grant asked for early leaves none of them unused.
//   - The calls that wait for a request on its way ([Pair.Enqueue]) are
//     served by the grant it brings as it comes, first come first, before
//     any other call, while it holds their slots.
//   - The pair's rate is its allowed events in the last Prefetch-long
//     bucket of the clock or the one before it, or the events of its calls
//     that waited for a grant in them, when more ([Pair.Demand]).
//   - A call that finds the live grant low asks for the pair's rate less
//     what the grant still serves before it lapses ([Pair.Use]), capped
//     after slow round trips ([Pair.RoundTrip]).
//   - What a grant left unused goes back: slots used+1 .. granted of the
//     live one, all of a next one ([Pair.Drop]).
//   - A request Redis refuses (no slot, or fewer than asked of a meter that
//     frees room continuously) makes the next wait, for Prefetch or until
//     a slot frees ([Pair.Refused], [Pair.Paced]); meanwhile the pair's
//     calls without a slot may be rejected in-process ([Pair.Reject]), and
//     while they keep coming the pair asks again for what it wanted
//     ([Pair.Wanted]).
//
// A Pair is not safe for concurrent use: its caller's lock guards it.
package grant

import "time"

// Terms are what a Pair reads of the rule a grant was made under.
type Terms struct {
	// Rate is the rule's capacity: a Use's Remaining counts down from it.
	Rate int64
	// Prefetch is the rule's Prefetch in µs: the length of the rate's
	// buckets, and of a grant's usable time at most.
	Prefetch int64
	// Records reports whether Redis keeps a grant as a reservation until
	// it is settled (a GCRA bucket's): a grant then goes back even when all
	// its slots were used.
	Records bool
}

// Slots is one grant Redis made: N slots of the member ID, made under the
// plan Plan and its Terms.
type Slots[P any] struct {
	Plan  P
	Terms Terms
	ID    string // the slots' member id: ID:1 .. ID:N ("": no grant)
	N     int64  // the slots granted
	Until int64  // µs: usable while the clock reads less
	Count int64  // the meter's count at the grant, before its slots
	At    int64  // where the slots went (a window's or a period's index)
	Mark  int64  // the pair's last Reset when they were granted
	Empty int64  // µs: the meter is empty then if nothing else comes
}

// Back is what a process gives back of a grant: the slots From .. To of ID
// in Key's meter, made under Plan, which went where At says, under the
// Reset Mark.
type Back[K, P any] struct {
	Key      K
	Plan     P
	ID       string
	From, To int64
	At, Mark int64
}

// Books is where a Pair reports the grants it closes.
type Books[K, P any] interface {
	// Unmirror takes n slots of a grant of k made under p out of the
	// process' own count, where they were counted at at: they go back
	// unused.
	Unmirror(k K, p *P, at, n int64)
	// Owe hands b to what gives it back to Redis later, when it cannot go
	// back with the pair's next request.
	Owe(b Back[K, P])
}

// Use is what a call allowed from a grant reports: Remaining is the meter's
// count at the grant less what this process used of it since (at least 0),
// of Limit; ResetAfter is when the meter is empty if nothing else comes.
type Use struct {
	Limit, Remaining int
	ResetAfter       time.Duration
}

// Waiter is a call waiting for a request on its way (see [Pair.Enqueue]).
type Waiter struct {
	n          int64
	done, gone bool
	use        Use
}

// Served reports whether the grant the request brought served the call,
// and what it reports.
func (w *Waiter) Served() (Use, bool) { return w.use, w.done }

// Leave takes the call out of the queue: it no longer waits.
func (w *Waiter) Leave() { w.gone = true }

// Pair is one pair's grants in the process, and the rate of its allowed
// calls. Make it with [New].
type Pair[K, P any] struct {
	key   K
	books Books[K, P]

	live Slots[P]
	used int64 // of the live grant: ID:1 .. ID:used

	// next is a grant that came while the live one still had slots: its
	// slots are used once the live one's run out or lapse (see Current).
	next Slots[P]
	// pending is what the grant before the live one left unused: it goes
	// back with the pair's next request (see TakePending).
	pending Back[K, P]

	// The pair's allowed events in the current Prefetch-long bucket of the
	// clock and in the one before it, and the events of its calls that
	// waited for a grant in them (see Demand).
	bucket, cur, prev int64
	waits, waitsPrev  int64

	// lat is the round trip of the pair's requests (µs, smoothed): the next
	// grant is asked for while what is left lasts that long at the pair's
	// rate (see Use). capSlots caps the slots a request asks for (see Ask);
	// 0: none.
	lat, capSlots int64

	// queue holds the calls that wait for the request on its way, first
	// come first (see Install).
	queue []*Waiter

	// full (µs): Redis refused the pair's last request, and the next waits
	// until then (see Refused, Paced). With shield, until then the pair's
	// calls without a slot are rejected (see Reject), as a rejection of one
	// event at the request's time answers them, a slot freed at retryAt,
	// the meter empty at resetAt (µs); the last was rejected at knocked;
	// wanted is what the request asked for, what the pair still wants
	// while its calls keep coming (see Wanted).
	full                              int64
	shield                            bool
	retryAt, resetAt, knocked, wanted int64
}

// MinCap is the least a request's cap halves to (see [Pair.RoundTrip]).
const MinCap = 64

// New returns k's Pair, no grant in it yet, under the plan p and its terms
// t, reporting to books.
func New[K, P any](k K, p P, t Terms, books Books[K, P]) Pair[K, P] {
	return Pair[K, P]{key: k, books: books, live: Slots[P]{Plan: p, Terms: t}}
}

// Plan returns the plan of the live grant, or the pair's when it has none.
func (g *Pair[K, P]) Plan() *P { return &g.live.Plan }

// SetPlan sets the pair's plan and terms, which the next grant replaces:
// the caller closed the live grant (the rule changed under its name).
func (g *Pair[K, P]) SetPlan(p P, t Terms) { g.live.Plan, g.live.Terms = p, t }

// Live returns the live grant, and how many of its slots were used.
func (g *Pair[K, P]) Live() (s Slots[P], used int64) { return g.live, g.used }

// Next returns the grant that waits for the live one (ID "": none).
func (g *Pair[K, P]) Next() Slots[P] { return g.next }

// Until returns when the live grant lapses, or the last one did.
func (g *Pair[K, P]) Until() int64 { return g.live.Until }

// Roll moves the rate's buckets to now's.
func (g *Pair[K, P]) Roll(now int64) {
	switch b := floorDiv(now, g.live.Terms.Prefetch); {
	case b == g.bucket+1:
		g.bucket, g.prev, g.cur = b, g.cur, 0
		g.waitsPrev, g.waits = g.waits, 0
	case b > g.bucket:
		g.bucket, g.prev, g.cur = b, 0, 0
		g.waitsPrev, g.waits = 0, 0
	}
}

// floorDiv is a / b rounded down.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Allowed counts n events the pair allowed without a slot (on Redis) in
// the rate, at the clock's reading of the last Roll.
func (g *Pair[K, P]) Allowed(n int64) { g.cur += n }

// Waited counts n events of a call that waits for a grant in the rate (see
// Demand).
func (g *Pair[K, P]) Waited(n int64) { g.waits += n }

// Demand is the pair's allowed events in the last Prefetch, its rate, or
// the events of its calls that waited for a grant in it, when more (they
// were not allowed while they waited, and are calls of the pair all the
// same): a grant holds at most that many slots (beside the call that asks;
// see Ask).
func (g *Pair[K, P]) Demand() int64 { return max(g.prev, g.cur, g.waitsPrev, g.waits) }

// Ask caps want, the slots a request asks for, at what RoundTrip set: a
// slot costs Redis a few µs, and a grant Redis takes longer to make than
// Prefetch lapses on its way while the pair's calls wait for it.
func (g *Pair[K, P]) Ask(want int64) int64 {
	if g.capSlots > 0 {
		return max(1, min(want, g.capSlots))
	}
	return want
}

// RoundTrip learns the round trip rt of a request for want slots under
// Prefetch prefetch: the cap on what a request asks for (see Ask) halves
// after a round trip longer than half of Prefetch (down to MinCap), and
// doubles after one shorter than a quarter, until it no longer caps.
func (g *Pair[K, P]) RoundTrip(prefetch, want, rt int64) {
	switch {
	case 2*rt > prefetch:
		g.capSlots = max(MinCap, want/2)
	case 4*rt < prefetch && g.capSlots > 0:
		if g.capSlots *= 2; g.capSlots > 1<<40 {
			g.capSlots = 0
		}
	}
	if g.lat == 0 {
		g.lat = rt
	} else {
		g.lat = (3*g.lat + rt) / 4
	}
}

// Has reports whether n slots of the live grant are usable at now.
func (g *Pair[K, P]) Has(now, n int64) bool {
	return g.live.ID != "" && now < g.live.Until && g.live.N-g.used >= n
}

// Use takes n slots of the live grant at now, which has them (see Has),
// for a call it allows, and returns what the call reports. When the grant
// runs low (less than a quarter of the pair's rate left, or an eighth of
// its Prefetch, or what is left lasts less than a request's round trip at
// the pair's rate), and no next grant waits, it also returns how many
// slots the next request asks for (capped, see Ask): the pair's rate less
// what the live grant still serves before it lapses, as the next one's
// slots are used after its; otherwise 0.
func (g *Pair[K, P]) Use(n, now int64) (Use, int64) {
	g.used += n
	g.cur += n
	u := g.result(now)
	prefetch := g.live.Terms.Prefetch
	demand, left, rest := g.Demand(), g.live.N-g.used, g.live.Until-now
	serves := min(left, demand*rest/prefetch) // at the pair's rate, before it lapses
	low := 4*left < demand || 8*rest < prefetch || serves*prefetch < g.lat*demand || rest < g.lat
	if want := demand - serves; low && want > 0 && g.next.ID == "" {
		return u, g.Ask(want)
	}
	return u, 0
}

// result is what a call allowed from the live grant at now reports, its
// slots counted used.
func (g *Pair[K, P]) result(now int64) Use {
	rate := g.live.Terms.Rate
	return Use{Limit: int(rate), Remaining: int(max(0, rate-g.live.Count-g.used)),
		ResetAfter: time.Duration(g.live.Empty-now) * time.Microsecond}
}

// Current makes the next grant live when the live one cannot serve n
// events at now (it ran out or lapsed); what the live one left goes back
// with the pair's next request (see TakePending).
func (g *Pair[K, P]) Current(now, n int64) {
	if g.next.ID != "" && !g.Has(now, n) {
		g.promote()
	}
}

// promote retires the live grant and makes the next one live, none of its
// slots used.
func (g *Pair[K, P]) promote() {
	g.retire()
	nx := g.next
	g.next = Slots[P]{}
	g.live, g.used = nx, 0
}

// Install makes the grant s, come at now, the pair's live one, or its next
// when the live one still has slots: its slots are then used after the
// live one's. A grant it makes live serves the calls that wait for it
// first (see Enqueue); it returns the slots they took.
func (g *Pair[K, P]) Install(s Slots[P], now int64) (served int64) {
	if g.Has(now, 1) {
		if g.next.ID != "" {
			// A third grant (a pair asks once at a time, and not while a
			// next one waits): the live one makes way.
			g.Current(g.live.Until, 1)
		}
		if g.Has(now, 1) {
			g.next = s
			return 0
		}
	}
	g.retire()
	g.live, g.used = s, 0
	return g.serve(now)
}

// serve allows, from the live grant at now, the calls that wait for it,
// first come first, while it holds their slots: each is decided at the
// grant's coming. Those it cannot serve wake and try again.
func (g *Pair[K, P]) serve(now int64) (served int64) {
	for _, w := range g.queue {
		if w.gone || w.done {
			continue
		}
		if !g.Has(now, w.n) {
			break
		}
		g.used += w.n
		g.cur += w.n
		w.done = true
		w.use = g.result(now)
		served += w.n
	}
	g.queue = nil
	return served
}

// ResetQueue empties the queue of waiting calls: a request leaves, and the
// calls that wait for it queue anew.
func (g *Pair[K, P]) ResetQueue() { g.queue = nil }

// Enqueue queues a call for n events, after those queued before it, for
// the grant of the request on its way (see Install).
func (g *Pair[K, P]) Enqueue(n int64) *Waiter {
	w := &Waiter{n: n}
	g.queue = append(g.queue, w)
	return w
}

// Queued returns the number of calls queued since the last ResetQueue or
// Install, those that left included.
func (g *Pair[K, P]) Queued() int { return len(g.queue) }

// TakePending returns what the grant before the live one left unused, for
// the pair's next request to give back, if anything.
func (g *Pair[K, P]) TakePending() (Back[K, P], bool) {
	b := g.pending
	g.pending = Back[K, P]{}
	return b, b.ID != ""
}

// retire closes the live grant: what it left unused goes back with the
// pair's next request, and what was to go back with it already (a ban
// closed a grant in between) is owed (Books.Owe).
func (g *Pair[K, P]) retire() {
	if b, ok := g.leftover(); ok {
		if g.pending.ID != "" {
			g.books.Owe(g.pending)
		}
		g.pending = b
	}
}

// Ban closes the live and the next grant at once (a ban stops the process'
// admits from slots): what the live one left goes back with the pair's
// next request, the next one's is owed (Books.Owe).
func (g *Pair[K, P]) Ban() {
	g.retire()
	if b, ok := g.closeNext(); ok {
		g.books.Owe(b)
	}
}

// Drop closes the pair's grants and returns what they owe Redis: what the
// live one, the next one and the one before them left unused.
func (g *Pair[K, P]) Drop() []Back[K, P] {
	var out []Back[K, P]
	if b, ok := g.leftover(); ok {
		out = append(out, b)
	}
	if b, ok := g.closeNext(); ok {
		out = append(out, b)
	}
	if b, ok := g.TakePending(); ok {
		out = append(out, b)
	}
	return out
}

// closeNext closes the next grant and returns what of it is unused: all.
func (g *Pair[K, P]) closeNext() (Back[K, P], bool) {
	nx := g.next
	if nx.ID == "" {
		return Back[K, P]{}, false
	}
	g.next = Slots[P]{}
	g.books.Unmirror(g.key, &nx.Plan, nx.Until-1, nx.N)
	return Back[K, P]{Key: g.key, Plan: nx.Plan, ID: nx.ID, From: 1, To: nx.N, At: nx.At, Mark: nx.Mark}, true
}

// leftover closes the live grant and returns what of it goes back to
// Redis, if anything: its unused slots, and a grant its Terms' Records
// keep even when it was all used, since Redis keeps it until it is
// settled.
func (g *Pair[K, P]) leftover() (Back[K, P], bool) {
	b := Back[K, P]{Key: g.key, Plan: g.live.Plan, ID: g.live.ID, From: g.used + 1, To: g.live.N, At: g.live.At, Mark: g.live.Mark}
	g.live.ID, g.live.N, g.used = "", 0, 0
	if b.ID == "" {
		return b, false
	}
	unused := b.From <= b.To
	if unused {
		g.books.Unmirror(g.key, &g.live.Plan, g.live.Until-1, b.To-b.From+1)
	}
	return b, unused || g.live.Terms.Records
}

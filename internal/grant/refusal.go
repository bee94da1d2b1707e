package grant

import "time"

// Refusal is a request Redis granted no slot for, or fewer than it asked of
// a meter that frees room continuously (a GCRA bucket, an approximate
// counter): what the pair's next request waits for (see [Pair.Refused],
// [Pair.Paced]).
type Refusal struct {
	Sent     int64 // µs: when the request left
	Want     int64 // the slots it asked for
	Prefetch int64 // µs: its rule's Prefetch
	// Shield reports whether the pair's calls without a slot are rejected
	// in-process until the next request (see Reject): under a rule without
	// a penalty, the hot-key shield on.
	Shield bool
	// RetryAt and ResetAt are when a slot frees and when the meter is
	// empty (µs), as Redis' reply says.
	RetryAt, ResetAt int64
	// MaxWait bounds the wait for a slot to free (µs, Options.ShieldMax);
	// 0: no bound.
	MaxWait int64
}

// Rejection is what a call Reject rejects reports: when to retry (the
// pair's next request at the earliest), and when the meter is empty.
type Rejection struct {
	RetryAfter, ResetAfter time.Duration
}

// Refused notes that Redis had no slot for the request r, its reply come
// at at: the next request waits for r.Prefetch from r.Sent, so that it
// finds what frees meanwhile, one script for many slots. With r.Shield,
// Redis' reply being a rejection of one event, it waits also until the
// slot frees at r.RetryAt, within r.MaxWait from at, and until then the
// pair's calls are rejected (see Reject).
func (g *Pair[K, P]) Refused(r Refusal, at int64) {
	g.full = r.Sent + r.Prefetch
	if g.shield = r.Shield; !g.shield {
		return
	}
	g.retryAt, g.resetAt, g.wanted = r.RetryAt, r.ResetAt, r.Want
	if r.MaxWait > 0 {
		g.full = max(g.full, min(g.retryAt, at+r.MaxWait))
	} else {
		g.full = max(g.full, g.retryAt)
	}
}

// Paced notes that Redis granted fewer slots than the request r asked of a
// meter that frees room continuously: the next request waits until
// r.RetryAt, within r.MaxWait from r.Sent (and r.Prefetch at least), so
// that it finds more than the little freed since, and with r.Shield the
// calls the grant's slots cannot take are rejected meanwhile (see Reject).
func (g *Pair[K, P]) Paced(r Refusal) {
	g.retryAt, g.full = r.RetryAt, r.RetryAt
	if r.MaxWait > 0 {
		g.full = min(g.full, r.Sent+max(r.MaxWait, r.Prefetch))
	}
	g.shield = r.Shield
	g.resetAt, g.wanted = r.ResetAt, r.Want
}

// Granted notes that Redis granted slots: the pair no longer waits for
// what it wanted when Redis had none.
func (g *Pair[K, P]) Granted() { g.shield, g.wanted = false, 0 }

// Paused reports whether the pair's next request still waits at at (see
// Refused and Paced).
func (g *Pair[K, P]) Paused(at int64) bool { return at < g.full }

// Reject rejects a call at at, when the pair's last request was refused
// with Shield, until its next request: it answers what a rejection of one
// event at the request's time answers, its RetryAfter no earlier than the
// next request. It reports false otherwise (the caller decides the call).
func (g *Pair[K, P]) Reject(at int64) (Rejection, bool) {
	if !g.shield {
		return Rejection{}, false
	}
	g.knocked = at
	return Rejection{RetryAfter: time.Duration(max(g.full, g.retryAt)-at) * time.Microsecond,
		ResetAfter: time.Duration(max(0, g.resetAt-at)) * time.Microsecond}, true
}

// Wanted is what a pair without a usable slot asks for at at, under
// Prefetch prefetch: its rate (see Demand), or, while its calls keep coming
// (one was rejected in the last Prefetch) after Redis refused a request
// with Shield, what that request asked for, 2 at least: a pair that wants
// less than 2 is cold, and asks for nothing.
func (g *Pair[K, P]) Wanted(at, prefetch int64) int64 {
	want := g.Demand()
	if want < 2 && g.shield && at < g.knocked+prefetch {
		want = max(g.wanted, 2) // the calls kept coming while Redis had no slot
	}
	return want
}

// Void drops the pair's grants without giving them back, and forgets any
// refusal: its meter was reset, and is empty.
func (g *Pair[K, P]) Void() {
	g.Drop()
	g.full, g.shield, g.wanted = 0, false, 0
}

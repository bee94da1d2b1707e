// Package shield keeps the hot-key shield's cache (see Options.ShieldMax):
// the rejections Redis made that nothing but a Reset can lift early, each
// kept under its pair so that the same call is answered in process, without
// a round trip, until it could pass. What to cache, and what a cached
// rejection answers a call with, are the caller's; the cache says when one
// still answers a call. All times are the caller's µs, taken on receipt of
// Redis' reply (never Redis' own TIME).
package shield

import "github.com/ratelimit-go/ratelimit/internal/store"

// Terms are what a cached rejection must match of the rule a call is
// decided under: a rule changed under the same name (another rate, window,
// penalty or kind) is not answered by the old rule's rejection. Kind is
// the caller's identity of the rule's kind, and Mark what else the kind
// needs matched.
type Terms[A comparable] struct {
	Rate, Window int64
	Penalize     bool
	Kind         A
	Mark         int64
}

// Rejection is a rejection Redis made, as the cache keeps it.
type Rejection[A comparable] struct {
	Terms[A]
	N          int64 // the events the rejected call asked for (a peek: 1)
	Banned     bool
	Since      int64 // when it was cached: a clock gone back behind it is not answered
	Until      int64 // it answers calls while Since <= now < Until
	RetryAt    int64
	ResetAt    int64
	Violations int64 // the pair's violations, remembered while now < ForgetAt
	ForgetAt   int64
}

// Cache is one shard's cached rejections, under the caller's pair key K
// and its 64-bit hash (see store.Table), A being the caller's identity of
// a kind. It is not safe for concurrent use: its owner's lock guards it.
type Cache[K, A comparable] struct {
	t store.Table[K, Rejection[A]]
}

// New returns a Cache of at most size rejections.
func New[K, A comparable](size int) Cache[K, A] {
	return Cache[K, A]{t: store.New[K, Rejection[A]](size)}
}

// Len returns the rejections cached.
func (c *Cache[K, A]) Len() int { return c.t.Len() }

// Keep caches r for k, in place of what was cached for it.
func (c *Cache[K, A]) Keep(k *K, h uint64, r Rejection[A]) { c.t.Add(k, h, r) }

// Remove drops what is cached for k: events arrived, a Reset, a release.
func (c *Cache[K, A]) Remove(k *K, h uint64) { c.t.Remove(k, h) }

// Holds reports whether a rejection is cached for k.
func (c *Cache[K, A]) Holds(k *K, h uint64) bool { return c.t.Peek(k, h) != nil }

// Get returns the rejection cached for k, or nil.
func (c *Cache[K, A]) Get(k *K, h uint64) *Rejection[A] { return c.t.Get(k, h) }

// At returns the time r answers a call made at now at: a call that came
// late (it waited for its pair's calls to land, or its time is the
// process' own, which never goes back) is answered as at r's time when r
// was cached after the call's; any other call at its own time.
func (r *Rejection[A]) At(now int64, late bool) int64 {
	if late && now < r.Since {
		return r.Since
	}
	return now
}

// Ended reports whether r no longer answers a call at at: it has ended by
// then, or was cached after it (a clock gone back). The caller drops it.
// A rejection answers only a call of as many events (N), and one whose
// rule's Terms are its own; the caller checks both, and drops one of
// other Terms (the rule changed under its name).
func (r *Rejection[A]) Ended(at int64) bool { return at >= r.Until || at < r.Since }

// RemoveBans drops every cached ban, so that the next call of each banned
// pair is decided elsewhere (after Redis lost its data: see the caller).
func (c *Cache[K, A]) RemoveBans() {
	if c.t.Len() == 0 {
		return
	}
	for _, h := range c.t.Hashes() {
		if e, ok := c.t.PeekHash(h); ok && e.Value.Banned {
			c.t.RemoveHash(h)
		}
	}
}

package ratelimit

import (
	"fmt"
	"time"
)

// MinLeaseTTL is the shortest Window a Concurrency rule takes: the TTL of
// a lease, which Hold renews every third of it.
const MinLeaseTTL = 100 * time.Millisecond

// concurrencyKind is the algorithm of Kind Concurrency: the leases of a
// pair are the sliding log's events, each under its lease's id, and a
// lease lives one Window from when it was taken or last renewed. So the
// log's count is the leases held, its retry the earliest expiry and its
// reset the latest, and every path the exact log takes (the local meter,
// the mirror, the write-back, undo) serves leases as it is: Release is
// undo, Renew moves the lease's event to now (see lease.go). Redis'
// decision is the exact log's too, with one piece more: it puts back the
// leases the calling process holds when Redis lost them
// (lua/concurrency.lua). Its leases are kept where a sliding log of the same rule name
// keeps its events (the key letter 'l'): a rule's state is its name's.
type concurrencyKind struct{ slidingKind }

func (concurrencyKind) name() string { return "concurrency" }

// scripts are the sliding log's, but for the leases the calling process
// sends along, which it puts back when Redis lost them (see
// lua/concurrency.lua and leaseSet.onRedis).
func (concurrencyKind) scripts() *kindScripts { return concurrencyScripts }

// concurrencyScripts are the entries composed with lua/concurrency.lua's pieces
// (see composeKind).
var concurrencyScripts = composeKind("concurrency")

func (concurrencyKind) leased() bool { return true }
func (concurrencyKind) grouped() string {
	return "a concurrency rule cannot be grouped: use Acquire, and give the slot back with Release"
}

func (concurrencyKind) compile(r Rule, p plan) (plan, string) {
	if bad := checkWindow(&r, false); bad != "" {
		return p, bad
	}
	if r.Limit.Window < MinLeaseTTL {
		return p, fmt.Sprintf("Window %v, a lease's TTL, is shorter than %v", r.Limit.Window, MinLeaseTTL)
	}
	return p, ""
}

// Leases reports whether r hands out leases (Kind Concurrency): its slots
// are taken with Acquire, Hold or AcquireWait and given back with
// Lease.Release, and the rate methods refuse it. An invalid Kind has none.
func (r Rule) Leases() bool {
	a, bad := algorithmOf(&r)
	return bad == "" && a.rules.leased()
}

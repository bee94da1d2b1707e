package ratelimit

import (
	"github.com/ratelimit-go/ratelimit/internal/ledger"
	"github.com/ratelimit-go/ratelimit/internal/meter"
)

// What a (rule, key) pair decided without Redis owes it. The local store
// keeps the debts in internal/ledger, a Ledger per shard under the shard's
// lock; this file says what of a plan a debt reads (its kind's stamps, its
// ladder), and writeback.go sends the batches cut from them.

// debt is what one (rule, key) pair owes Redis.
type debt = ledger.Debt[lkey, plan]

// batch is what one call of lua/writeback.lua writes for one pair.
type batch = ledger.Batch[lkey, plan]

// debtTerms returns what a debt owed under p reads of it.
func (p *plan) debtTerms() ledger.Terms {
	return ledger.Terms{
		Stamps:   ledger.Stamps{Kind: p.alg, Window: p.window, Period: int64(p.period)},
		Penalize: p.penalize,
		Memory:   p.penalty.Memory,
	}
}

// dueFrom returns the oldest stamp of p's events still worth writing back
// at now (see writeBackKind).
func dueFrom(p *plan, now int64) int64 { return p.alg.back.dueFrom(*p, now) }

// oweEvents remembers n events allowed at now without Redis by the meter
// m (nil: none), owed under p (under member, when the call may have run on
// Redis under it and p's kind writes its events back named), within
// WriteBackMax (see ledger.Ledger.OweEvents). The caller holds sh.mu.
func (sh *localShard) oweEvents(k *lkey, h uint64, p *plan, m meter.Meter, now, n int64, member string) {
	if !p.alg.back.named() {
		member = ""
	}
	sh.debts.OweEvents(k, h, p, p.debtTerms(), m, now, p.alg.back.stamp(*p, now), n, member)
}

// oweViolation remembers a violation counted at now without Redis, and the
// ban it started (ban > 0: its length). The caller holds sh.mu.
func (sh *localShard) oweViolation(k *lkey, h uint64, p *plan, now, ban int64) {
	sh.debts.OweViolation(k, h, p, p.debtTerms(), now, ban)
}

// oweBan remembers a ban made by hand until end that Redis did not get.
func (s *localStore) oweBan(k lkey, p *plan, end int64) {
	sh, h := s.at(&k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.debts.OweBan(&k, h, p, p.debtTerms(), end)
}

// oweStrikes gives k's debt back the violations a call was handed (see
// ledger.Debt.Hand) and did not deliver. The caller holds sh.mu.
func (sh *localShard) oweStrikes(k *lkey, h uint64, p *plan, hd *held) {
	sh.debts.OweStrikes(k, h, p, p.debtTerms(), hd.strikes, hd.struck)
	hd.strikes = 0
}

// oweReset remembers a Reset made at now that Redis did not get. The
// caller holds sh.mu.
func (sh *localShard) oweReset(k *lkey, h uint64, p *plan, now int64) {
	sh.debts.OweReset(k, h, p, p.debtTerms(), now)
}

// forgetOwed takes n events allowed at now back from k's debt (AllowAll's
// undo, a lease's release, a reservation's give-back), and returns how many
// it held. The caller holds sh.mu.
func (sh *localShard) forgetOwed(k *lkey, h uint64, p *plan, now, n int64) int64 {
	return sh.debts.Forget(k, h, p.alg, p.alg.back.stamp(*p, now), n)
}

// resetDebt forgets k's debt for a Reset at now (see ledger.Ledger.Reset).
// The caller holds sh.mu.
func (sh *localShard) resetDebt(k *lkey, h uint64, p *plan, now int64) {
	sh.debts.Reset(k, h, p, p.debtTerms(), now)
}

// dropAll counts every event still owed as dropped and forgets the debts
// (Close).
func (s *localStore) dropAll() {
	s.eachShard(func(sh *localShard) { sh.debts.DropAll() })
}

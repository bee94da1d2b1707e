package ledger

import (
	"cmp"
	"slices"

	"github.com/ratelimit-go/ratelimit/internal/eventlog"
)

// MaxBatchStamps bounds the stamps of one batch; a pair that owes more is
// written back in several batches.
const MaxBatchStamps = 1000

// Batch is what one write of a pair's debt carries to Redis: a copy of
// (part of) the debt when the batch was cut, under the pair's key Key and
// the plan Plan.
type Batch[K comparable, P any] struct {
	Key    K
	Plan   P
	ID     string           // unique per batch, from the cut's newID
	Events []eventlog.Event // stamps ascending, named events included
	Named  []Named          // the named events among them
	Reset  bool             // a Reset made at ResetAt
	ResetAt,
	BanEnd, // the latest ban (0: none)
	Violations, Bans, LastViolation int64 // what the ladder counted
	Full bool // the debt owed more events than one batch carries

	d *Debt[K, P] // the debt it was cut from
	// folded: the batch carries the debt's carry folded at the cut (see
	// Debt.fold), and mark is the carry's mark then (meter.Carry.Mark):
	// what Redis holds once the batch is applied.
	folded bool
	mark   [2]int64
}

// Outcome is how a batch's call ended.
type Outcome int

const (
	Applied Outcome = iota // Redis applied it, or had already
	Refused                // Redis refused it as misuse: it never will apply it
	Unsure                 // the reply was lost: Redis may have applied it
	Unsent                 // it never reached Redis
)

// Cut cuts a batch from each debt that owes something at now, oldest
// first, forgetting what no longer counts: stamps before dueFrom(plan,
// now), violations the plan's ladder no longer remembers, bans that ended.
// A debt whose last batch Redis may have applied gives that batch again;
// newID names a batch.
func (l *Ledger[K, P]) Cut(now int64, dueFrom func(p *P, now int64) int64, newID func() string) []*Batch[K, P] {
	if l.t.Len() == 0 {
		return nil
	}
	var bs []*Batch[K, P]
	for _, h := range l.t.Hashes() {
		e, _ := l.t.PeekHash(h)
		d := e.Value
		due := dueFrom(&d.plan, now)
		folded, mark := l.trim(d, now, due)
		switch {
		case d.unsure != nil:
			d.inflight = true
			bs = append(bs, d.unsure)
		case d.Empty():
			l.forget(h, d, false)
		default:
			b := &Batch[K, P]{Key: e.Key, Plan: d.plan, ID: newID(), Reset: d.reset, ResetAt: d.resetAt, BanEnd: d.banEnd,
				Violations: d.violations, Bans: d.bans, LastViolation: d.lastViolation, d: d, folded: folded, mark: mark}
			b.Events, b.Full = d.events.AppendEntries(nil, MaxBatchStamps)
			b.Named = nameEvents(b.Events, d.named)
			d.inflight = true
			bs = append(bs, b)
		}
	}
	return bs
}

// trim forgets what d no longer owes at now, due being the oldest stamp
// that still counts, and folds a carry's events when no batch of d is on
// its way or may be applied (see Debt.fold): it reports whether it did, and the carry's
// mark.
func (l *Ledger[K, P]) trim(d *Debt[K, P], now, due int64) (folded bool, mark [2]int64) {
	before := d.events.Total()
	switch {
	case !d.carry.On():
		d.events.Drop(due - 1)
	case !d.inflight && d.unsure == nil:
		mark[0], mark[1] = d.fold(now)
		folded = true
	}
	l.o.events.Add(d.events.Total() - before)
	if len(d.named) > 0 {
		d.named = slices.DeleteFunc(d.named, func(nm Named) bool { return nm.At < due })
	}
	if d.violations > 0 && (!d.terms.Penalize || now-d.lastViolation >= d.terms.Memory) {
		d.violations, d.bans = 0, 0
	}
	if d.banEnd <= now {
		d.banEnd = 0
	}
	return folded, mark
}

// Settle records how b's call ended (its key's hash is h): the events of a
// batch Redis applied (or refused) leave its debt, a batch Redis may have
// applied is kept to be sent again as it is, and one that never reached
// Redis is forgotten (the next batch is cut afresh). It does nothing when
// the debt is no longer there (a Reset, an eviction).
func (l *Ledger[K, P]) Settle(b *Batch[K, P], h uint64, o Outcome) {
	e := l.t.Find(&b.Key, h)
	if e == nil || e.Value != b.d {
		return
	}
	d := b.d
	d.inflight = false
	switch o {
	case Unsure:
		d.unsure = b
		return
	case Unsent:
		return
	}
	d.unsure = nil
	l.o.events.Add(-d.paid(b))
	var sent int64
	for _, ev := range b.Events {
		sent += ev.N
	}
	if o == Applied {
		l.o.written.Add(uint64(sent))
	} else {
		l.o.dropped.Add(uint64(sent))
	}
	if d.Empty() {
		l.forget(h, d, false)
	}
}

// nameEvents returns the named events among events (stamps ascending), each
// at most as many as events hold at its stamp: events dropped since (over
// the Max, taken back) leave fewer.
func nameEvents(events []eventlog.Event, all []Named) []Named {
	if len(all) == 0 || len(events) == 0 {
		return nil
	}
	left := make(map[int64]int64, len(all))
	var out []Named
	for _, nm := range all {
		n, seen := left[nm.At]
		if !seen {
			i, found := slices.BinarySearchFunc(events, nm.At, func(e eventlog.Event, at int64) int { return cmp.Compare(e.At, at) })
			if found {
				n = events[i].N
			}
		}
		take := min(nm.N, n)
		left[nm.At] = n - take
		if take > 0 {
			nm.N = take
			out = append(out, nm)
		}
	}
	return out
}

package ratelimitotel

import (
	"context"

	"github.com/ratelimit-go/ratelimit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// tally is what the observed limiters report at one collection, added up.
type tally struct {
	sum                         ratelimit.Stats // the counters, summed
	connected, inUse, instances int64           // instances: the most any one counted
	held                        map[*ruleAttrs]int64
	entries                     map[string]int // local entries by kind: every meter's, then "strike" and "ban"
}

// observe is the callback of the observable instruments.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	if len(m.limiters) == 0 {
		return nil
	}
	t := m.tally()
	s := &t.sum
	o.ObserveInt64(m.breakersOpen, int64(s.BreakersOpen))
	t.entries["strike"], t.entries["ban"] = s.LocalStrikes, s.LocalBans
	for kind, n := range t.entries {
		o.ObserveInt64(m.localEntries, int64(n), m.kindOpt(kind)...)
	}
	o.ObserveInt64(m.shielded, int64(s.Shielded))
	o.ObserveInt64(m.connected, t.connected)
	o.ObserveInt64(m.redisInUse, t.inUse)
	o.ObserveInt64(m.writeBack, int64(s.WrittenBack), m.wbOpts[0]...)
	o.ObserveInt64(m.writeBack, int64(s.WriteBackDropped), m.wbOpts[1]...)
	o.ObserveInt64(m.wbPending, int64(s.WriteBackPending))
	o.ObserveInt64(m.instances, t.instances)
	for r := range m.leased {
		o.ObserveInt64(m.leasesHeld, t.held[r], r.held...) // 0 once its leases are all back
	}
	o.ObserveInt64(m.leaseEvents, int64(s.LeaseReleases), m.leaseOpts[0]...)
	o.ObserveInt64(m.leaseEvents, int64(s.LeaseRenewals), m.leaseOpts[1]...)
	o.ObserveInt64(m.leaseEvents, int64(s.LeasesLost), m.leaseOpts[2]...)
	o.ObserveInt64(m.reservations, int64(s.Reservations), m.resOpts[0]...)
	o.ObserveInt64(m.reservations, int64(s.ReservationsSettled), m.resOpts[1]...)
	o.ObserveInt64(m.reservations, int64(s.ReservationDebts), m.resOpts[2]...)
	o.ObserveInt64(m.resEvents, int64(s.ReservedGivenBack), m.resEvOpts[0]...)
	o.ObserveInt64(m.resEvents, int64(s.ReservedCharged), m.resEvOpts[1]...)
	o.ObserveInt64(m.pfGrants, int64(s.PrefetchGrants))
	o.ObserveInt64(m.pfSlots, int64(s.PrefetchSlotsGranted), m.pfOpts[0]...)
	o.ObserveInt64(m.pfSlots, int64(s.PrefetchSlotsUsed), m.pfOpts[1]...)
	o.ObserveInt64(m.pfSlots, int64(s.PrefetchSlotsReturned), m.pfOpts[2]...)
	return nil
}

// tally adds up what the observed limiters report now, and notes the rules
// that hold leases in m.leased. The caller holds obsMu.
func (m *Metrics) tally() tally {
	t := tally{held: make(map[*ruleAttrs]int64), entries: make(map[string]int)}
	for l := range m.limiters {
		for name, n := range l.LeasesByRule() {
			r := m.rule(name)
			t.held[r] += int64(n)
			if m.leased == nil {
				m.leased = make(map[*ruleAttrs]struct{})
			}
			m.leased[r] = struct{}{}
		}
		for kind, n := range l.LocalMeters() {
			t.entries[kind] += n
		}
		s := l.Stats()
		addStats(&t.sum, &s)
		if s.Connected {
			t.connected++
		}
		if s.RedisInUse {
			t.inUse++
		}
		t.instances = max(t.instances, int64(s.Instances))
	}
	return t
}

// addStats adds s's counters and sizes that the instruments report to sum.
func addStats(sum, s *ratelimit.Stats) {
	sum.LocalStrikes += s.LocalStrikes
	sum.LocalBans += s.LocalBans
	sum.Shielded += s.Shielded
	sum.BreakersOpen += s.BreakersOpen
	sum.WrittenBack += s.WrittenBack
	sum.WriteBackDropped += s.WriteBackDropped
	sum.WriteBackPending += s.WriteBackPending
	sum.LeaseReleases += s.LeaseReleases
	sum.LeaseRenewals += s.LeaseRenewals
	sum.LeasesLost += s.LeasesLost
	sum.Reservations += s.Reservations
	sum.ReservationsSettled += s.ReservationsSettled
	sum.ReservationDebts += s.ReservationDebts
	sum.ReservedGivenBack += s.ReservedGivenBack
	sum.ReservedCharged += s.ReservedCharged
	sum.PrefetchGrants += s.PrefetchGrants
	sum.PrefetchSlotsGranted += s.PrefetchSlotsGranted
	sum.PrefetchSlotsUsed += s.PrefetchSlotsUsed
	sum.PrefetchSlotsReturned += s.PrefetchSlotsReturned
}

// kindOpt returns the attributes of the local entries of kind; the caller
// holds obsMu.
func (m *Metrics) kindOpt(kind string) []metric.ObserveOption {
	opt, ok := m.kindOpts[kind]
	if !ok {
		if m.kindOpts == nil {
			m.kindOpts = make(map[string][]metric.ObserveOption)
		}
		opt = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", kind)))}
		m.kindOpts[kind] = opt
	}
	return opt
}

package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit/internal/fleet"
	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/redis/rueidis"
)

// fleetLimiter returns a Limiter on mr under prefix whose heartbeat comes
// every hour: its first one, at once, is the only one the test does not
// make itself, and the test waits for it, so every later count is the
// test's doing. Decisions are made at the fake instant at; the Timeout is
// long, so that a busy machine fails no heartbeat the test expects to work.
func fleetLimiter(t *testing.T, mr *miniredis.Miniredis, prefix string, at time.Time, more ...func(*Options)) *Limiter {
	t.Helper()
	return fleetLimiterOn(t, miniClient(t, mr), prefix, at, more...)
}

// fleetLimiterOn is fleetLimiter on client.
func fleetLimiterOn(t *testing.T, client rueidis.Client, prefix string, at time.Time, more ...func(*Options)) *Limiter {
	t.Helper()
	opts := Options{Clock: &fixedClock{at: at}, KeyPrefix: prefix, HeartbeatInterval: time.Hour, TripAfter: 1,
		Timeout: 10 * time.Second, Logger: discard}
	for _, f := range more {
		f(&opts)
	}
	l, err := New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	waitFor(t, "the first heartbeat", func() bool { return l.Stats().Instances > 0 })
	return l
}

// noperm is redis-server's refusal of a call by an ACL.
const noperm = "NOPERM this user has no permissions to access one of the keys used as arguments"

// fleetOfTwo returns a miniredis at a fixed time and two fleet Limiters on
// it under prefix (a with more options), each counting both.
func fleetOfTwo(t *testing.T, prefix string, moreA ...func(*Options)) (mr *miniredis.Miniredis, a, b *Limiter) {
	t.Helper()
	mr = miniredis.RunT(t)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	mr.SetTime(t0)
	a = fleetLimiter(t, mr, prefix, t0, moreA...)
	b = fleetLimiter(t, mr, prefix, t0)
	for i, l := range []*Limiter{a, b} {
		if n := beat(t, l); n != 2 {
			t.Fatalf("%c counts %d, want 2", 'a'+i, n)
		}
	}
	return mr, a, b
}

// miniClient returns a single-node client of mr, closed at cleanup.
func miniClient(t *testing.T, mr *miniredis.Miniredis) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// discard is a Logger that logs nothing, for tests whose Limiters log
// what they are made to go through.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// pathLog records the Path of each decision a Limiter reports: its hook
// is Options.OnDecision.
type pathLog struct {
	mu    sync.Mutex
	paths []Path
}

func (pl *pathLog) hook(d Decision) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.paths = append(pl.paths, d.Path)
}

// all returns the paths recorded so far, in the order reported.
func (pl *pathLog) all() []Path {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return slices.Clone(pl.paths)
}

// reset forgets the paths recorded so far.
func (pl *pathLog) reset() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.paths = nil
}

// waitFor polls cond for up to 10s: a bound on a hang, not a speed check.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// beat makes one heartbeat of l by hand and returns the count l then uses.
func beat(t *testing.T, l *Limiter) int {
	t.Helper()
	l.heartbeat(l.conn.Load(), pair.FleetKey(l.set.KeyPrefix))
	return l.Stats().Instances
}

// TestFleetAnnouncement runs the heartbeat script on miniredis at times set
// with SetTime (the TIME the script reads): each Limiter is live for three
// heartbeats after its last one and then trimmed, counts only Limiters
// under its own KeyPrefix, keeps the set alive as long as its last member,
// and withdraws on Close.
func TestFleetAnnouncement(t *testing.T) {
	mr := miniredis.RunT(t)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 123456000, time.UTC)
	mr.SetTime(t0)
	key := pair.FleetKey("f:")
	if key != "f:v1:{instances}" {
		t.Fatalf("pair.FleetKey = %q", key)
	}
	a := fleetLimiter(t, mr, "f:", t0)
	if n := a.Stats().Instances; n != 1 {
		t.Fatalf("first Limiter counts %d, want 1", n)
	}
	live := 3 * time.Hour
	if s, err := mr.ZScore(key, a.id); err != nil || int64(s) != t0.Add(live).UnixMicro() {
		t.Fatalf("a's score = %v, %v; want its heartbeat plus three periods, %d", int64(s), err, t0.Add(live).UnixMicro())
	}
	if ttl := mr.TTL(key); ttl != live {
		t.Fatalf("TTL of the set = %v, want %v", ttl, live)
	}

	b := fleetLimiter(t, mr, "f:", t0)
	other := fleetLimiter(t, mr, "other:", t0)
	if n := b.Stats().Instances; n != 2 {
		t.Fatalf("second Limiter counts %d, want 2", n)
	}
	if n := a.Stats().Instances; n != 1 {
		t.Fatalf("a counts %d before its next heartbeat, want the 1 it last saw", n)
	}
	if n := other.Stats().Instances; n != 1 {
		t.Fatalf("a Limiter under another KeyPrefix counts %d, want 1: fleets do not count each other", n)
	}

	mr.SetTime(t0.Add(live - time.Microsecond)) // b's last heartbeat is just under three periods old
	if n := beat(t, a); n != 2 {
		t.Fatalf("a counts %d with b's heartbeat just under three periods old, want 2", n)
	}
	mr.SetTime(t0.Add(live)) // now three periods old: b is trimmed
	if n := beat(t, a); n != 1 {
		t.Fatalf("a counts %d with b's heartbeat three periods old, want 1", n)
	}
	if m, _ := mr.ZMembers(key); len(m) != 1 || m[0] != a.id {
		t.Fatalf("the set holds %v, want only a's id %s: b was not trimmed", m, a.id)
	}
	if n := beat(t, b); n != 2 {
		t.Fatalf("b back: counts %d, want 2", n)
	}
	if ttl := mr.TTL(key); ttl != live {
		t.Fatalf("TTL of the set = %v, want %v", ttl, live)
	}

	b.Close()
	if m, _ := mr.ZMembers(key); len(m) != 1 || m[0] != a.id {
		t.Fatalf("the set holds %v after b closed, want only a's id %s", m, a.id)
	}
	if n := beat(t, a); n != 1 {
		t.Fatalf("a counts %d after b closed, want 1", n)
	}
}

// TestFleetShare: while Redis cannot be used, a Limiter enforces
// ceil(Rate / instances last seen) under DegradedLocal; a failed heartbeat
// keeps the count; a DegradedShare set by the user wins over the count.
func TestFleetShare(t *testing.T) {
	mr := miniredis.RunT(t)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	mr.SetTime(t0)
	var fleet []*Limiter
	for range 3 {
		fleet = append(fleet, fleetLimiter(t, mr, "share:", t0))
	}
	l := fleet[0]
	if n := beat(t, l); n != 3 {
		t.Fatalf("counts %d, want 3", n)
	}
	mr.SetError("LOADING Redis is loading the dataset in memory")
	if n := beat(t, l); n != 3 {
		t.Fatalf("after a failed heartbeat the count is %d, want the 3 last seen", n)
	}
	ctx := context.Background()
	rule := Rule{Name: "sale", Limit: PerMinute(10)} // ceil(10/3) = 4
	for i := 1; i <= 5; i++ {
		r, err := l.Allow(ctx, rule, "k")
		if err != nil {
			t.Fatal(err)
		}
		if !r.Degraded || r.Limit != 4 || r.Allowed != (i <= 4) {
			t.Fatalf("call %d while Redis refuses = %+v; want degraded, Limit 4, allowed for the first 4", i, r)
		}
	}
	if n := l.Stats().Instances; n != 3 {
		t.Fatalf("Stats.Instances = %d, want 3", n)
	}
	l.set.DegradedShare = 0.5 // as if the user had set it: it wins
	if r, _ := l.AllowN(ctx, Rule{Name: "sale:share", Limit: PerMinute(10)}, "k", 5); !r.Allowed || r.Limit != 5 {
		t.Fatalf("with DegradedShare 0.5: %+v, want Limit 5 and 5 events allowed", r)
	}
}

// TestFleetCountAfterFailedHeartbeats: after its heartbeat failed (Redis
// refused it, and the other instances' too, long enough for them all to be
// trimmed), a Limiter's next fleet.RejoinBeats heartbeats raise its count but do
// not lower it, so an outage right after is met with the fleet's share as
// it was; the next one lowers it to the instances that announced since.
func TestFleetCountAfterFailedHeartbeats(t *testing.T) {
	mr := miniredis.RunT(t)
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	mr.SetTime(t0)
	probe := 10 * time.Millisecond // the refusal opens a's breaker: it probes again after this
	a := fleetLimiter(t, mr, "rejoin:", t0, func(o *Options) { o.ProbeAfter = probe })
	b := fleetLimiter(t, mr, "rejoin:", t0)
	fleetLimiter(t, mr, "rejoin:", t0)
	if n := beat(t, a); n != 3 {
		t.Fatalf("counts %d, want 3", n)
	}
	mr.SetError("NOPERM this user has no permissions to run the 'evalsha' command")
	if n := beat(t, a); n != 3 {
		t.Fatalf("after a refused heartbeat the count is %d, want the 3 last seen", n)
	}
	mr.SetError("")
	time.Sleep(2 * probe)
	// Redis refused everyone for three periods: the others' announcements
	// ran out, and a's first heartbeats back find it alone.
	now := t0.Add(3 * time.Hour)
	for i := range fleet.RejoinBeats {
		mr.SetTime(now)
		if n := beat(t, a); n != 3 {
			t.Fatalf("heartbeat %d after the refusal counts %d, want the 3 last seen (the set holds %d)", i+1, n, mustCard(t, mr, "rejoin:"))
		}
		now = now.Add(time.Minute)
	}
	mr.SetTime(now)
	if n := beat(t, a); n != 1 {
		t.Fatalf("heartbeat %d after the refusal counts %d, want 1: only a announced since", fleet.RejoinBeats+1, n)
	}
	if n := beat(t, b); n != 2 {
		t.Fatalf("b back: it counts %d, want 2", n)
	}
	if n := beat(t, a); n != 2 {
		t.Fatalf("a counts %d once b is back, want 2", n)
	}
}

// mustCard returns the number of announcements in the set of prefix.
func mustCard(t *testing.T, mr *miniredis.Miniredis, prefix string) int {
	t.Helper()
	m, err := mr.ZMembers(pair.FleetKey(prefix))
	if err != nil {
		return 0
	}
	return len(m)
}

func TestDegradedRate(t *testing.T) {
	for _, c := range []struct {
		rate      int64
		share     float64
		instances int64
		want      int64
	}{
		{10, 0, 0, 10}, // before any heartbeat: alone
		{10, 0, 1, 10},
		{10, 0, 2, 5},
		{10, 0, 3, 4}, // ceil(10/3)
		{10, 0, 4, 3},
		{100, 0, 3, 34},
		{10, 0, 20, 1}, // at least 1
		{1, 0, 4, 1},
		{1 << 40, 0, 3, (1<<40 + 2) / 3}, // integer arithmetic, exact
		{10, 1, 4, 10},                   // a share the user set wins
		{10, 0.25, 4, 3},
		{10, 0.25, 1, 3},
		{10, 0.001, 0, 1},
	} {
		s := settings{Options: Options{DegradedShare: c.share}, fleet: new(atomic.Int64)}
		s.fleet.Store(c.instances)
		if got := s.degradedRate(c.rate); got != c.want {
			t.Errorf("degradedRate(%d) with share %v and %d instances = %d, want %d", c.rate, c.share, c.instances, got, c.want)
		}
	}
	if got := (&settings{}).degradedRate(7); got != 7 {
		t.Errorf("settings of no Limiter: degradedRate(7) = %d, want 7", got)
	}
}

// TestHeartbeatNeverTakesTheLastSlot: a heartbeat is admitted only with an
// admission slot to spare and never queues ahead of a live call; one that
// finds none is not sent and keeps the count.
func TestHeartbeatNeverTakesTheLastSlot(t *testing.T) {
	mr := miniredis.RunT(t)
	l := fleetLimiter(t, mr, "spare:", time.Now())
	mr.FlushAll()
	g := l.conn.Load().breakers.All()[0].Gate()
	limit := g.Limit()
	taken := takeSlots(g, 1) // one slot left: the live calls'
	l.heartbeat(l.conn.Load(), pair.FleetKey("spare:"))
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("a heartbeat without a slot to spare reached Redis: %v", keys)
	}
	if n := l.Stats().Instances; n != 1 {
		t.Fatalf("count after a shed heartbeat = %d, want the 1 last seen", n)
	}
	giveBack(g, 1)
	taken--
	l.heartbeat(l.conn.Load(), pair.FleetKey("spare:"))
	if !mr.Exists(pair.FleetKey("spare:")) {
		t.Fatal("a heartbeat with two slots free was not sent")
	}
	if n := g.InFlight(); n != limit-2 {
		t.Fatalf("in flight after the heartbeat = %d, want %d: its slot released", n, limit-2)
	}
	giveBack(g, taken)
}

// TestNoAnnouncement: a local-only Limiter and one with a negative
// HeartbeatInterval never announce themselves and count as alone.
func TestNoAnnouncement(t *testing.T) {
	mr := miniredis.RunT(t)
	off, err := New(miniClient(t, mr), Options{HeartbeatInterval: -1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	local, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rule := Rule{Name: "alone", Limit: PerMinute(3)}
	if r, err := off.Allow(context.Background(), rule, "k"); err != nil || r.Degraded {
		t.Fatalf("Allow = %+v, %v", r, err)
	}
	if r, err := local.AllowN(context.Background(), rule, "k", 3); err != nil || !r.Allowed || r.Degraded || r.Limit != 3 {
		t.Fatalf("local-only AllowN(3) = %+v, %v", r, err)
	}
	off.Close()
	local.Close()
	for _, k := range mr.Keys() {
		if k == pair.FleetKey(DefaultKeyPrefix) {
			t.Fatalf("a Limiter with a negative HeartbeatInterval announced itself: %v", mr.Keys())
		}
	}
	if off.Stats().Instances != 0 || local.Stats().Instances != 0 {
		t.Fatal("Stats.Instances is not 0 without announcements")
	}
}

// TestHeartbeatNotStarved: a heartbeat that found no slot to spare is
// followed by one that takes a slot as a call does, even the last one, so
// that sustained load cannot keep the Limiter from announcing itself until
// the other instances trim it.
func TestHeartbeatNotStarved(t *testing.T) {
	mr := miniredis.RunT(t)
	l := fleetLimiter(t, mr, "starved:", time.Now())
	g := l.conn.Load().breakers.All()[0].Gate()
	defer giveBack(g, takeSlots(g, 1)) // one slot left: the live calls'
	mr.FlushAll()
	l.heartbeat(l.conn.Load(), pair.FleetKey("starved:"))
	if mr.Exists(pair.FleetKey("starved:")) || !l.heartbeatStarved.Load() {
		t.Fatal("a heartbeat took the last free slot, or did not mark the Limiter starved")
	}
	l.heartbeat(l.conn.Load(), pair.FleetKey("starved:"))
	if !mr.Exists(pair.FleetKey("starved:")) {
		t.Fatal("the heartbeat after a skipped one did not take the slot left")
	}
	if l.heartbeatStarved.Load() {
		t.Fatal("a heartbeat that went through leaves the Limiter marked starved")
	}
}

package ratelimit

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSlidingLogKeepsTimeOrder(t *testing.T) {
	var l slidingLog
	for _, at := range []int64{10, 30, 20, 30, 5, 40} {
		l.addEvents(at, 1)
	}
	want := []event{{5, 1}, {10, 1}, {20, 1}, {30, 2}, {40, 1}}
	if got := entries(&l); len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i, e := range entries(&l) {
		if e != want[i] {
			t.Fatalf("events %v, want %v", entries(&l), want)
		}
	}
	if l.count(29, 10) != 4 || l.retryIn(29, 10, 4, 1) != 1 || l.reset(29, 10, false) != 21 || l.head != 0 {
		t.Fatalf("at 29: count %d retry %d reset %d head %d", l.count(29, 10), l.retryIn(29, 10, 4, 1), l.reset(29, 10, false), l.head)
	}
	l.prune(29, 10) // keeps t0 > 9: a window more than counting needs
	l.drop(l.gone)  // what a full ring does
	if l.head != 1 || l.total != 5 {
		t.Fatalf("prune left head %d total %d", l.head, l.total)
	}
	l.prune(39, 10) // keeps t0 > 19
	l.drop(l.gone)
	if l.head != 2 || l.total != 4 {
		t.Fatalf("prune left head %d total %d", l.head, l.total)
	}
	l.bound(2)
	if l.total != 2 || *l.at(l.head) != (event{30, 1}) {
		t.Fatalf("bound(2) left %v", entries(&l))
	}
}

// entries returns l's entries, the oldest first.
func entries(l *slidingLog) []event {
	e, _ := l.appendEntries(nil, l.tail-l.head)
	return e
}

// TestSlidingLogReusesItsRoom: a log that prunes and adds as the local
// path does at a steady rate stops growing and allocates nothing.
func TestSlidingLogReusesItsRoom(t *testing.T) {
	var l slidingLog
	for at := int64(0); at < 64; at++ {
		l.prune(at, 8)
		l.add(at, 8, 1)
	}
	room := len(l.ring)
	at := int64(1000)
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 64; i++ {
			l.prune(at, 8)
			l.add(at, 8, 1)
			at++
		}
	})
	if allocs != 0 || len(l.ring) != room {
		t.Fatalf("a steady log allocated %v times (room %d -> %d)", allocs, room, len(l.ring))
	}
}

// TestBansSurviveAFloodOfKeys fills the local limiter far past its capacity
// with new keys and with new violators: an active ban must not be evicted by
// either.
func TestBansSurviveAFloodOfKeys(t *testing.T) {
	s := newLocalStore(64)
	p := plan{rate: 1, alg: algSliding, window: int64(time.Minute / time.Microsecond), penalize: true,
		penalty: penaltyPlan{banAfter: 1, banFor: int64(time.Hour / time.Microsecond), memory: int64(time.Hour / time.Microsecond)}}
	plain := plan{rate: 1, window: p.window, alg: algSliding}
	lenient := p
	lenient.penalty.banAfter = 1000
	bad := lkey{rule: "login", key: "bad"}
	s.admit(&bad, &p, 1, 0, 1, false, nil, "")
	if d := s.admit(&bad, &p, 1, 0, 1, false, nil, ""); !d.banned {
		t.Fatalf("second call %+v, want banned", d)
	}
	for i := 0; i < 10_000; i++ {
		s.admit(&lkey{rule: "search", key: "k" + strconv.Itoa(i)}, &plain, 1, 1, 1, false, nil, "")
		violator := lkey{rule: "other", key: "v" + strconv.Itoa(i)}
		s.admit(&violator, &lenient, 1, 1, 1, false, nil, "")
		if d := s.admit(&violator, &lenient, 1, 1, 1, false, nil, ""); d.violations != 1 || d.banned {
			t.Fatalf("a violator's second call: %+v", d)
		}
	}
	if d := s.admit(&bad, &p, 1, 2, 1, true, nil, ""); !d.banned {
		t.Fatalf("after the flood the ban is gone: %+v", d)
	}
	var logs, strikes, bans int
	for i := range s.shards {
		logs += s.shards[i].meters[logMeters].Len()
		strikes += s.shards[i].strikes.Len()
		bans += s.shards[i].bans.Len()
	}
	if logs > 64 || strikes > 64 || bans > 64 {
		t.Fatalf("the store grew past its capacity: %d logs, %d strikes, %d bans", logs, strikes, bans)
	}
}

func TestLocalStoreSharding(t *testing.T) {
	for _, c := range []struct{ capacity, shards int }{{1, 1}, {100, 1}, {127, 1}, {128, 2}, {256, 4}, {100_000, 128}, {10_000_000, 128}} {
		if got := len(newLocalStore(c.capacity).shards); got != c.shards {
			t.Errorf("capacity %d: %d shards, want %d", c.capacity, got, c.shards)
		}
	}
}

// refLog is the sliding log at its plainest: every surviving event in a
// sorted slice, trimmed at every prune.
type refLog []event

func (r *refLog) prune(now, window int64) {
	i := 0
	for i < len(*r) && (*r)[i].at <= now-2*window {
		i++
	}
	*r = (*r)[i:]
}

func (r *refLog) add(now, n int64) {
	i := 0
	for i < len(*r) && (*r)[i].at < now {
		i++
	}
	if i < len(*r) && (*r)[i].at == now {
		(*r)[i].n += n
		return
	}
	*r = append((*r)[:i], append([]event{{now, n}}, (*r)[i:]...)...)
}

func (r refLog) count(now, window int64) (c int64) {
	for _, e := range r {
		if e.at > now-window {
			c += e.n
		}
	}
	return c
}

func (r refLog) retryIn(now, window, rate, asked int64) int64 {
	k := r.count(now, window) + asked - rate
	if k <= 0 {
		return 0
	}
	if asked > rate {
		return window
	}
	var seen int64
	for _, e := range r {
		if e.at > now-window {
			if seen += e.n; seen >= k {
				return e.at + window - now
			}
		}
	}
	return window
}

func (r refLog) reset(now, window int64) int64 {
	if len(r) == 0 {
		return 0
	}
	return max(0, r[len(r)-1].at+window-now)
}

func (r *refLog) bound(limit int64) {
	var total int64
	for _, e := range *r {
		total += e.n
	}
	for total > limit && len(*r) > 0 {
		if drop := total - limit; drop >= (*r)[0].n {
			total -= (*r)[0].n
			*r = (*r)[1:]
		} else {
			(*r)[0].n -= drop
			total -= drop
		}
	}
}

func (r *refLog) remove(at, n int64) {
	for i := len(*r) - 1; i >= 0; i-- {
		if (*r)[i].at == at {
			n = min(n, (*r)[i].n)
			if (*r)[i].n -= n; (*r)[i].n == 0 {
				*r = append((*r)[:i], (*r)[i+1:]...)
			}
			return
		}
	}
}

// TestSlidingLogMatchesEagerTrim checks the log, which sheds gone events
// only when its ring is full and skips reading its events when none leave
// the window, against refLog on random calls: a clock that mostly moves on
// and sometimes jumps back, windows that change, undos and bounds.
func TestSlidingLogMatchesEagerTrim(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		l := newSlidingLog()
		var r refLog
		now := int64(1000)
		for step := 0; step < 400; step++ {
			window := []int64{5, 10, 40}[rng.IntN(3)]
			if step%50 > 3 {
				window = 10
			}
			switch x := rng.IntN(20); {
			case x == 0:
				now -= rng.Int64N(60)
			case x < 12:
				now += rng.Int64N(4)
			}
			rate := 1 + rng.Int64N(12)
			asked := 1 + rng.Int64N(3)
			l.prune(now, window)
			r.prune(now, window)
			if got, want := l.count(now, window), r.count(now, window); got != want {
				t.Fatalf("seed %d step %d: count %d, want %d", seed, step, got, want)
			}
			if got, want := l.reset(now, window, false), r.reset(now, window); got != want {
				t.Fatalf("seed %d step %d: reset %d, want %d", seed, step, got, want)
			}
			if r.count(now, window)+asked > rate {
				if got, want := l.retryIn(now, window, rate, asked), r.retryIn(now, window, rate, asked); got != want {
					t.Fatalf("seed %d step %d: retry %d, want %d", seed, step, got, want)
				}
				continue
			}
			l.addEvents(now, asked)
			r.add(now, asked)
			switch rng.IntN(10) {
			case 0:
				l.removeEvents(now, 1)
				r.remove(now, 1)
			case 1:
				l.bound(rate)
				r.bound(rate)
			}
		}
	}
}

// TestPairHashFromPlan: a pair's hash is the same whether the store
// hashes the rule's name (at) or takes it from a plan compiled from that
// rule (atPlan), for plain, grouped and digested keys: the write-back and
// the leases find the state the calls made.
func TestPairHashFromPlan(t *testing.T) {
	s := newLocalStore(1 << 12)
	for _, name := range []string{"r", "checkout:global", strings.Repeat("x", 200)} {
		p, err := (&Rule{Name: name, Limit: PerSecond(5)}).compile()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []lkey{
			{rule: name, key: "alice"},
			{rule: name, key: "alice", group: "user:1"},
			{rule: name, key: strings.Repeat("k", 64), hashed: true},
		} {
			sh1, h1 := s.at(&k)
			sh2, h2 := s.atPlan(&k, &p)
			if sh1 != sh2 || h1 != h2 {
				t.Errorf("rule %.10q, pair %+v: at gives %x, atPlan %x", name, k, h1, h2)
			}
		}
	}
	var bare plan // not compiled from a Rule: atPlan hashes the name itself
	k := lkey{rule: "r", key: "bob"}
	if _, h1 := s.at(&k); h1 != func() uint64 { _, h := s.atPlan(&k, &bare); return h }() {
		t.Error("atPlan of a plan without ruleHash differs from at")
	}
}

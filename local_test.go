package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

func TestSlidingLogKeepsTimeOrder(t *testing.T) {
	var l slidingLog
	for _, at := range []int64{10, 30, 20, 30, 5, 40} {
		l.addEvents(at, 1)
	}
	want := []event{{5, 1}, {10, 1}, {20, 1}, {30, 2}, {40, 1}}
	if got := l.events[l.head:]; len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i, e := range l.events[l.head:] {
		if e != want[i] {
			t.Fatalf("events %v, want %v", l.events[l.head:], want)
		}
	}
	if l.count(29, 10) != 4 || l.retryIn(29, 10, 4, 1) != 1 || l.reset(29, 10, false) != 21 || l.head != 0 {
		t.Fatalf("at 29: count %d retry %d reset %d head %d", l.count(29, 10), l.retryIn(29, 10, 4, 1), l.reset(29, 10, false), l.head)
	}
	l.prune(29, 10) // keeps t0 > 9: a window more than counting needs
	if l.head != 1 || l.total != 5 {
		t.Fatalf("prune left head %d total %d", l.head, l.total)
	}
	l.prune(39, 10) // keeps t0 > 19
	if l.head != 2 || l.total != 4 {
		t.Fatalf("prune left head %d total %d", l.head, l.total)
	}
	l.bound(2)
	if l.total != 2 || l.events[l.head] != (event{30, 1}) {
		t.Fatalf("bound(2) left %v", l.events[l.head:])
	}
}

func TestSlidingLogReusesItsRoom(t *testing.T) {
	var l slidingLog
	for at := int64(0); at < 64; at++ {
		l.trim(at, 8)
		l.addEvents(at, 1)
	}
	room := cap(l.events)
	at := int64(1000)
	allocs := testing.AllocsPerRun(100, func() {
		for i := 0; i < 64; i++ {
			l.trim(at, 8)
			l.addEvents(at, 1)
			at++
		}
	})
	if allocs != 0 || cap(l.events) != room {
		t.Fatalf("a steady log allocated %v times (room %d -> %d)", allocs, room, cap(l.events))
	}
}

// TestBansSurviveAFloodOfKeys fills the local limiter far past its capacity
// with new keys and with new violators: an active ban must not be evicted by
// either.
func TestBansSurviveAFloodOfKeys(t *testing.T) {
	s := newLocalStore(64)
	p := plan{rate: 1, window: int64(time.Minute / time.Microsecond), penalize: true,
		penalty: penaltyPlan{banAfter: 1, banFor: int64(time.Hour / time.Microsecond), memory: int64(time.Hour / time.Microsecond)}}
	plain := plan{rate: 1, window: p.window}
	lenient := p
	lenient.penalty.banAfter = 1000
	bad := lkey{rule: "login", key: "bad"}
	s.decide(bad, &p, 1, 0, 1, false, false)
	if d := s.decide(bad, &p, 1, 0, 1, false, false); !d.banned {
		t.Fatalf("second call %+v, want banned", d)
	}
	for i := 0; i < 10_000; i++ {
		s.decide(lkey{rule: "search", key: "k" + strconv.Itoa(i)}, &plain, 1, 1, 1, false, false)
		violator := lkey{rule: "other", key: "v" + strconv.Itoa(i)}
		s.decide(violator, &lenient, 1, 1, 1, false, false)
		if d := s.decide(violator, &lenient, 1, 1, 1, false, false); d.violations != 1 || d.banned {
			t.Fatalf("a violator's second call: %+v", d)
		}
	}
	if d := s.decide(bad, &p, 1, 2, 1, true, false); !d.banned {
		t.Fatalf("after the flood the ban is gone: %+v", d)
	}
	var logs, strikes, bans int
	for i := range s.shards {
		logs += s.shards[i].logs.Len()
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

package ratelimit

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/ladder"
)

// TestBansSurviveAFloodOfKeys fills the local limiter far past its capacity
// with new keys and with new violators: an active ban must not be evicted by
// either.
func TestBansSurviveAFloodOfKeys(t *testing.T) {
	s := newLocalStore(64)
	p := plan{meterFit: meterFit{rate: 1, window: int64(time.Minute / time.Microsecond)}, alg: algSliding, penalize: true,
		penalty: ladder.Plan{BanAfter: 1, BanFor: int64(time.Hour / time.Microsecond), Memory: int64(time.Hour / time.Microsecond)}}
	plain := plan{meterFit: meterFit{rate: 1, window: p.window}, alg: algSliding}
	lenient := p
	lenient.penalty.BanAfter = 1000
	bad := lkey{Rule: "login", Key: "bad"}
	s.admit(&bad, &p, 1, 0, 1, false, nil, "", 0)
	if d := s.admit(&bad, &p, 1, 0, 1, false, nil, "", 0); !d.banned {
		t.Fatalf("second call %+v, want banned", d)
	}
	for i := 0; i < 10_000; i++ {
		s.admit(&lkey{Rule: "search", Key: "k" + strconv.Itoa(i)}, &plain, 1, 1, 1, false, nil, "", 0)
		violator := lkey{Rule: "other", Key: "v" + strconv.Itoa(i)}
		s.admit(&violator, &lenient, 1, 1, 1, false, nil, "", 0)
		if d := s.admit(&violator, &lenient, 1, 1, 1, false, nil, "", 0); d.violations != 1 || d.banned {
			t.Fatalf("a violator's second call: %+v", d)
		}
	}
	if d := s.admit(&bad, &p, 1, 2, 1, true, nil, "", 0); !d.banned {
		t.Fatalf("after the flood the ban is gone: %+v", d)
	}
	var logs, strikes, bans int
	s.eachShard(func(sh *localShard) {
		logs += sh.meters[logMeters].Len()
		st, b := sh.ladders.Len()
		strikes += st
		bans += b
	})
	if logs > 64 || strikes > 64 || bans > 64 {
		t.Fatalf("the store grew past its capacity: %d logs, %d strikes, %d bans", logs, strikes, bans)
	}
}

// TestLocalStoreSharding: the store spreads its capacity over as many
// shards as store.ShardsFor gives (tested there), each with its share.
func TestLocalStoreSharding(t *testing.T) {
	s := newLocalStore(1000)
	if got := s.shards.Len(); got != 8 {
		t.Fatalf("capacity 1000: %d shards, want 8", got)
	}
	sh := s.shards.At(0)
	for i := range 200 {
		k, _ := localKey("r", strconv.Itoa(i))
		sh.ladders.Ban(&k, uint64(i), 0, 1)
	}
	if _, bans := sh.ladders.Len(); bans != 125 {
		t.Fatalf("a shard of a store of 1000 keeps %d bans, want 125", bans)
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
			{Rule: name, Key: "alice"},
			{Rule: name, Key: "alice", Group: "user:1"},
			{Rule: name, Key: strings.Repeat("k", 64), Hashed: true},
		} {
			sh1, h1 := s.at(&k)
			sh2, h2 := s.atPlan(&k, &p)
			if sh1 != sh2 || h1 != h2 {
				t.Errorf("rule %.10q, pair %+v: at gives %x, atPlan %x", name, k, h1, h2)
			}
		}
	}
	var bare plan // not compiled from a Rule: atPlan hashes the name itself
	k := lkey{Rule: "r", Key: "bob"}
	if _, h1 := s.at(&k); h1 != func() uint64 { _, h := s.atPlan(&k, &bare); return h }() {
		t.Error("atPlan of a plan without ruleHash differs from at")
	}
}

package ratelimit

import (
	"context"
	"testing"
	"time"
)

// TestShieldFullWithOtherPairsOnTheirWay: a call Redis allows that leaves
// a crowded pair full caches the rejection the next call would get (see
// shieldFull) while calls of other pairs of the same shard are on their
// way. Before, any reservation of the shard on its way kept it from
// caching: a hot key whose shard also held another key's calls (a group's
// other rule, or any busy key among many) paid Redis one more call per
// freed slot, a probe that found the key full again; TestHotKeyCrowd saw
// 2 such probes for every call allowed when a group's two pairs shared a
// shard.
func TestShieldFullWithOtherPairsOnTheirWay(t *testing.T) {
	e := newWBEnv(t, Options{LocalCapacity: 64}) // one shard
	if n := e.l.local.shards.Len(); n != 1 {
		t.Fatalf("a store of 64 has %d shards, want 1", n)
	}
	bucket := Rule{Name: "fill-g", Kind: GCRA, Limit: Limit{Rate: 1, Window: time.Minute, Burst: 2}}
	if r, err := e.l.AllowN(context.Background(), bucket, "k", 2); err != nil || !r.Allowed {
		t.Fatalf("bucket = %+v, %v", r, err)
	}
	if r := e.allow(e.l, bucket, "k"); r.Allowed {
		t.Fatalf("full bucket = %+v, want rejected", r)
	}

	// Another pair's call is held, its event reserved, and stays on its way.
	other := Rule{Name: "other", Limit: PerMinute(10)}
	p, k := e.pair(other, "k")
	lg := leg{k: &k, p: &p, n: 1}
	if hd, _ := e.l.local.hold(&lg, e.l.localNow()); !hd.reserved {
		t.Fatalf("the other pair's call was not reserved: %+v", hd)
	}

	e.clk.advance(time.Minute) // a token is back
	if r := e.allow(e.l, bucket, "k"); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("the token = %+v, want allowed with none remaining", r)
	}
	e.mr.Close() // from here on, only the shield can answer without degrading
	e.clk.advance(20 * time.Second)
	if r := e.allow(e.l, bucket, "k"); r != (Result{Limit: 2, RetryAfter: 40 * time.Second, ResetAfter: 100 * time.Second}) {
		t.Fatalf("after the call that filled the bucket, another pair's call on its way = %+v, want the shield's rejection", r)
	}
}

package reliability_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/redistest"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestClusterKeySlots checks, on a real 3-master Redis Cluster, the key
// layout docs/semantics.md documents ("Keys"): the limiter writes exactly the keys
// <prefix>v1:{<len>:<rule>:=<key>}:l and :p (found on the node that serves
// their slot), both keys of a pair share one slot (CLUSTER KEYSLOT), and
// keys full of braces, colons, NUL bytes and invalid UTF-8 still spread over
// many slots and every node. Without the escaping of '}', the forty keys
// "u}0".."u}39" would all hash on "{<len>:<rule>:=u" and share one slot.
func TestClusterKeySlots(t *testing.T) {
	if !testkit.HaveRedis(t) {
		t.Skip("needs redis-server and redis-cli")
	}
	cluster := redistest.StartCluster(t)
	st := clusterStore(cluster)
	ctx := context.Background()
	l, prefix := st.limiter(t, testkit.Options(testkit.NewClock()))
	penalty := &ratelimit.Penalty{BanAfter: 5, BanFor: time.Minute}

	type pair struct{ rule, key string }
	var pairs []pair
	for i := 0; i < 40; i++ {
		pairs = append(pairs, pair{"r", fmt.Sprintf("u}%d", i)})
	}
	for _, k := range []string{"{", "}", "{}", "}{", "{a}", "{b}", "a:b", "b", ":", "=", "%", "%7D", "%25",
		"k\x00", "\x00", "\xff\xfe", "{\x00}", strings.Repeat("}", 300), strings.Repeat("{x}", 100)} {
		pairs = append(pairs, pair{"r", k}, pair{"x:a}", k}, pair{"{r}", k})
	}
	pairs = append(pairs, pair{"x", "a:b"}, pair{"x:a", "b"}, pair{"x}", "k"}, pair{"x%7D", "k"})

	slotOf := func(key string) string {
		return mustDo(t, cluster.Node(0), "CLUSTER", "KEYSLOT", key)
	}
	slots := map[string]bool{}
	uSlots := map[string]bool{}
	nodes := map[string]int{}
	for _, p := range pairs {
		rule := ratelimit.Rule{Name: p.rule, Limit: ratelimit.PerMinute(1), Penalty: penalty}
		for i, want := range []bool{true, false} { // one event, one violation
			r, err := l.Allow(ctx, rule, p.key)
			if err != nil || r.Allowed != want || r.Degraded {
				t.Fatalf("call %d for rule %q key %q = %+v, %v", i, p.rule, p.key, r, err)
			}
		}
		logKey, penKey := layoutKeys(prefix, p.rule, p.key)
		ls, ps := slotOf(logKey), slotOf(penKey)
		if ls != ps {
			t.Fatalf("rule %q key %q: log %q in slot %s, penalty state %q in slot %s", p.rule, p.key, logKey, ls, penKey, ps)
		}
		node := st.node(t, logKey)
		if got := mustInt(t, node, "EXISTS", logKey, penKey); got != 2 {
			t.Fatalf("rule %q key %q: %d of the keys %q, %q exist on the node serving slot %s; the limiter wrote other keys",
				p.rule, p.key, got, logKey, penKey, ls)
		}
		if got := st.zcard(t, logKey); got != 1 {
			t.Fatalf("rule %q key %q: ZCARD = %d, want 1: pairs share state", p.rule, p.key, got)
		}
		slots[ls] = true
		nodes[node.(*redistest.Server).Addr()]++
		if p.rule == "r" && strings.HasPrefix(p.key, "u}") {
			uSlots[ls] = true
		}
	}
	if len(uSlots) < 35 {
		t.Errorf("40 keys u}0..u}39 fall in %d slots; the '}' in the key ends the hash tag", len(uSlots))
	}
	if len(nodes) != 3 {
		t.Errorf("the pairs' keys are on %d nodes, want all 3: %v", len(nodes), nodes)
	}
	// Every pair wrote exactly its two keys: nothing collided, nothing extra.
	var total int
	for i := range 3 {
		total += mustInt(t, cluster.Node(i), "DBSIZE")
	}
	if total != 2*len(pairs) {
		t.Errorf("the cluster holds %d keys, want %d (two per pair)", total, 2*len(pairs))
	}
	t.Logf("%d pairs: %d distinct slots, keys per node %v", len(pairs), len(slots), nodes)
}

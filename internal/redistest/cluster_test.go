package redistest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCluster(t *testing.T) {
	start := time.Now()
	c := StartCluster(t)
	t.Logf("cluster ready in %v", time.Since(start))

	for i := range 3 {
		n := c.Node(i)
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if v, _ := infoField(info, "cluster_state"); v != "ok" {
			t.Fatalf("node %d: cluster_state:%s", i, v)
		}
		// The bus is on the port we chose, not port+10000.
		nodes, err := n.Do("CLUSTER", "NODES")
		if err != nil {
			t.Fatal(err)
		}
		myself := ""
		for line := range strings.Lines(nodes) {
			if strings.Contains(line, "myself") {
				myself = line
			}
		}
		if want := n.Addr() + "@" + strconv.Itoa(n.busPort); !strings.Contains(myself, want) {
			t.Fatalf("node %d: CLUSTER NODES says %q, want address %s", i, myself, want)
		}
	}

	keys := map[int][]string{} // node index -> keys it owns
	for tag := 'a'; tag <= 'z'; tag++ {
		key := "{" + string(tag) + "}x"
		owner := setOnOwner(t, c, key, "v-"+key)
		keys[indexOf(c, owner)] = append(keys[indexOf(c, owner)], key)
	}
	if len(keys) != 3 {
		t.Fatalf("keys landed on %d nodes, want 3: %v", len(keys), keys)
	}

	// Stop node 1; the others keep serving their slots.
	n := c.Node(1)
	n.Stop()
	if n.Running() {
		t.Fatal("node 1 still running after Stop")
	}
	if err := c.WaitOK(10 * time.Second); err != nil {
		t.Fatalf("with node 1 down: %v", err)
	}
	if r, err := c.Node(0).Do("GET", keys[0][0]); err != nil || r != "v-"+keys[0][0] {
		t.Fatalf("GET on node 0 while node 1 is down = %q, %v", r, err)
	}

	// Restart it: it rejoins from its nodes.conf, with its slots.
	restart := time.Now()
	n.Restart()
	if err := c.WaitOK(20 * time.Second); err != nil {
		t.Fatalf("after restarting node 1: %v\n%s", err, c.logs())
	}
	t.Logf("node 1 rejoined in %v", time.Since(restart))
	for _, key := range keys[1] {
		if owner := setOnOwner(t, c, key, "again"); owner != n {
			t.Fatalf("%s now owned by %s, want the restarted node %s", key, owner.Addr(), n.Addr())
		}
	}

	// SIGKILL gives the node no chance to save anything; nodes.conf is
	// written on every configuration change, so it rejoins all the same.
	n = c.Node(2)
	n.Kill()
	n.Restart()
	if err := c.WaitOK(20 * time.Second); err != nil {
		t.Fatalf("after killing and restarting node 2: %v\n%s", err, c.logs())
	}
	for _, key := range keys[2] {
		if owner := setOnOwner(t, c, key, "again"); owner != n {
			t.Fatalf("%s now owned by %s, want the restarted node %s", key, owner.Addr(), n.Addr())
		}
	}
}

// setOnOwner sets key on the node owning its slot, checks that the other
// nodes answer MOVED to that node, and returns the owner.
func setOnOwner(t *testing.T, c *Cluster, key, value string) *Server {
	t.Helper()
	owner, err := c.NodeForKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := owner.Do("SET", key, value); err != nil || r != "OK" {
		t.Fatalf("SET %s on %s = %q, %v", key, owner.Addr(), r, err)
	}
	for i := range 3 {
		other := c.Node(i)
		if other == owner {
			continue
		}
		_, err := other.Do("GET", key)
		var re *RedisError
		if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "MOVED ") || !strings.HasSuffix(re.Msg, " "+owner.Addr()) {
			t.Fatalf("GET %s on %s: %v; want MOVED to %s", key, other.Addr(), err, owner.Addr())
		}
	}
	return owner
}

func indexOf(c *Cluster, s *Server) int {
	for i := range 3 {
		if c.Node(i) == s {
			return i
		}
	}
	return -1
}

func TestParseClusterNodes(t *testing.T) {
	text := "07c3 127.0.0.1:30004@31004,host slave e7d1 0 1426238317239 4 connected\n" +
		"e7d1 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 5462 [5461->-67ed]\n" +
		"9fd8 :0@0 master,fail? - 1 2 3 disconnected\n"
	es, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 || es[0].port != 30004 || es[1].port != 30001 || es[2].port != 0 {
		t.Fatalf("parsed %+v", es)
	}
	if !es[1].serves(0) || !es[1].serves(5460) || es[1].serves(5461) || !es[1].serves(5462) {
		t.Fatalf("slots of %+v", es[1])
	}
	if es[1].failing() || !es[2].failing() || es[2].link != "disconnected" {
		t.Fatalf("flags: %+v", es)
	}
}

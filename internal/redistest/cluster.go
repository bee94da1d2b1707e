package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clusterSize is the number of masters StartCluster creates.
const clusterSize = 3

// Cluster is a Redis Cluster of three masters without replicas, every node
// a Server on 127.0.0.1 with its own client port, bus port and directory.
type Cluster struct {
	t     testing.TB
	nodes []*Server
}

// StartCluster starts three cluster-enabled redis-servers, joins them with
// redis-cli --cluster create, which spreads the 16384 slots over them, and
// waits until every node reports cluster_state:ok. The nodes run with
// cluster-node-timeout 2000 and cluster-require-full-coverage no, so the
// slots of the other nodes stay available while one is down. The cluster bus
// uses a free port of its own (--cluster-port), not port+10000.
//
// A node can be stopped or killed and restarted through Node(i); it keeps
// nodes.conf in its directory, so it rejoins the cluster. A restarted node
// answers PING at once but reports cluster_state:fail, and answers
// CLUSTERDOWN for its own slots, for about 2 seconds; call WaitOK after
// Restart before using it. Under -short it skips the test, as Start does.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	cli := CLIBinary(t)
	c := &Cluster{t: t}
	for range clusterSize {
		c.nodes = append(c.nodes, start(t, Options{}, true))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.WaitOK(20 * time.Second); err != nil {
		t.Fatalf("redistest: cluster not ready: %v\n%s", err, c.logs())
	}
	return c
}

// Addrs returns the client addresses of the nodes, in the order of Node.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Node returns node i, for 0 <= i < 3. Its Stop, Kill and Restart act on
// that node alone.
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// WaitOK waits until every running node reports cluster_state:ok, knows all
// three nodes, and sees every running node (itself included) connected and
// not flagged as failing. A stopped node's slots do not prevent this, since
// full coverage is not required. It returns the last reason for waiting
// once timeout has passed.
func (c *Cluster) WaitOK(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check returns nil when the cluster is as WaitOK waits for it to be.
func (c *Cluster) check() error {
	running := map[int]bool{}
	for _, n := range c.nodes {
		if n.Running() {
			running[n.Port()] = true
		}
	}
	if len(running) == 0 {
		return errors.New("no node is running")
	}
	for _, n := range c.nodes {
		if !running[n.Port()] {
			continue
		}
		info, err := n.doTimeout(time.Second, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr(), err)
		}
		if v, _ := infoField(info, "cluster_state"); v != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", n.Addr(), v)
		}
		if v, _ := infoField(info, "cluster_known_nodes"); v != strconv.Itoa(clusterSize) {
			return fmt.Errorf("%s: cluster_known_nodes:%s", n.Addr(), v)
		}
		nodes, err := n.clusterNodes()
		if err != nil {
			return err
		}
		for _, e := range nodes {
			if !running[e.port] {
				continue
			}
			if e.failing() || e.link != "connected" {
				return fmt.Errorf("%s sees %s as %s, %s", n.Addr(), e.addr, e.flags, e.link)
			}
		}
	}
	return nil
}

// NodeForKey returns the node that serves key's slot, according to the
// first running node, using CLUSTER KEYSLOT and CLUSTER NODES.
func (c *Cluster) NodeForKey(key string) (*Server, error) {
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		r, err := n.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			return nil, err
		}
		slot, err := strconv.Atoi(r)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER KEYSLOT answered %q", r)
		}
		nodes, err := n.clusterNodes()
		if err != nil {
			return nil, err
		}
		for _, e := range nodes {
			if !e.serves(slot) {
				continue
			}
			for _, s := range c.nodes {
				if s.Port() == e.port {
					return s, nil
				}
			}
			return nil, fmt.Errorf("slot %d is served by %s, not a node of this cluster", slot, e.addr)
		}
		return nil, fmt.Errorf("slot %d of %q is served by no node", slot, key)
	}
	return nil, errors.New("no node is running")
}

// logs returns the logs of all nodes, for failure messages.
func (c *Cluster) logs() string {
	var b strings.Builder
	for i, n := range c.nodes {
		fmt.Fprintf(&b, "=== node %d (%s, running %v)\n%s", i, n.Addr(), n.Running(), n.Logs())
	}
	return b.String()
}

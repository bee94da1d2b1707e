package redistest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMasterSet is the name the sentinels of StartSentinel monitor the
// master under (rueidis.SentinelOption.MasterSet).
const SentinelMasterSet = "mymaster"

const (
	// sentinelCount is how many sentinels StartSentinel starts; a failover
	// needs a majority of them.
	sentinelCount = 3
	// sentinelQuorum is how many sentinels must agree the master is down.
	sentinelQuorum = 2
	// sentinelReadyTimeout bounds how long StartSentinel waits for the
	// replica to sync and the sentinels to find one another (they announce
	// themselves every 2 seconds through the master).
	sentinelReadyTimeout = 30 * time.Second
)

// Sentinel is a Redis Sentinel setup: one master, one replica and three
// sentinels, every process a Server on 127.0.0.1 with a port and directory
// of its own.
type Sentinel struct {
	t         testing.TB
	master    *Server
	replica   *Server
	sentinels []*Server
}

// StartSentinel starts a master, a replica of it (--replicaof) and three
// sentinels (redis-server sentinel.conf --sentinel, each with its own
// config file in its own directory) that monitor the master as
// SentinelMasterSet with quorum 2, down-after-milliseconds 1000 and
// failover-timeout 5000. It waits until the replica is in sync and every
// sentinel knows the master, the replica and the two other sentinels, so
// that killing the master is followed by a failover to the replica (about
// 2 to 4 seconds later). Under -short it skips the test, as Start does.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	skipShort(t)
	s := &Sentinel{t: t}
	s.master = Start(t, Options{})
	s.replica = Start(t, Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(s.master.Port())}})
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s 1000\n"+
		"sentinel failover-timeout %[1]s 5000\n"+
		"sentinel parallel-syncs %[1]s 1\n",
		SentinelMasterSet, s.master.Port(), sentinelQuorum)
	for range sentinelCount {
		s.sentinels = append(s.sentinels, startServer(t, &Server{sentinelConf: conf}))
	}
	if err := s.waitReady(sentinelReadyTimeout); err != nil {
		t.Fatalf("redistest: sentinel setup not ready: %v\n%s", err, s.Logs())
	}
	return s
}

// Master returns the server started as the master. After a failover it is
// no longer the master (see MasterAddr).
func (s *Sentinel) Master() *Server { return s.master }

// Replica returns the server started as the replica, the one a failover
// promotes.
func (s *Sentinel) Replica() *Server { return s.replica }

// Sentinels returns the three sentinels.
func (s *Sentinel) Sentinels() []*Server { return s.sentinels }

// SentinelAddrs returns the addresses of the sentinels, for
// rueidis.ClientOption.InitAddress.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, n := range s.sentinels {
		addrs[i] = n.Addr()
	}
	return addrs
}

// MasterAddr returns the master's address as the first running sentinel
// that answers reports it (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (s *Sentinel) MasterAddr() (string, error) {
	err := errors.New("no sentinel is running")
	for _, n := range s.sentinels {
		if !n.Running() {
			continue
		}
		var r string
		r, err = n.doTimeout(time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMasterSet)
		if err != nil {
			continue
		}
		host, port, ok := strings.Cut(r, "\n")
		if !ok {
			return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME answered %q", r)
		}
		return host + ":" + port, nil
	}
	return "", err
}

// Role returns the replication role srv reports in INFO replication:
// "master" or "slave".
func Role(srv *Server) (string, error) {
	info, err := srv.doTimeout(time.Second, "INFO", "replication")
	if err != nil {
		return "", err
	}
	role, ok := infoField(info, "role")
	if !ok {
		return "", errors.New("INFO replication has no role")
	}
	return role, nil
}

// waitReady waits until the setup is as StartSentinel promises.
func (s *Sentinel) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := s.check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check returns nil when the replica is in sync and every sentinel sees
// the master up, with one replica and three sentinels.
func (s *Sentinel) check() error {
	info, err := s.replica.doTimeout(time.Second, "INFO", "replication")
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	if v, _ := infoField(info, "master_link_status"); v != "up" {
		return fmt.Errorf("replica: master_link_status:%s", v)
	}
	want := fmt.Sprintf("name=%s,status=ok,address=%s,slaves=1,sentinels=%d",
		SentinelMasterSet, s.master.Addr(), sentinelCount)
	for _, n := range s.sentinels {
		info, err := n.doTimeout(time.Second, "INFO", "sentinel")
		if err != nil {
			return fmt.Errorf("sentinel %s: %w", n.Addr(), err)
		}
		if v, _ := infoField(info, "master0"); v != want {
			return fmt.Errorf("sentinel %s: master0:%s, want %s", n.Addr(), v, want)
		}
	}
	return nil
}

// Logs returns the logs of every process of the setup, for failure
// messages.
func (s *Sentinel) Logs() string {
	var b strings.Builder
	fmt.Fprintf(&b, "=== master (%s, running %v)\n%s", s.master.Addr(), s.master.Running(), s.master.Logs())
	fmt.Fprintf(&b, "=== replica (%s, running %v)\n%s", s.replica.Addr(), s.replica.Running(), s.replica.Logs())
	for i, n := range s.sentinels {
		fmt.Fprintf(&b, "=== sentinel %d (%s, running %v)\n%s", i, n.Addr(), n.Running(), n.Logs())
	}
	return b.String()
}

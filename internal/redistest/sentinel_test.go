package redistest

import (
	"testing"
	"time"
)

func TestSentinelFailover(t *testing.T) {
	begin := time.Now()
	s := StartSentinel(t)
	t.Logf("sentinel setup ready in %v", time.Since(begin))

	if got, err := s.MasterAddr(); err != nil || got != s.Master().Addr() {
		t.Fatalf("MasterAddr() = %q, %v; want %s", got, err, s.Master().Addr())
	}
	for srv, want := range map[*Server]string{s.Master(): "master", s.Replica(): "slave"} {
		if got, err := Role(srv); err != nil || got != want {
			t.Fatalf("Role(%s) = %q, %v; want %q", srv.Addr(), got, err, want)
		}
	}

	s.Master().Kill()
	killed := time.Now()
	deadline := killed.Add(60 * time.Second)
	for {
		addr, _ := s.MasterAddr()
		role, _ := Role(s.Replica())
		if addr == s.Replica().Addr() && role == "master" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failover 60 s after the kill: sentinels say %q, replica is %q\n%s", addr, role, s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("replica promoted %v after the kill", time.Since(killed))
	// The promoted replica takes writes.
	if _, err := s.Replica().Do("SET", "k", "v"); err != nil {
		t.Fatalf("SET on the promoted replica: %v", err)
	}
}

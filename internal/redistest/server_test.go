package redistest

import (
	"errors"
	"testing"
	"time"
)

func TestStartPing(t *testing.T) {
	s := Start(t, Options{})
	if s.Port() == 6379 || s.Addr() == "127.0.0.1:6379" {
		t.Fatalf("server started on the default port: %s", s.Addr())
	}
	if !s.Running() {
		t.Fatal("Running() = false right after Start")
	}
	mustDo(t, dial(t, s.Addr()), "PONG", "PING")
	if r, err := s.Do("CONFIG", "GET", "save"); err != nil || r != "save\n" {
		t.Fatalf("CONFIG GET save = %q, %v; want save off", r, err)
	}
	if r, err := s.Do("CONFIG", "GET", "dir"); err != nil || r != "dir\n"+s.Dir() {
		t.Fatalf("CONFIG GET dir = %q, %v; want %s", r, err, s.Dir())
	}
}

func TestDoSetGet(t *testing.T) {
	s := Start(t, Options{})
	if r, err := s.Do("SET", "k", "hello world"); err != nil || r != "OK" {
		t.Fatalf("SET = %q, %v", r, err)
	}
	if r, err := s.Do("GET", "k"); err != nil || r != "hello world" {
		t.Fatalf("GET = %q, %v", r, err)
	}
	if r, err := s.Do("INCRBY", "n", "5"); err != nil || r != "5" {
		t.Fatalf("INCRBY = %q, %v", r, err)
	}
	if r, err := s.Do("RPUSH", "l", "a", "b"); err != nil || r != "2" {
		t.Fatalf("RPUSH = %q, %v", r, err)
	}
	if r, err := s.Do("LRANGE", "l", "0", "-1"); err != nil || r != "a\nb" {
		t.Fatalf("LRANGE = %q, %v", r, err)
	}
	if _, err := s.Do("GET", "missing"); !errors.Is(err, ErrNil) {
		t.Fatalf("GET missing: err = %v, want ErrNil", err)
	}
	var re *RedisError
	if _, err := s.Do("NOSUCHCOMMAND"); !errors.As(err, &re) {
		t.Fatalf("unknown command: err = %v, want *RedisError", err)
	}
}

func TestExtraArgs(t *testing.T) {
	s := Start(t, Options{Args: []string{"--maxmemory", "1mb"}})
	if r, err := s.Do("CONFIG", "GET", "maxmemory"); err != nil || r != "maxmemory\n1048576" {
		t.Fatalf("CONFIG GET maxmemory = %q, %v", r, err)
	}
}

func TestKillRestartSamePort(t *testing.T) {
	s := Start(t, Options{})
	port := s.Port()
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Kill() // idempotent
	if s.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if _, err := Dial(s.Addr(), time.Second); err == nil {
		t.Fatal("dial succeeded after Kill")
	}
	s.Restart()
	if s.Port() != port || !s.Running() {
		t.Fatalf("after Restart: port %d (was %d), running %v", s.Port(), port, s.Running())
	}
	mustDo(t, dial(t, s.Addr()), "PONG", "PING")
	if _, err := s.Do("GET", "k"); !errors.Is(err, ErrNil) {
		t.Fatalf("GET k after restart: %v; want ErrNil (nothing is persisted)", err)
	}

	// Stop, then Restart of a running server, on the same port again.
	s.Stop()
	s.Stop() // idempotent
	if s.Running() {
		t.Fatal("Running() = true after Stop")
	}
	s.Restart()
	s.Restart()
	if s.Port() != port {
		t.Fatalf("port changed to %d", s.Port())
	}
	mustDo(t, dial(t, s.Addr()), "PONG", "PING")
}

func TestRunningNoticesExit(t *testing.T) {
	s := Start(t, Options{})
	// The server closes the connection as it exits; the error is expected.
	_, _ = s.Do("SHUTDOWN", "NOSAVE")
	deadline := time.Now().Add(5 * time.Second)
	for s.Running() {
		if time.Now().After(deadline) {
			t.Fatal("Running() still true 5 s after SHUTDOWN")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Restart()
	mustDo(t, dial(t, s.Addr()), "PONG", "PING")
}

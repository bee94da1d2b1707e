package redistest

import (
	"testing"
	"time"
)

func TestPause(t *testing.T) {
	s := Start(t, Options{})
	c := dial(t, s.Addr())
	mustDo(t, c, "PONG", "PING")
	s.Pause(500 * time.Millisecond)
	mustTimeOut(t, c, "PING")
	// The server answers again once the pause is over.
	if r, err := s.Do("PING"); err != nil || r != "PONG" {
		t.Fatalf("PING after the pause = %q, %v", r, err)
	}
}

func TestDebugSleep(t *testing.T) {
	s := Start(t, Options{EnableDebug: true})
	c := dial(t, s.Addr())
	mustDo(t, c, "PONG", "PING")
	s.DebugSleep(500 * time.Millisecond)
	mustTimeOut(t, c, "PING")
	if r, err := s.Do("PING"); err != nil || r != "PONG" {
		t.Fatalf("PING after the sleep = %q, %v", r, err)
	}
}

func TestKillDuringDebugSleep(t *testing.T) {
	s := Start(t, Options{EnableDebug: true})
	s.DebugSleep(time.Minute)
	start := time.Now()
	s.Kill()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Kill of a sleeping server took %v", d)
	}
	// Cleanup must not wait for the minute: the reader sees the server die.
}

package redistest

import (
	"testing"
	"time"
)

func TestProxyForwards(t *testing.T) {
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	c := dial(t, p.Addr())
	mustDo(t, c, "PONG", "PING")
	mustDo(t, c, "OK", "SET", "k", "v")
	if r, err := s.Do("GET", "k"); err != nil || r != "v" {
		t.Fatalf("GET on the server = %q, %v", r, err)
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("Conns() = %d, want 1", n)
	}
}

func TestProxyLatency(t *testing.T) {
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	c := dial(t, p.Addr())
	p.SetLatency(50 * time.Millisecond)
	start := time.Now()
	mustDo(t, c, "PONG", "PING")
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("PING through 50 ms each way took %v", d)
	}
	p.SetLatency(0)
	mustDo(t, c, "PONG", "PING")
}

func TestProxyBlackHole(t *testing.T) {
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	c := dial(t, p.Addr())
	mustDo(t, c, "PONG", "PING")
	p.BlackHole(true)
	mustTimeOut(t, c, "PING")
	// New connections are accepted too, and swallowed.
	mustTimeOut(t, dial(t, p.Addr()), "PING")
	p.BlackHole(false)
	mustDo(t, dial(t, p.Addr()), "PONG", "PING")
}

func TestProxyDropReplies(t *testing.T) {
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	c := dial(t, p.Addr())
	mustDo(t, c, "PONG", "PING")
	p.DropReplies(true)
	mustTimeOut(t, c, "INCR", "k")
	// The command ran all the same.
	if r, err := s.Do("GET", "k"); err != nil || r != "1" {
		t.Fatalf("GET on the server after a reply was dropped = %q, %v; want 1", r, err)
	}
	p.DropReplies(false)
	mustDo(t, dial(t, p.Addr()), "2", "INCR", "k")
}

func TestProxyResetAll(t *testing.T) {
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	c := dial(t, p.Addr())
	mustDo(t, c, "PONG", "PING")
	p.ResetAll()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	r, err := c.Do("PING")
	if err == nil {
		t.Fatalf("PING after ResetAll = %q, want an error", r)
	}
	t.Logf("error after ResetAll: %v", err)
	mustDo(t, dial(t, p.Addr()), "PONG", "PING")
}

func TestProxyRefuse(t *testing.T) {
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	open := dial(t, p.Addr())
	mustDo(t, open, "PONG", "PING")
	p.Refuse(true)
	// The kernel completes the handshake, so the dial itself may succeed;
	// the first command fails.
	if c, err := Dial(p.Addr(), time.Second); err == nil {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if r, err := c.Do("PING"); err == nil {
			t.Fatalf("PING through a refusing proxy = %q, want an error", r)
		}
		c.Close()
	}
	// Connections opened before are left alone.
	mustDo(t, open, "PONG", "PING")
	p.Refuse(false)
	mustDo(t, dial(t, p.Addr()), "PONG", "PING")
	if n := p.Conns(); n != 3 {
		t.Fatalf("Conns() = %d, want 3", n)
	}
}

func TestProxyCloseWithOpenConns(t *testing.T) {
	s := Start(t, Options{})
	p := NewProxy(t, s.Addr())
	p.SetLatency(time.Hour)
	c := dial(t, p.Addr())
	c.Send("PING") // held in the latency wait
	p.BlackHole(true)
	dial(t, p.Addr()).Send("PING")
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with connections open")
	}
	p.Close() // idempotent
	if _, err := Dial(p.Addr(), time.Second); err == nil {
		t.Fatal("dial succeeded after Close")
	}
}

package redistest

import (
	"errors"
	"net"
	"testing"
	"time"
)

// dial connects to addr and closes the connection when the test ends.
func dial(t *testing.T, addr string) *Conn {
	t.Helper()
	c, err := Dial(addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mustDo runs a command on c with a deadline of 2 s and fails the test
// unless the reply is want.
func mustDo(t *testing.T, c *Conn, want string, args ...string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	got, err := c.Do(args...)
	if err != nil || got != want {
		t.Fatalf("%v = %q, %v; want %q", args, got, err, want)
	}
}

// mustTimeOut sends a command on c with a 100 ms deadline and fails the
// test unless the read times out.
func mustTimeOut(t *testing.T, c *Conn, args ...string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(100 * time.Millisecond))
	got, err := c.Do(args...)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v = %q, %v; want a timeout", args, got, err)
	}
}

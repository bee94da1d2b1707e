package ratelimit_test

import (
	"net"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/testkit"
)

// TestDialSaysAtOnceWhatIsTrue: when Dial cannot connect, its log says so
// before Dial returns, once, naming the address: that Redis cannot be
// reached and decisions are local, or, for a Redis that refuses the
// credentials, that it refused them (an error, not a warning about
// reachability). Stats().Connected says the same right after Dial.
func TestDialSaysAtOnceWhatIsTrue(t *testing.T) {
	t.Run("nothing listens", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // the port refuses connections from now on
		var logs testkit.SyncBuffer
		l, err := ratelimit.Dial(testkit.ClientOption(addr), inUseOptions(&logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		got := logs.String() // as Dial returned: nothing waited for a retry
		if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "redis unreachable; deciding locally until it can be reached") ||
			!strings.Contains(got, addr) || strings.Count(got, "\n") != 1 {
			t.Errorf("the log as Dial returned, want one warning naming %s:\n%s", addr, got)
		}
		if l.Stats().Connected {
			t.Error("Stats().Connected right after a Dial that could not connect")
		}
	})
	t.Run("wrong credentials", func(t *testing.T) {
		mr := miniredis.RunT(t)
		mr.RequireAuth("secret")
		var logs testkit.SyncBuffer
		l, err := ratelimit.Dial(testkit.ClientOption(mr.Addr()), inUseOptions(&logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		got := logs.String()
		if !strings.Contains(got, "level=ERROR") || !strings.Contains(got, "redis refused the credentials") ||
			!strings.Contains(got, mr.Addr()) || strings.Contains(got, "unreachable") {
			t.Errorf("the log as Dial returned, want an error saying Redis at %s refused the credentials:\n%s", mr.Addr(), got)
		}
		if l.Stats().Connected {
			t.Error("Stats().Connected right after a Dial whose credentials were refused")
		}
	})
	t.Run("connected", func(t *testing.T) {
		mr := miniredis.RunT(t)
		var logs testkit.SyncBuffer
		l, err := ratelimit.Dial(testkit.ClientOption(mr.Addr()), inUseOptions(&logs))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		if !l.Stats().Connected || logs.String() != "" {
			t.Errorf("a Dial that connected: Connected %v, log:\n%s", l.Stats().Connected, logs.String())
		}
	})
}

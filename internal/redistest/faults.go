package redistest

import (
	"errors"
	"strconv"
	"time"
)

// Pause makes the server hold every client's commands for d, with
// CLIENT PAUSE <ms> ALL, and returns at once. Commands sent meanwhile are
// answered when the pause ends; connections stay open and new ones are
// accepted. The test fails if the server refuses the command.
func (s *Server) Pause(d time.Duration) {
	s.t.Helper()
	ms := max(d.Milliseconds(), 1)
	if _, err := s.Do("CLIENT", "PAUSE", strconv.FormatInt(ms, 10), "ALL"); err != nil {
		s.t.Fatalf("redistest: CLIENT PAUSE on %s: %v", s.Addr(), err)
	}
}

// DebugSleep sends DEBUG SLEEP on a connection of its own and returns at
// once, while the server's single thread sleeps for d: it answers nothing
// and accepts no commands until then, unlike Pause, during which the server
// still runs. The server must have been started with Options.EnableDebug.
//
// The connection first does a PING round trip, so the server has accepted
// it before DEBUG SLEEP is written: otherwise a command on a connection the
// server already knows may be served before the server gets round to
// accepting the new one. When DebugSleep returns, the command is in the
// server's socket buffer ahead of anything the caller sends later, and the
// server reads ready connections in the order they became ready. A
// goroutine reads the reply and is waited for when the test ends; if the
// server refuses the command, the test is marked failed.
func (s *Server) DebugSleep(d time.Duration) {
	s.t.Helper()
	if !s.opts.EnableDebug {
		s.t.Fatal("redistest: DebugSleep needs a server started with Options{EnableDebug: true}")
	}
	c, err := Dial(s.Addr(), 2*time.Second)
	if err != nil {
		s.t.Fatalf("redistest: DebugSleep: %v", err)
	}
	// The reply comes after d; the margin covers a loaded machine. If the
	// server dies first, the read fails at once.
	c.SetDeadline(time.Now().Add(d + 30*time.Second))
	if r, err := c.Do("PING"); err != nil || r != "PONG" {
		c.Close()
		s.t.Fatalf("redistest: DebugSleep: PING = %q, %v", r, err)
	}
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	if err := c.Send("DEBUG", "SLEEP", secs); err != nil {
		c.Close()
		s.t.Fatalf("redistest: DebugSleep: %v", err)
	}
	s.sleepers.Add(1)
	go func() {
		defer s.sleepers.Done()
		defer c.Close()
		_, err := c.Receive()
		var re *RedisError
		if errors.As(err, &re) {
			s.t.Errorf("redistest: DEBUG SLEEP on %s refused: %v", s.Addr(), err)
		}
	}()
}

// Forbid, when on, takes every permission from the default user (ACL
// SETUSER default -@all), whom clients without credentials are: every
// command of theirs then fails at once with NOPERM, and nothing is
// executed, unlike Pause, after which held commands still run. Off gives
// the permissions back. It works through a user of its own ("redistest",
// created when on), which keeps its permissions. The test fails if
// the server refuses.
func (s *Server) Forbid(on bool) {
	s.t.Helper()
	const user, pass = "redistest", "redistest-pass"
	if on { // while forbidden, the default user could not do this
		if _, err := s.Do("ACL", "SETUSER", user, "on", ">"+pass, "~*", "&*", "+@all"); err != nil {
			s.t.Fatalf("redistest: creating the ACL user on %s: %v", s.Addr(), err)
		}
	}
	c, err := Dial(s.Addr(), doTimeout)
	if err != nil {
		s.t.Fatalf("redistest: Forbid: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(doTimeout))
	if _, err := c.Do("AUTH", user, pass); err != nil {
		s.t.Fatalf("redistest: Forbid: AUTH: %v", err)
	}
	perm := "+@all"
	if on {
		perm = "-@all"
	}
	if _, err := c.Do("ACL", "SETUSER", "default", perm); err != nil {
		s.t.Fatalf("redistest: Forbid: ACL SETUSER default %s: %v", perm, err)
	}
}

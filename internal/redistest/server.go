package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Options configures a server started by Start.
type Options struct {
	// EnableDebug starts the server with --enable-debug-command local, which
	// DebugSleep needs.
	EnableDebug bool
	// Args are extra command-line arguments, such as "--maxmemory", "1mb".
	// They come last, so they override the defaults Start sets.
	Args []string
}

// Server is a redis-server process owned by a test. Its methods that can
// fail the test (Restart, Pause, DebugSleep) must be called from the
// goroutine running the test, as t.Fatal requires.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	opts    Options
	cluster bool // started with cluster mode on; busPort is then set
	// sentinelConf, when not empty, makes the process a Sentinel: it is
	// written to dir/sentinel.conf before the first launch, which Sentinel
	// needs as a writable file of its own (it rewrites it as it learns, and
	// a Restart reads what it learned).
	sentinelConf string
	port         int
	busPort      int

	lifecycle sync.Mutex // serialises Stop, Kill and Restart
	proc      atomic.Pointer[process]
	sleepers  sync.WaitGroup // goroutines left by DebugSleep
}

const (
	// readyTimeout bounds how long a start waits for the first PONG.
	readyTimeout = 10 * time.Second
	// stopGrace is how long Stop waits after SIGTERM before sending SIGKILL.
	stopGrace = 5 * time.Second
	// startAttempts is how many ports Start tries before giving up.
	startAttempts = 5
	// restartBusyWindow is how long Restart keeps retrying a busy port.
	restartBusyWindow = 10 * time.Second
	// doTimeout bounds each call of Server.Do.
	doTimeout = 10 * time.Second
)

// errExited reports that redis-server exited before it answered PING, which
// is what happens when its port was taken after freePorts chose it.
var errExited = errors.New("redis-server exited before answering PING")

// Start starts a redis-server on a free port of 127.0.0.1 with --save ""
// and --appendonly no, in a directory of its own (from t.TempDir), waits
// until it answers PING and registers a cleanup that kills it. If the
// server cannot start, or does not answer within 10 seconds, the test fails
// with the server's log. Under -short (testing.Short) it skips the test:
// a short run starts no redis-server.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	return start(t, opts, false)
}

// skipShort skips the test under -short, which starts no redis-server.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no redis-server is started")
	}
}

// start is Start, optionally with cluster mode on and a second free port for
// the cluster bus.
func start(t testing.TB, opts Options, cluster bool) *Server {
	t.Helper()
	return startServer(t, &Server{opts: opts, cluster: cluster})
}

// startServer fills in s's binary and directory, launches it on free ports
// (retrying when a port was taken meanwhile) and registers its cleanup.
func startServer(t testing.TB, s *Server) *Server {
	t.Helper()
	skipShort(t)
	s.t = t
	s.bin = Binary(t)
	s.dir = t.TempDir()
	cluster := s.cluster
	// Registered after TempDir, so it runs before the directory is removed.
	t.Cleanup(s.cleanup)
	nports := 1
	if cluster {
		nports = 2
	}
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, nports)
		s.port = ports[0]
		if cluster {
			s.busPort = ports[1]
		}
		err := s.launch()
		if err == nil {
			return s
		}
		if !errors.Is(err, errExited) || attempt == startAttempts {
			t.Fatalf("redistest: starting redis-server on port %d: %v\n%s", s.port, err, s.Logs())
		}
		t.Logf("redistest: redis-server could not start on port %d (%v); trying another port", s.port, err)
	}
}

// args returns the command line of the server.
func (s *Server) args() []string {
	if s.sentinelConf != "" {
		return append([]string{
			filepath.Join(s.dir, "sentinel.conf"), "--sentinel",
			"--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1",
			"--daemonize", "no",
			"--dir", s.dir,
			"--logfile", filepath.Join(s.dir, "redis.log"),
		}, s.opts.Args...)
	}
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}
	if s.opts.EnableDebug {
		a = append(a, "--enable-debug-command", "local")
	}
	if s.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
			"--cluster-require-full-coverage", "no",
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return append(a, s.opts.Args...)
}

// launch starts the process and waits until it is ready. On failure the
// process is gone and the error wraps errExited if it died on its own.
func (s *Server) launch() error {
	if s.sentinelConf != "" {
		conf := filepath.Join(s.dir, "sentinel.conf")
		if _, err := os.Stat(conf); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(conf, []byte(s.sentinelConf), 0o644); err != nil {
				return err
			}
		}
	}
	p, err := spawn(s.bin, s.args(), s.dir)
	if err != nil {
		return err
	}
	s.proc.Store(p)
	if err := waitReady(s.Addr(), p, readyTimeout); err != nil {
		p.kill()
		return err
	}
	return nil
}

// waitReady dials addr and sends PING until the answer is PONG, then checks
// that the server answering is p and not some other process that took the
// port. It gives up when p exits or after timeout.
func waitReady(addr string, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("%w (%v)", errExited, p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG from %s within %v (last error: %v)", addr, timeout, last)
		}
		var pid int
		pid, last = pingPid(addr)
		if last == nil {
			if pid == p.pid() {
				return nil
			}
			// Another redis-server owns the port; ours will fail to bind.
			last = fmt.Errorf("%s is served by pid %d, not by ours (%d)", addr, pid, p.pid())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pingPid sends PING to addr and, once it answers PONG, returns the
// process_id reported by INFO server.
func pingPid(addr string) (int, error) {
	c, err := Dial(addr, 200*time.Millisecond)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if r, err := c.Do("PING"); err != nil {
		return 0, err
	} else if r != "PONG" {
		return 0, fmt.Errorf("PING answered %q", r)
	}
	info, err := c.Do("INFO", "server")
	if err != nil {
		return 0, err
	}
	v, ok := infoField(info, "process_id")
	if !ok {
		return 0, errors.New("INFO server has no process_id")
	}
	return strconv.Atoi(v)
}

// infoField returns the value of field in the text of an INFO reply (or of
// CLUSTER INFO, which has the same form).
func infoField(info, field string) (string, bool) {
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == field {
			return v, true
		}
	}
	return "", false
}

// Addr returns the address of the server, "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the TCP port of the server. It does not change on Restart.
func (s *Server) Port() int { return s.port }

// Dir returns the server's own directory, holding redis.log, stdout.log and,
// for a cluster node, nodes.conf. It does not change on Restart.
func (s *Server) Dir() string { return s.dir }

// Logs returns the contents of the server's log files, for failure messages.
// Restarts append to the same files.
func (s *Server) Logs() string {
	var b strings.Builder
	for _, name := range []string{"redis.log", "stdout.log"} {
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			fmt.Fprintf(&b, "--- %s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "--- %s:\n%s", name, data)
	}
	return b.String()
}

// Running reports whether the server process is alive. It turns false as
// soon as the process exits, whatever made it exit.
func (s *Server) Running() bool {
	p := s.proc.Load()
	return p != nil && !p.exited()
}

// Stop sends SIGTERM to the server and waits for it to exit, sending SIGKILL
// if it is still alive after 5 seconds. Stopping a stopped server does
// nothing.
func (s *Server) Stop() {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if p := s.proc.Load(); p != nil && !p.exited() {
		p.stop(stopGrace)
	}
}

// Kill sends SIGKILL to the server and waits for it to exit. Killing a
// stopped server does nothing.
func (s *Server) Kill() {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if p := s.proc.Load(); p != nil && !p.exited() {
		p.kill()
	}
}

// Restart stops the server if it is running, starts it again with the same
// port, directory and options, and waits until it answers PING. If the port
// is still busy it keeps trying for 10 seconds. Data does not survive, since
// the server persists nothing by default (Options.Args may turn --appendonly
// on: the server then reloads what it wrote); a cluster node keeps its
// nodes.conf and so rejoins its cluster.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	deadline := time.Now().Add(restartBusyWindow)
	for {
		err := s.launch()
		if err == nil {
			return
		}
		if !errors.Is(err, errExited) || time.Now().After(deadline) {
			s.t.Fatalf("redistest: restarting redis-server on port %d: %v\n%s", s.port, err, s.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Do sends one command on a new connection and returns the reply rendered
// as Conn.Do renders it; an error reply is returned as a *RedisError and a
// null as ErrNil. It gives up after 10 seconds.
func (s *Server) Do(args ...string) (string, error) {
	return s.doTimeout(doTimeout, args...)
}

// doTimeout is Do with a chosen bound.
func (s *Server) doTimeout(timeout time.Duration, args ...string) (string, error) {
	c, err := Dial(s.Addr(), timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	return c.Do(args...)
}

// cleanup kills the server and waits for the goroutines DebugSleep left.
func (s *Server) cleanup() {
	s.Kill()
	s.sleepers.Wait()
}

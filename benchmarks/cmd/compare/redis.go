package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// installHint tells the reader how to get redis-server.
const installHint = "install it with `apt-get install redis-server`"

// redisServer is a redis-server process this program started on a free port
// of 127.0.0.1, in a temporary directory, persisting nothing.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// findRedisServer returns the path of redis-server, on PATH or in /usr/bin.
func findRedisServer() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if fi, err := os.Stat("/usr/bin/redis-server"); err == nil && fi.Mode().IsRegular() {
		return "/usr/bin/redis-server", nil
	}
	return "", errors.New("redis-server not found on PATH or in /usr/bin; " + installHint)
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startRedis starts `redis-server --port P --save "" --appendonly no` on a
// free loopback port and waits until it answers PING. It tries a few ports,
// since another process may take a port between freePort and the bind.
func startRedis() (*redisServer, error) {
	bin, err := findRedisServer()
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := launchRedis(bin, port)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func launchRedis(bin string, port int) (*redisServer, error) {
	dir, err := os.MkdirTemp("", "ratelimit-compare-")
	if err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so a Ctrl-C meant for us is handled by us
	// (which stops it); SIGKILL if this program dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(10 * time.Second); err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		s.stop()
		return nil, fmt.Errorf("redis-server on port %d: %w\n%s", port, err, logs)
	}
	return s, nil
}

// waitReady waits until the server answers PING and reports our pid in
// INFO server (and not another process that took the port).
func (s *redisServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.done:
			return errors.New("redis-server exited before answering PING")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v", timeout)
		}
		if pid, err := serverPid(s.addr); err == nil {
			if pid != s.cmd.Process.Pid {
				return fmt.Errorf("%s is served by pid %d, not ours (%d)", s.addr, pid, s.cmd.Process.Pid)
			}
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends SIGTERM to the server (by its pid), then SIGKILL after 5 s,
// waits for it to exit and removes its directory.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
	os.RemoveAll(s.dir)
}

// adminClient is a plain rueidis client for the harness' own commands
// (FLUSHALL, MEMORY USAGE, INFO), never used by a measured limiter.
func adminClient(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
}

// serverPid returns the process_id reported by the server at addr.
func serverPid(addr string) (int, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true,
		Dialer: net.Dialer{Timeout: 200 * time.Millisecond},
	})
	if err != nil {
		if c != nil {
			c.Close()
		}
		return 0, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return 0, err
	}
	v, ok := infoField(info, "process_id")
	if !ok {
		return 0, errors.New("INFO server has no process_id")
	}
	return strconv.Atoi(v)
}

// infoField returns the value of field in the text of an INFO reply.
func infoField(info, field string) (string, bool) {
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == field {
			return v, true
		}
	}
	return "", false
}

// flushAll empties the server, synchronously, so that a cell starts from
// the same (empty) state for every limiter.
func flushAll(ctx context.Context, c rueidis.Client) error {
	return c.Do(ctx, c.B().Flushall().Sync().Build()).Error()
}

// redisCPU returns the CPU time redis-server has used (used_cpu_sys +
// used_cpu_user of INFO cpu): its cost of a run, including network I/O.
func redisCPU(ctx context.Context, c rueidis.Client) (time.Duration, error) {
	info, err := c.Do(ctx, c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, ok := infoField(info, f)
		if !ok {
			return 0, fmt.Errorf("INFO cpu has no %s", f)
		}
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", f, err)
		}
		total += time.Duration(sec * float64(time.Second))
	}
	return total, nil
}

package redistest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one run of a child process. A goroutine waits on it from the
// start, so the child is reaped as soon as it exits and exited is accurate.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the child has exited and been reaped
	err  error         // what Wait returned; read only after done is closed
}

// spawn starts bin with args in dir. Its stdout and stderr are appended to
// dir/stdout.log, where redis-server writes the errors it meets before it
// opens its own log file (a bad option, for instance).
//
// The child gets a process group of its own, so a signal meant for it never
// reaches the test binary or its other children, and it is sent SIGKILL if
// the test binary dies without cleaning up.
func spawn(bin string, args []string, dir string) (*process, error) {
	out, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The child holds its own copy of the descriptor; ours can go.
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid returns the child's process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the child has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL if the child is still alive after grace,
// and returns once the child has been reaped. Signals go through os.Process,
// which never signals a pid that has already been reaped and reused.
func (p *process) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.kill()
	}
}

// kill sends SIGKILL and returns once the child has been reaped.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

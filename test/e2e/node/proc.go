// Package node runs the real node components the end-to-end tests and the demo need: containerd
// (Debian's 1.6, with runc and the CNI plugins), a standalone kubelet built by
// hack/build-kube.sh, memif-deviceplugin and memif-cni, and it talks to them through their own
// APIs (CRI, PodResources, the kubelet's /pods and the plugin's /readyz). Every process it starts
// is remembered by PID and stopped by PID; Teardown undoes everything it set up, in reverse order,
// and nothing else.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Proc is a process the package started.
type Proc struct {
	Name string
	Log  string // combined stdout and stderr
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs args[0] with its output appended to logFile, in its own process group so that a
// Ctrl-C of the terminal reaches only the caller, which then stops it in order.
func Start(name, logFile string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Log: logFile, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// PID of the process.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the process's exit error once it has ended.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Stop sends sig to the process (by PID) and waits up to grace for it to end, then SIGKILLs it.
// A nil or ended process is fine.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) error {
	if p == nil || p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s (pid %d) ignored %v for %v; killed", p.Name, p.PID(), sig, grace)
}

// Poll calls cond until it returns true or an error, or the deadline passes. It is the only way
// this package waits: for a condition, never for a fixed time.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return fmt.Errorf("%s: %w", what, context.Canceled)
			}
			if last != nil {
				return fmt.Errorf("%s: not after %v: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: not after %v", what, timeout)
		case <-tick.C:
		}
	}
}

package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Daemon is a long-running process of the cluster. It outlives the `cluster up` that started it,
// so it is remembered in the state file by PID and start time (a PID alone may be reused after
// the process ends) and stopped by PID.
type Daemon struct {
	Name  string   `json:"name"`
	PID   int      `json:"pid"`
	Start uint64   `json:"start"` // /proc/<pid>/stat starttime, in clock ticks since boot
	Args  []string `json:"args"`
	Log   string   `json:"log"`
}

// startDaemon starts args in a session of its own (no terminal: a Ctrl-C of `cluster up` must
// not reach it) with stdout and stderr appended to logFile and env added to this process's
// environment.
func startDaemon(name, logFile string, env []string, args ...string) (*Daemon, error) {
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeOnExec()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// Reap it if it ends while this process lives (the tests); after `cluster up` exits, init
	// adopts it.
	go func() { _ = cmd.Wait() }()
	st, err := procStart(cmd.Process.Pid)
	if err != nil {
		return nil, fmt.Errorf("%s (pid %d) ended at once: see %s", name, cmd.Process.Pid, logFile)
	}
	return &Daemon{Name: name, PID: cmd.Process.Pid, Start: st, Args: args, Log: logFile}, nil
}

// closeOnExec marks every file descriptor above stderr close-on-exec. Go opens its own so, but
// not what this process inherited: a daemon must not keep its starter's lock (`flock ... cluster
// up`) or pipe (`make test | tee`) open for its whole life.
func closeOnExec() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
}

// procStart reads the start time of a live (not zombie) process.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: fields count from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("pid %d: bad stat %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("pid %d: short stat %q", pid, s)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("pid %d has ended", pid)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 overall
}

// Alive reports whether the process this Daemon names still runs.
func (d *Daemon) Alive() bool {
	st, err := procStart(d.PID)
	return err == nil && st == d.Start
}

// Stop sends sig, waits up to grace for the process to end, then SIGKILLs it. A process that is
// already gone is fine; one that is not this Daemon's (a reused PID) is left alone.
func (d *Daemon) Stop(sig syscall.Signal, grace time.Duration) error {
	// A pidfd pins the process: checked once against the start time, every later signal and
	// wait goes to the same process even if it ends and its PID is reused meanwhile.
	fd, err := unix.PidfdOpen(d.PID, 0)
	if err != nil {
		return nil // gone
	}
	defer unix.Close(fd)
	if !d.Alive() {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stop %s (pid %d): %w", d.Name, d.PID, err)
	}
	if waitPidfd(fd, grace) {
		return nil
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	if !waitPidfd(fd, 10*time.Second) {
		return fmt.Errorf("%s (pid %d) survives SIGKILL", d.Name, d.PID)
	}
	return fmt.Errorf("%s (pid %d) ignored %v for %v; killed", d.Name, d.PID, sig, grace)
}

// waitPidfd waits until the process of a pidfd has ended (the fd turns readable), at most d.
func waitPidfd(fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if err == nil && n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
	}
}

// killPID SIGKILLs a process found by processesWith and waits for its end.
func killPID(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	waitPidfd(fd, 10*time.Second)
}

// processesWith lists the PIDs of live processes whose command line contains every one of
// words (used for what the cluster's processes start and do not report: containerd's shims).
func processesWith(words ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cmdline := string(b)
		ok := true
		for _, w := range words {
			if !strings.Contains(cmdline, w) {
				ok = false
				break
			}
		}
		if ok {
			if _, err := procStart(pid); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

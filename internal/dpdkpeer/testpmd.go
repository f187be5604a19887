package dpdkpeer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// testpmd is the process, its log, and its end.
type testpmd struct {
	cmd     *exec.Cmd
	logPath string
	keepLog bool
	exited  chan struct{} // closed once the output is read and the process reaped
	status  int           // exit status, 128+N for signal N (as a shell shows it); set before exited
}

// startTestpmd starts o's command with stdout and stderr in one pipe (their order kept), copies
// every line to the log file and hands it to line, from one goroutine, as it comes. *into is set
// before the first line is handed over.
func startTestpmd(o Options, into **testpmd, line func(string)) error {
	logf, err := openLog(o)
	if err != nil {
		return fmt.Errorf("dpdkpeer: testpmd log: %w", err)
	}
	t := &testpmd{logPath: logf.Name(), keepLog: o.LogDir != "", exited: make(chan struct{})}
	r, w, err := os.Pipe()
	if err != nil {
		logf.Close()
		t.removeLog()
		return fmt.Errorf("dpdkpeer: %w", err)
	}
	args := o.command()
	t.cmd = exec.Command(args[0], args[1:]...)
	t.cmd.Stdout, t.cmd.Stderr = w, w
	// Its own process group: Kill takes down anything it started too.
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = t.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		logf.Close()
		t.removeLog()
		return fmt.Errorf("dpdkpeer: start %s: %w", args[0], err)
	}
	*into = t
	go func() {
		t.copyLines(r, logf, line)
		r.Close()
		logf.Close()
		t.status = exitStatus(t.cmd.Wait())
		close(t.exited)
	}()
	return nil
}

// openLog opens the file testpmd's output is copied to: in LogDir, a temp file, or none at all
// (NoLog: os.DevNull, whose name Log and removeLog know).
func openLog(o Options) (*os.File, error) {
	switch {
	case o.NoLog:
		return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	case o.LogDir != "":
		return os.CreateTemp(o.LogDir, "testpmd-*.log")
	}
	return os.CreateTemp("", "memif-peer-*.log")
}

func (t *testpmd) copyLines(r io.Reader, log io.Writer, line func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		l, err := br.ReadString('\n')
		if l != "" {
			_, _ = io.WriteString(log, l)
			// testpmd's stats screens start with ANSI clear-screen codes and end lines in \r\n
			line(strings.TrimRight(l, "\r\n"))
		}
		if err != nil {
			return
		}
	}
}

// exitStatus is what a shell would show as $? for err from Wait.
func exitStatus(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			return -1
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// interrupt asks testpmd for its clean shutdown (SIGINT; it installs a handler for it) and kills
// it if it is still there after grace.
func (t *testpmd) interrupt(grace time.Duration) {
	_ = t.cmd.Process.Signal(syscall.SIGINT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-t.exited:
	case <-timer.C:
		t.kill()
	}
}

// kill ends testpmd's process group at once.
func (t *testpmd) kill() {
	select {
	case <-t.exited:
		return // reaped: the group id may name someone else's by now
	default:
	}
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
}

func (t *testpmd) removeLog() {
	if !t.keepLog && t.logPath != os.DevNull {
		_ = os.Remove(t.logPath)
	}
}

package testutil

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// holderEnv makes a test binary started by HoldFile the holder instead of running tests.
const holderEnv = "MEMIFNET_TESTUTIL_HOLD"

// How a holder keeps a file.
const (
	HoldFD      = "fd"      // an open descriptor
	HoldMapping = "mapping" // a shared mapping of the whole file, the descriptor closed
	// HoldLease: a write lease (fcntl F_SETLEASE F_WRLCK) on the open descriptor, never
	// released on a break: until the kernel's lease-break-time (45 s by default) passes, every
	// other open of the file blocks, or fails EWOULDBLOCK with O_NONBLOCK.
	HoldLease = "lease"
)

// Holder is another process that keeps a file alive, as a pod that kept (or was passed) a
// descriptor of its device would: its own process, so that what it holds is not the test's.
type Holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	Pid   int
}

func init() {
	if spec := os.Getenv(holderEnv); spec != "" {
		os.Exit(runHolder(spec))
	}
}

// HoldFile starts a process (the test binary itself) that opens path read-write and holds it
// the way how says (a mapping is written to), until Release or the end of the test.
func HoldFile(t testing.TB, path, how string) *Holder {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holderEnv+"="+how+":"+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start holder: %v", err)
	}
	h := &Holder{cmd: cmd, stdin: stdin, Pid: cmd.Process.Pid}
	t.Cleanup(h.Release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "holding" {
		h.Release()
		t.Fatalf("holder of %s (%s) did not start: %q %v", path, how, line, err)
	}
	return h
}

// Release ends the holder and waits until it is gone, with everything it held.
func (h *Holder) Release() {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	_ = h.cmd.Wait()
}

func runHolder(spec string) int {
	how, path, _ := strings.Cut(spec, ":")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	if how == HoldMapping {
		st, err := f.Stat()
		if err != nil {
			fmt.Fprintln(os.Stderr, "holder:", err)
			return 1
		}
		mem, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holder: mmap:", err)
			return 1
		}
		mem[0] = 'x'
		f.Close()
		defer syscall.Munmap(mem)
	} else {
		defer f.Close()
	}
	if how == HoldLease {
		// The break is signalled with SIGIO, which the Go runtime ignores unless notified: the
		// holder keeps the lease as a hostile pod would.
		if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
			fmt.Fprintln(os.Stderr, "holder: F_SETLEASE:", err)
			return 1
		}
	}
	fmt.Println("holding")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes our stdin
	return 0
}

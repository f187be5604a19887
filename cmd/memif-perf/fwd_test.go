package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memifnet/memifnet/internal/testutil"
)

// Forwarding: a chain generator (--mode txrx with two ports, --verify) sends through one or two
// forwarders (memif-perf --mode fwd, or DPDK testpmd io forwarding between two net_memif ports)
// and checks every byte and the order of what comes back on its second port.

// fwdArgs are the flags shared by the generator and the forwarders of a case.
func fwdArgs(c pairCase, d time.Duration) []string {
	return []string{"--size", strconv.Itoa(c.size), "--buffer-size", strconv.Itoa(c.buf),
		"--ring-size", "512", "--duration", d.String(), "--connect-timeout", "10s"}
}

// checkChain judges a generator's and its forwarders' results: all exited 0, the generator
// received verified traffic, and no forwarder dropped (the generator's window keeps every ring
// below full).
func checkChain(t *testing.T, gen result, fwds ...result) {
	t.Helper()
	defer func() { // after the checks: logBoth shows stderr once the test has failed
		logBoth(t, "generator", gen)
		for k, f := range fwds {
			logBoth(t, fmt.Sprintf("forwarder %d", k+1), f)
		}
	}()
	if gen.code != 0 {
		t.Fatalf("generator: exit %d", gen.code)
	}
	rx, tx := gen.num(t, "rx_pkts"), gen.num(t, "tx_pkts")
	if rx == 0 || rx > tx || gen.num(t, "verify_errors") != 0 || !strings.Contains(gen.stderr, "corrupt=0 lost=0 late=0") {
		t.Errorf("generator sent %v, got back %v, verify_errors=%v", tx, rx, gen.fields["verify_errors"])
	}
	for k, f := range fwds {
		if f.code != 0 {
			t.Errorf("forwarder %d: exit %d", k+1, f.code)
		}
		// Every frame the generator got back came through each forwarder.
		if fr, ft := f.num(t, "rx_pkts"), f.num(t, "tx_pkts"); ft < rx || ft > fr || f.num(t, "drops") != 0 {
			t.Errorf("forwarder %d: received %v, forwarded %v, drops %v; the generator got %v", k+1, fr, ft, f.num(t, "drops"), rx)
		}
		checkCycles(t, fmt.Sprintf("forwarder %d", k+1), f)
	}
}

var fwdCases = []pairCase{{64, 2048}, {1500, 2048}, {9000, 2048}}

// TestGoForwarderVerified: generator clients, forwarder servers (copy mode: one copy per packet),
// and generator servers with zero-copy forwarder clients: a pool each (one copy per packet), or,
// with --peers-trust-each-other, one shared pool (no copy).
func TestGoForwarderVerified(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	for _, v := range []struct {
		name       string
		zc, shared bool
	}{{"copy", false, false}, {"zero-copy", true, false}, {"shared-pool", true, true}} {
		for _, c := range fwdCases {
			t.Run(fmt.Sprintf("size%d/%s", c.size, v.name), func(t *testing.T) {
				a, b := sockName(t), sockName(t)
				fwdRole, genRole := "server", "client"
				if v.zc {
					fwdRole, genRole = "client", "server"
				}
				fargs := append(fwdArgs(c, 4*time.Second), "--mode", "fwd", "--queues", "2",
					"--role", fwdRole, "--socket", a, "--role2", fwdRole, "--socket2", b)
				gargs := append(fwdArgs(c, 2*time.Second), "--mode", "txrx", "--verify", "--queues", "2",
					"--role", genRole, "--socket", a, "--role2", genRole, "--socket2", b)
				if v.zc {
					fargs = append(fargs, "--zero-copy")
				}
				if v.shared {
					fargs = append(fargs, "--peers-trust-each-other")
				}
				first, second := fargs, gargs // the servers start first
				if v.zc {
					first, second = gargs, fargs
				}
				p1 := start(t, first...)
				waitListening(t, p1, a)
				waitListening(t, p1, b)
				p2 := start(t, second...)
				r1, r2 := p1.wait(t, 30*time.Second), p2.wait(t, 30*time.Second)
				gen, fwd := r2, r1
				if v.zc {
					gen, fwd = r1, r2
				}
				checkChain(t, gen, fwd)
				if shared := strings.Contains(fwd.stderr, "one buffer pool"); shared != v.shared {
					t.Errorf("forwarder shares one pool: %v, want %v", shared, v.shared)
				}
				if each := strings.Contains(fwd.stderr, "a buffer pool each"); each != (v.zc && !v.shared) {
					t.Errorf("forwarder has a pool per port: %v, want %v", each, v.zc && !v.shared)
				}
			})
		}
	}
}

// TestChainOfTwoGoForwarders: generator -> forwarder 1 -> forwarder 2 -> generator, with every
// role on some link: the generator is client on its first port and server on its second. The
// generator starts last, so that it sends only into a chain whose links are all coming up (it
// writes a window off after a second without replies, and a window sent into a chain still
// connecting could be written off early on a loaded machine).
func TestChainOfTwoGoForwarders(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	c := pairCase{1500, 2048}
	a, m, b := sockName(t), sockName(t), sockName(t)
	f1 := start(t, append(fwdArgs(c, 6*time.Second), "--mode", "fwd", "--role", "server", "--socket", a, "--role2", "server", "--socket2", m)...)
	waitListening(t, f1, a)
	waitListening(t, f1, m)
	f2 := start(t, append(fwdArgs(c, 5*time.Second), "--mode", "fwd", "--role", "client", "--socket", m, "--role2", "client", "--socket2", b)...)
	// A quarter of the ring in flight: should a loaded machine stall the chain for a second and
	// the generator write its window off (it says so on stderr), twice the window still fits
	// every ring, so a write-off cannot turn into drops (seen at load average 20 with half a ring).
	gen := start(t, append(fwdArgs(c, 2*time.Second), "--mode", "txrx", "--verify", "--window", "128",
		"--role", "client", "--socket", a, "--role2", "server", "--socket2", b)...)
	gr := gen.wait(t, 30*time.Second)
	r1, r2 := f1.wait(t, 30*time.Second), f2.wait(t, 30*time.Second)
	// Exact: no forwarder may drop. (Once, in CI, forwarder 1 dropped the first window into
	// forwarder 2's receive ring before forwarder 2, a client, had armed it: its link was up on
	// CONNECT, the client armed at CONNECTED. Clients now arm before CONNECT,
	// TestClientArmsBeforeConnect in pkg/memif.)
	checkChain(t, gr, r1, r2)
}

// TestFwdUsage: fwd needs two distinct ports and does not verify; a shared pool is only for fwd
// between two zero-copy clients.
func TestFwdUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "fwd"},
		{"--mode", "fwd", "--socket2", "@x", "--verify"},
		{"--mode", "rx", "--socket2", "@x"},
		{"--mode", "fwd", "--socket", "@x", "--socket2", "@x"},
		{"--mode", "fwd", "--socket2", "@x", "--peers-trust-each-other"},
		{"--mode", "txrx", "--socket2", "@x", "--zero-copy", "--peers-trust-each-other"},
		{"--mode", "fwd", "--socket", "@x", "--role2", "server", "--socket2", "@y", "--zero-copy", "--peers-trust-each-other"},
	} {
		r := start(t, args...).wait(t, 10*time.Second)
		if r.code != 2 {
			t.Errorf("memif-perf %v: exit %d, want 2 (usage)\n%s", args, r.code, r.stderr)
		}
	}
}

// testpmdFwd is hack/bench/testpmd-fwd.sh: testpmd io forwarding between two net_memif servers.
type testpmdFwd struct {
	cmd   *exec.Cmd
	ready chan struct{} // closed at "testpmd-fwd: listening"
	done  chan struct{} // closed when the script has exited
	out   []string      // its stdout lines, complete once done is closed
}

// startTestpmdFwd starts the forwarder on CPU core and waits until both ports accept clients.
func startTestpmdFwd(t *testing.T, a, b string, c pairCase, core int) *testpmdFwd {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "testpmd needs root")
	}
	if _, err := exec.LookPath("dpdk-testpmd"); err != nil {
		testutil.SkipOrFail(t, "dpdk-testpmd not found (apt-get install -y dpdk-dev librte-net-memif23)")
	}
	testutil.NeedHugepages(t, 64)
	script, err := filepath.Abs("../../hack/bench/testpmd-fwd.sh")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "testpmd.log")
	f := &testpmdFwd{ready: make(chan struct{}), done: make(chan struct{})}
	f.cmd = exec.Command(script, "--socket1", strings.TrimPrefix(a, "@"), "--socket2", strings.TrimPrefix(b, "@"),
		"--bsize", strconv.Itoa(c.buf), "--rsize", "9", "--core", strconv.Itoa(core), "--mbufs", "8192", "--log", log)
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so that cleanup can take down testpmd too
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f.cmd.Stderr = os.Stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.out = append(f.out, sc.Text())
			if sc.Text() == "testpmd-fwd: listening" {
				close(f.ready)
			}
		}
		_ = f.cmd.Wait()
		close(f.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		<-f.done
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("testpmd forwarder: %q; log (tail):\n%s", f.out, lastLines(string(b), 40))
		}
	})
	select {
	case <-f.ready:
	case <-f.done:
		t.Fatalf("testpmd forwarder ended before listening: %q", f.out)
	case <-time.After(60 * time.Second):
		t.Fatalf("testpmd forwarder not listening after 60 s")
	}
	return f
}

// stop ends the forwarder (SIGTERM: the script stops testpmd cleanly) and returns testpmd's exit
// status. DPDK 22.11's net_memif server may segfault (139) when a client leaves
// (research/dpdk-baseline.md): reported, not judged.
func (f *testpmdFwd) stop(t *testing.T) string {
	t.Helper()
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("testpmd forwarder still running 30 s after SIGTERM")
	}
	for _, l := range f.out {
		if v, ok := strings.CutPrefix(l, "testpmd_status="); ok {
			return v
		}
	}
	return "none"
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// TestTestpmdForwarderVerified: the generator's verified traffic through testpmd io forwarding
// between two net_memif ports, single-buffer and chained.
func TestTestpmdForwarderVerified(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	for _, c := range []pairCase{{64, 2048}, {1500, 2048}, {512, 128}} {
		t.Run(fmt.Sprintf("size%d-buf%d", c.size, c.buf), func(t *testing.T) {
			a, b := sockName(t), sockName(t)
			tp := startTestpmdFwd(t, a, b, c, 1)
			gen := start(t, append(fwdArgs(c, 2*time.Second), "--mode", "txrx", "--verify",
				"--role", "client", "--socket", a, "--role2", "client", "--socket2", b)...)
			gr := gen.wait(t, 60*time.Second)
			t.Logf("testpmd_status=%s", tp.stop(t))
			checkChain(t, gr)
		})
	}
}

// TestChainGoAndTestpmdForwarders: generator -> Go forwarder -> testpmd forwarder -> generator.
func TestChainGoAndTestpmdForwarders(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	c := pairCase{1500, 2048}
	a, m, b := sockName(t), sockName(t), sockName(t)
	tp := startTestpmdFwd(t, m, b, c, 1)
	fwd := start(t, append(fwdArgs(c, 5*time.Second), "--mode", "fwd", "--role", "server", "--socket", a, "--role2", "client", "--socket2", m)...)
	waitListening(t, fwd, a)
	gen := start(t, append(fwdArgs(c, 2*time.Second), "--mode", "txrx", "--verify", "--role", "client", "--socket", a, "--role2", "client", "--socket2", b)...)
	gr := gen.wait(t, 60*time.Second)
	fr := fwd.wait(t, 60*time.Second)
	t.Logf("testpmd_status=%s", tp.stop(t))
	checkChain(t, gr, fr)
}

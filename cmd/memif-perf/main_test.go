package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/internal/testutil"
)

// These tests build memif-perf and run two copies against each other, as users and CI scripts do.

func TestMain(m *testing.M) { testutil.Main(m) }

// binary builds memif-perf once per test run.
func binary(t *testing.T) string {
	t.Helper()
	return filepath.Join(testutil.Built(t, testutil.Build{Pkgs: []string{"."}}), "memif-perf")
}

type result struct {
	code   int
	stdout string
	stderr string
	fields map[string]string // the summary line's key=value pairs
}

func (r result) num(t *testing.T, key string) float64 {
	t.Helper()
	v, ok := r.fields[key]
	if !ok {
		t.Fatalf("summary has no %s:\n%s", key, r.stdout)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("summary %s=%q: %v", key, v, err)
	}
	return f
}

// checkCycles checks the busy-cycle fields of a receiver's or forwarder's summary: cycles per
// packet counted (positive), an idle share that is a share, and the clock's rate.
func checkCycles(t *testing.T, who string, r result) {
	t.Helper()
	if c := r.num(t, "busy_cycles_per_pkt"); c <= 0 {
		t.Errorf("%s: busy_cycles_per_pkt=%v", who, c)
	}
	if s := r.num(t, "idle_share"); s < 0 || s > 1 {
		t.Errorf("%s: idle_share=%v", who, s)
	}
	if m := r.num(t, "tsc_mhz"); m <= 0 {
		t.Errorf("%s: tsc_mhz=%v", who, m)
	}
}

type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	res            result
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(binary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start memif-perf: %v", err)
	}
	go func() {
		err := p.cmd.Wait()
		p.res = result{stdout: p.stdout.String(), stderr: p.stderr.String(), fields: map[string]string{}}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.res.code = ee.ExitCode()
		default:
			p.res.code = -1
		}
		lines := strings.Split(strings.TrimSpace(p.res.stdout), "\n")
		for _, kv := range strings.Fields(lines[len(lines)-1]) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				p.res.fields[k] = v
			}
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait returns the process's result, failing the test if it runs past the deadline.
func (p *proc) wait(t *testing.T, d time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("memif-perf %v still running after %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], d, p.res.stdout, p.res.stderr)
		return result{}
	}
}

// waitListening waits until an abstract SEQPACKET socket is listening, so the client's first
// dial finds it (instead of waiting out its reconnect interval).
func waitListening(t *testing.T, p *proc, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/net/unix")
		if err != nil {
			t.Fatalf("read /proc/net/unix: %v", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			// Flags 00010000 = listening, type 0005 = SOCK_SEQPACKET.
			if len(f) >= 8 && f[3] == "00010000" && f[4] == "0005" && f[7] == name {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("server exited before listening: code %d\n%s", p.res.code, p.res.stderr)
		case <-time.After(20 * time.Millisecond): // polling /proc: there is no event to wait on
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listener on %s after 10s", name)
		}
	}
}

var sockSeq int

func sockName(t *testing.T) string {
	sockSeq++
	return fmt.Sprintf("@memif-perf-test-%d-%d", os.Getpid(), sockSeq)
}

func logBoth(t *testing.T, name string, r result) {
	t.Logf("%s: exit %d, %s", name, r.code, strings.TrimSpace(r.stdout))
	if t.Failed() || testing.Verbose() {
		t.Logf("%s stderr:\n%s", name, r.stderr)
	}
}

type pairCase struct {
	size, buf int
}

// 9000 B = 5 chained buffers; 100 B in 32-byte buffers = 4 (DPDK and libmemif take buffers below
// 64 bytes, so memif-perf --buffer-size must too).
var pairCases = []pairCase{{64, 2048}, {1500, 2048}, {9000, 2048}, {100, 32}}

func common(sock string, c pairCase, d time.Duration) []string {
	return []string{"--socket", sock, "--size", strconv.Itoa(c.size), "--buffer-size", strconv.Itoa(c.buf),
		"--queues", "4", "--ring-size", "512", "--duration", d.String(), "--connect-timeout", "10s"}
}

func TestServerRxClientTxVerified(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	for _, zc := range []bool{false, true} {
		for _, c := range pairCases {
			name := fmt.Sprintf("size%d", c.size)
			if zc {
				name += "/zero-copy"
			}
			t.Run(name, func(t *testing.T) { serverRxClientTx(t, c, zc) })
		}
	}
}

// serverRxClientTx runs a verifying receiver against a verifying sender, the sender in zero-copy
// mode if asked (the server follows descriptors into its pool region).
func serverRxClientTx(t *testing.T, c pairCase, zeroCopy bool) {
	sock := sockName(t)
	srv := start(t, append(common(sock, c, 2*time.Second), "--role", "server", "--mode", "rx", "--verify")...)
	waitListening(t, srv, sock)
	args := append(common(sock, c, 2*time.Second), "--role", "client", "--mode", "tx", "--verify")
	if zeroCopy {
		args = append(args, "--zero-copy")
	}
	cli := start(t, args...)
	cr, sr := cli.wait(t, 30*time.Second), srv.wait(t, 30*time.Second)
	logBoth(t, "client tx", cr)
	logBoth(t, "server rx", sr)
	if cr.code != 0 || sr.code != 0 {
		t.Fatalf("exit codes: client %d, server %d, want 0 and 0", cr.code, sr.code)
	}
	rx, tx := sr.num(t, "rx_pkts"), cr.num(t, "tx_pkts")
	if rx == 0 || rx > tx {
		t.Errorf("server received %v of the client's %v packets", rx, tx)
	}
	if v := sr.num(t, "verify_errors"); v != 0 {
		t.Errorf("server: verify_errors=%v", v)
	}
	checkCycles(t, "server rx", sr)
	if _, ok := cr.fields["busy_cycles_per_pkt"]; ok {
		t.Errorf("a sender's summary counts busy cycles (testpmd's txonly figure is not this one): %s", cr.stdout)
	}
	if !strings.Contains(sr.stderr, "corrupt=0 lost=0 late=0") {
		t.Errorf("server did not report a clean verification:\n%s", sr.stderr)
	}
	// Both ends say how many regions the link has: the zero-copy pool is region 1.
	regions := "ring 512, 1 region(s)\n"
	if zeroCopy {
		regions = "ring 512, 2 region(s)\n"
	}
	for who, stderr := range map[string]string{"client": cr.stderr, "server": sr.stderr} {
		if !strings.Contains(stderr, regions) {
			t.Errorf("%s: link-up line without %q:\n%s", who, strings.TrimSpace(regions), stderr)
		}
	}
}

func TestServerEchoClientTxRxVerified(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	for _, c := range pairCases {
		t.Run(fmt.Sprintf("size%d", c.size), func(t *testing.T) {
			sock := sockName(t)
			// The echo side runs longer, so it is still echoing when the sender stops.
			srv := start(t, append(common(sock, c, 4*time.Second), "--role", "server", "--mode", "echo", "--verify")...)
			waitListening(t, srv, sock)
			cli := start(t, append(common(sock, c, 2*time.Second), "--role", "client", "--mode", "txrx", "--verify")...)
			cr := cli.wait(t, 30*time.Second)
			sr := srv.wait(t, 30*time.Second)
			logBoth(t, "client txrx", cr)
			logBoth(t, "server echo", sr)
			if cr.code != 0 || sr.code != 0 {
				t.Fatalf("exit codes: client %d, server %d, want 0 and 0", cr.code, sr.code)
			}
			rx, tx := cr.num(t, "rx_pkts"), cr.num(t, "tx_pkts")
			// What can be in flight when the client stops, per queue: its transmit ring (512
			// slots), the burst the echo holds (32) and its receive ring (512), which it no longer
			// reads. A loaded machine fills them (seen: 2080 short at load average 20).
			if rx == 0 || rx > tx || tx-rx > 4*(512+32+512) {
				t.Errorf("client sent %v and got back %v", tx, rx)
			}
			if v := cr.num(t, "verify_errors") + sr.num(t, "verify_errors"); v != 0 {
				t.Errorf("verify_errors: client %v, server %v", cr.num(t, "verify_errors"), sr.num(t, "verify_errors"))
			}
			// Echo sends back everything, except one burst per queue it may hold when the client
			// leaves.
			if er, et := sr.num(t, "rx_pkts"), sr.num(t, "tx_pkts"); et < rx || et > er || er-et > 4*32 {
				t.Errorf("echo received %v and sent %v; client got %v back", er, et, rx)
			}
			checkCycles(t, "server echo", sr)
		})
	}
}

// TestClientEchoForwardsVerified: an echo without --verify sends packets back with the library's
// Forward (one copy, none for a zero-copy client); a verifying txrx server checks every byte, and
// chained frames come back whole.
func TestClientEchoForwardsVerified(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	for _, zc := range []bool{false, true} {
		for _, c := range []pairCase{{64, 2048}, {9000, 2048}} {
			t.Run(fmt.Sprintf("size%d/zero-copy=%v", c.size, zc), func(t *testing.T) {
				sock := sockName(t)
				srv := start(t, append(common(sock, c, 2*time.Second), "--role", "server", "--mode", "txrx", "--verify")...)
				waitListening(t, srv, sock)
				args := append(common(sock, c, 4*time.Second), "--role", "client", "--mode", "echo")
				if zc {
					args = append(args, "--zero-copy")
				}
				cli := start(t, args...)
				sr := srv.wait(t, 30*time.Second)
				cr := cli.wait(t, 30*time.Second)
				logBoth(t, "server txrx", sr)
				logBoth(t, "client echo", cr)
				if sr.code != 0 || cr.code != 0 {
					t.Fatalf("exit codes: server %d, client %d, want 0 and 0", sr.code, cr.code)
				}
				rx, tx := sr.num(t, "rx_pkts"), sr.num(t, "tx_pkts")
				if rx == 0 || rx > tx || tx-rx > 4*(512+32+512) {
					t.Errorf("server sent %v and got back %v", tx, rx)
				}
				if v := sr.num(t, "verify_errors"); v != 0 {
					t.Errorf("verify_errors %v", v)
				}
				if er, et := cr.num(t, "rx_pkts"), cr.num(t, "tx_pkts"); er != et || et < rx {
					t.Errorf("echo received %v and sent %v; server got %v back", er, et, rx)
				}
				checkCycles(t, "client echo", cr)
			})
		}
	}
}

// The verification is live end to end: unstamped traffic fails a verifying receiver.
func TestVerifyFailsOnUnstampedTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	sock := sockName(t)
	c := pairCase{size: 512, buf: 2048}
	srv := start(t, append(common(sock, c, time.Second), "--role", "server", "--mode", "rx", "--verify")...)
	waitListening(t, srv, sock)
	cli := start(t, append(common(sock, c, time.Second), "--role", "client", "--mode", "tx")...)
	cr, sr := cli.wait(t, 30*time.Second), srv.wait(t, 30*time.Second)
	logBoth(t, "server rx", sr)
	if cr.code != 0 {
		t.Errorf("unverified sender: exit %d, want 0", cr.code)
	}
	if sr.code != 1 || sr.num(t, "verify_errors") == 0 || !strings.Contains(sr.stderr, "bad magic") {
		t.Errorf("verifying receiver of unstamped frames: exit %d, verify_errors=%s; want exit 1 and errors naming the bad magic",
			sr.code, sr.fields["verify_errors"])
	}
}

func TestWrongSecretExitsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	sock := sockName(t)
	c := pairCase{size: 64, buf: 2048}
	srv := start(t, append(common(sock, c, time.Second), "--role", "server", "--mode", "echo", "--secret", "right", "--connect-timeout", "1s")...)
	waitListening(t, srv, sock)
	began := time.Now()
	cli := start(t, append(common(sock, c, time.Second), "--role", "client", "--mode", "txrx", "--secret", "wrong")...)
	cr := cli.wait(t, 5*time.Second)
	took := time.Since(began)
	logBoth(t, "client", cr)
	if cr.code == 0 || !strings.Contains(cr.stderr, "Incorrect secret") {
		t.Errorf("client with a wrong secret: exit %d, want non-zero with the server's reason\n%s", cr.code, cr.stderr)
	}
	if took > 3*time.Second { // well under the 10 s connect timeout: it must not wait for it
		t.Errorf("client took %v to give up", took)
	}
	if _, ok := cr.fields["rx_pkts"]; !ok {
		t.Errorf("no summary line on a refused run:\n%s", cr.stdout)
	}
	sr := srv.wait(t, 10*time.Second)
	if sr.code != 3 {
		t.Errorf("server without a client: exit %d, want 3 (link never up)", sr.code)
	}
}

func TestPingAgainstEcho(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	for _, mode := range []string{"poll", "interrupt", "adaptive"} {
		t.Run(mode, func(t *testing.T) { pingAgainstEcho(t, mode) })
	}
}

// pingAgainstEcho runs ping against echo with both receivers in the given --rx-mode.
func pingAgainstEcho(t *testing.T, rxMode string) {
	sock := sockName(t)
	c := pairCase{size: 64, buf: 2048}
	// The polling echo counts no cycles, as hack/bench.sh's latency rows run it.
	counts := rxMode != "poll"
	srv := start(t, append(common(sock, c, 3*time.Second), "--role", "server", "--mode", "echo", "--queues", "1", "--rx-mode", rxMode,
		fmt.Sprintf("--record-cycles=%v", counts))...)
	waitListening(t, srv, sock)
	cli := start(t, append(common(sock, c, time.Second), "--role", "client", "--mode", "ping", "--verify", "--queues", "1", "--rx-mode", rxMode)...)
	cr := cli.wait(t, 30*time.Second)
	logBoth(t, "client ping", cr)
	if cr.code != 0 {
		t.Fatalf("ping: exit %d", cr.code)
	}
	n := cr.num(t, "samples")
	p50, p99, p999 := cr.num(t, "rtt_p50_us"), cr.num(t, "rtt_p99_us"), cr.num(t, "rtt_p999_us")
	if n == 0 || n != cr.num(t, "rx_pkts") || p50 <= 0 || p50 > p99 || p99 > p999 {
		t.Errorf("ping summary inconsistent: samples=%v rx_pkts=%v p50=%v p99=%v p999=%v", n, cr.num(t, "rx_pkts"), p50, p99, p999)
	}
	sr := srv.wait(t, 30*time.Second)
	logBoth(t, "server echo", sr)
	if _, ok := sr.fields["busy_cycles_per_pkt"]; ok != counts {
		t.Errorf("--record-cycles=%v, and the echo's summary has busy cycles: %v", counts, ok)
	}
	if counts {
		checkCycles(t, "server echo", sr)
	}
}

// TestZeroCopyHeaderOnlyModes runs the unverified zero-copy paths (TxBurstZC sender, RxBurstZC
// receiver) that the benchmark uses; the verified zero-copy runs above go through the copy API.
func TestZeroCopyHeaderOnlyModes(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	c := pairCase{size: 1500, buf: 2048}
	for _, clientMode := range []string{"tx", "rx"} {
		t.Run("client-"+clientMode, func(t *testing.T) {
			serverMode := map[string]string{"tx": "rx", "rx": "tx"}[clientMode]
			sock := sockName(t)
			srv := start(t, append(common(sock, c, 2*time.Second), "--role", "server", "--mode", serverMode, "--queues", "1")...)
			waitListening(t, srv, sock)
			cli := start(t, append(common(sock, c, 2*time.Second), "--role", "client", "--mode", clientMode, "--queues", "1", "--zero-copy")...)
			cr, sr := cli.wait(t, 30*time.Second), srv.wait(t, 30*time.Second)
			logBoth(t, "client", cr)
			logBoth(t, "server", sr)
			if cr.code != 0 || sr.code != 0 {
				t.Fatalf("exit codes: client %d, server %d", cr.code, sr.code)
			}
			rx, tx := sr, cr
			if clientMode == "rx" {
				rx, tx = cr, sr
			}
			if got, sent := rx.num(t, "rx_pkts"), tx.num(t, "tx_pkts"); got == 0 || got > sent || rx.num(t, "drops") != 0 {
				t.Fatalf("received %v of %v packets, drops %v", got, sent, rx.num(t, "drops"))
			}
		})
	}
}

// A server that refuses with "ID not found" may be one still starting (DPDK refuses clients
// until its port has started): the client waits through it until the connect timeout, and links
// once the interface is there.
func TestWaitsThroughIDNotFound(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process run")
	}
	sock := sockName(t)
	c := pairCase{size: 512, buf: 2048}
	other := start(t, append(common(sock, c, time.Second), "--role", "server", "--id", "7", "--mode", "echo", "--connect-timeout", "1s")...)
	waitListening(t, other, sock)
	cli := start(t, append(common(sock, c, time.Second), "--role", "client", "--mode", "txrx", "--verify", "--connect-timeout", "20s")...)
	if or := other.wait(t, 10*time.Second); or.code != 3 {
		t.Fatalf("server of another id: exit %d, want 3 (link never up)", or.code)
	}
	srv := start(t, append(common(sock, c, 3*time.Second), "--role", "server", "--mode", "echo", "--verify")...)
	cr, sr := cli.wait(t, 30*time.Second), srv.wait(t, 30*time.Second)
	logBoth(t, "client", cr)
	if cr.code != 0 || sr.code != 0 || cr.num(t, "rx_pkts") == 0 || !strings.Contains(cr.stderr, `"ID not found"`) {
		t.Errorf("client refused, then served: exit %d (server %d), want 0 after saying it waited through the refusal", cr.code, sr.code)
	}
}

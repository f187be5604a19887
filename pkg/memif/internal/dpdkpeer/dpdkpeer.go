// Package dpdkpeer runs DPDK's dpdk-testpmd as a memif peer for interop tests, through the
// project's ../shared/tools/dpdk-memif-peer.sh script (see its header for the options and for the
// DPDK 22.11 bugs it works around).
//
// The script's own exit status and testpmd's end-of-run summary are not to be trusted (DPDK 22.11
// net_memif may segfault on a peer's disconnect, and its port counters drop to zero after one), so
// a Peer exposes the periodic counters testpmd logs while connected (WaitStats) and the script's
// parsed last two lines, and leaves the judging to the test.
package dpdkpeer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/internal/testutil"
)

// Options map onto the script's flags; zero values leave the script's defaults.
type Options struct {
	Role      string // "server" or "client"
	Socket    string // socket path; abstract unless Filesystem
	FSSocket  bool   // a filesystem socket (--abstract no)
	ID        int
	Mode      string // io, macswap, txonly, rxonly
	PktSize   int    // txonly frame size
	BSize     int    // memif buffer size
	RSize     int    // log2 ring size
	Queues    int
	Secret    string
	MAC       string
	Core      int    // CPU to pin testpmd to
	ConnectTO int    // seconds to wait for the link (script --connect-timeout)
	LogDir    string // where testpmd's log is kept (required)
	// Extra are more script flags. A "--testpmd ARGS" among them is merged with the testpmd
	// arguments Start always adds (--no-flush-rx).
	Extra []string
}

// noFlushRx is always passed to testpmd. Without it, testpmd's start_packet_forwarding calls
// flush_fwd_rx_queues() before it launches the forwarding lcores: on the main lcore it calls
// rte_eth_rx_burst on every Rx queue (two rounds, 10 ms apart, each until a burst comes back
// empty) and frees what it gets. With memif the link comes up during port start, before that
// flush, so a peer that sends as soon as the link is up loses its first packets to it without a
// trace: net_memif counts them as received (RX-packets), the ring shows them consumed, but
// nothing is forwarded (TX-packets 0). An echo test that keeps a window of packets in flight
// then waits forever. The flush exists for NICs holding stale packets; a memif ring is empty at
// connect by construction.
const noFlushRx = "--no-flush-rx"

// Prerequisites says why DPDK interop cannot run here, or nil.
func Prerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (testpmd's EAL)")
	}
	if _, err := exec.LookPath("dpdk-testpmd"); err != nil {
		return errors.New("dpdk-testpmd not found (apt-get install -y dpdk-dev librte-net-memif23)")
	}
	pmds, _ := filepath.Glob("/usr/lib/*/dpdk/pmds-*/librte_net_memif.so*")
	if len(pmds) == 0 {
		return errors.New("DPDK net_memif PMD not found (apt-get install -y librte-net-memif23)")
	}
	if _, err := Script(); err != nil {
		return err
	}
	return nil
}

// Script finds dpdk-memif-peer.sh at ../shared/tools next to the module root.
func Script() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("dpdkpeer: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "..", "shared", "tools", "dpdk-memif-peer.sh")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("dpdkpeer: peer script: %w", err)
			}
			return filepath.Clean(p), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("dpdkpeer: no go.mod above the working directory")
		}
		dir = parent
	}
}

// HugePagesFree reports whether the kernel has free hugepages; without them testpmd runs
// --no-huge.
func HugePagesFree() bool {
	m, err := testutil.Hugepages()
	return err == nil && m.Free >= 128 // ~256 MiB of 2 MiB pages: what one peer with the default mbufs needs
}

// Peer is one running dpdk-memif-peer.sh.
type Peer struct {
	cmd     *exec.Cmd
	logPath string

	mu     sync.Mutex
	lines  []string // the script's stdout so far
	stderr strings.Builder
	change chan struct{} // closed and replaced when lines grow or the process ends
	exited bool
	done   chan struct{}
	err    error // from Wait
}

// Start launches the script. Stop it with Stop.
func Start(o Options) (*Peer, error) {
	script, err := Script()
	if err != nil {
		return nil, err
	}
	if o.LogDir == "" {
		return nil, errors.New("dpdkpeer: Options.LogDir is required")
	}
	args := o.args()
	logf, err := os.CreateTemp(o.LogDir, "testpmd-*.log")
	if err != nil {
		return nil, fmt.Errorf("dpdkpeer: %w", err)
	}
	logf.Close()
	args = append(args, "--log", logf.Name())
	testpmd := noFlushRx
	for k := 0; k < len(o.Extra); k++ {
		if o.Extra[k] == "--testpmd" && k+1 < len(o.Extra) {
			testpmd += " " + o.Extra[k+1]
			k++
			continue
		}
		args = append(args, o.Extra[k])
	}
	args = append(args, "--testpmd", testpmd)

	p := &Peer{logPath: logf.Name(), change: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(script, args...)
	// Own process group: Stop can take down testpmd too if the script hangs.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("dpdkpeer: %w", err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("dpdkpeer: %w", err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("dpdkpeer: start %s: %w", script, err)
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.broadcast()
			p.mu.Unlock()
		}
	})
	readers.Go(func() {
		b, _ := io.ReadAll(stderr)
		p.mu.Lock()
		p.stderr.Write(b)
		p.mu.Unlock()
	})
	go func() {
		readers.Wait() // Wait must not run before the pipes are drained
		err := p.cmd.Wait()
		p.mu.Lock()
		p.err, p.exited = err, true
		p.broadcast()
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// args is the script's command line for o, up to the log file and testpmd's options.
func (o Options) args() []string {
	args := []string{"--role", o.Role, "--socket", o.Socket, "--duration", "0", "--core", strconv.Itoa(o.Core)}
	if o.FSSocket {
		args = append(args, "--abstract", "no")
	}
	add := func(flag string, v int) {
		if v != 0 {
			args = append(args, flag, strconv.Itoa(v))
		}
	}
	add("--id", o.ID)
	add("--pkt-size", o.PktSize)
	add("--bsize", o.BSize)
	add("--rsize", o.RSize)
	add("--queues", o.Queues)
	add("--connect-timeout", o.ConnectTO)
	if o.Mode != "" {
		args = append(args, "--mode", o.Mode)
	}
	if o.Secret != "" {
		args = append(args, "--secret", o.Secret)
	}
	if o.MAC != "" {
		args = append(args, "--mac", o.MAC)
	}
	if !HugePagesFree() {
		// Small memory and few mbufs: testpmd zeroes all of it at start, and a 512 MiB default
		// costs ~10 s per peer on a small VM.
		args = append(args, "--no-huge", "--mem", "64", "--mbufs", "8192")
	} else {
		args = append(args, "--mbufs", "8192")
	}
	return args
}

func (p *Peer) broadcast() {
	close(p.change)
	p.change = make(chan struct{})
}

// WaitLine waits for a stdout line starting with prefix, e.g. "memif-peer: listening" or
// "memif-peer: connected". It fails early if the script exits first.
func (p *Peer) WaitLine(ctx context.Context, prefix string) error {
	for {
		p.mu.Lock()
		for _, l := range p.lines {
			if strings.HasPrefix(l, prefix) {
				p.mu.Unlock()
				return nil
			}
		}
		exited, ch := p.exited, p.change
		p.mu.Unlock()
		if exited {
			return fmt.Errorf("dpdkpeer: exited before %q:\n%s", prefix, p.Output())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dpdkpeer: waiting for %q: %w\n%s", prefix, ctx.Err(), p.Output())
		case <-ch:
		}
	}
}

// HasLine reports whether the script printed a line starting with prefix.
func (p *Peer) HasLine(prefix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// Output is what the script printed so far, stdout then stderr.
func (p *Peer) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n") + "\n--- stderr ---\n" + p.stderr.String()
}

// Log is testpmd's output so far.
func (p *Peer) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// Stats are the port counters of testpmd's latest periodic "NIC statistics" block.
type Stats struct {
	RxPkts, RxBytes, TxPkts, TxBytes uint64
}

var (
	rxLine = regexp.MustCompile(`RX-packets:\s*(\d+)\s+RX-missed:\s*\d+\s+RX-bytes:\s*(\d+)`)
	txLine = regexp.MustCompile(`TX-packets:\s*(\d+)\s+TX-errors:\s*\d+\s+TX-bytes:\s*(\d+)`)
)

// LatestStats parses the last complete counters block testpmd logged (zero if none yet).
func (p *Peer) LatestStats() Stats {
	var s Stats
	log := p.Log()
	rx, tx := rxLine.FindAllStringSubmatch(log, -1), txLine.FindAllStringSubmatch(log, -1)
	// A block prints RX before TX: pair the last TX line with the RX line of its block.
	if len(tx) == 0 || len(rx) < len(tx) {
		return s
	}
	r, t := rx[len(tx)-1], tx[len(tx)-1]
	s.RxPkts, _ = strconv.ParseUint(r[1], 10, 64)
	s.RxBytes, _ = strconv.ParseUint(r[2], 10, 64)
	s.TxPkts, _ = strconv.ParseUint(t[1], 10, 64)
	s.TxBytes, _ = strconv.ParseUint(t[2], 10, 64)
	return s
}

// WaitStats polls testpmd's log (it prints counters once a second; there is nothing to wait on
// but the file) until cond holds for the latest counters, and returns them.
func (p *Peer) WaitStats(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s := p.LatestStats()
		if cond(s) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("dpdkpeer: waiting for testpmd counters (latest %+v): %w", s, ctx.Err())
		case <-p.done:
			if s = p.LatestStats(); cond(s) {
				return s, nil
			}
			return s, fmt.Errorf("dpdkpeer: exited while waiting for counters (latest %+v):\n%s", s, p.Output())
		case <-tick.C:
		}
	}
}

// Result is the script's summary: its last two lines, parsed. Counters are the largest testpmd
// showed while connected; TestpmdStatus is reported, not judged.
type Result struct {
	RxPkts, TxPkts, RxBytes, TxBytes uint64
	Samples                          int
	TestpmdStatus                    string
	RxMpps, TxMpps                   float64
	ExitCode                         int
	Output                           string
}

// Stop sends SIGTERM (the script stops testpmd cleanly, or kills it after 10 s), waits, and
// parses the summary. A script that is still there after 20 s is killed with its process group.
func (p *Peer) Stop() (Result, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return p.result()
}

// Kill ends the script and testpmd at once (test cleanup after a failure).
func (p *Peer) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Done is closed when the script has exited.
func (p *Peer) Done() <-chan struct{} { return p.done }

func (p *Peer) result() (Result, error) {
	r := Result{Output: p.Output()}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		r.ExitCode = ee.ExitCode()
	}
	p.mu.Lock()
	lines := append([]string(nil), p.lines...)
	p.mu.Unlock()
	if len(lines) < 2 {
		return r, fmt.Errorf("dpdkpeer: no summary:\n%s", r.Output)
	}
	kv := map[string]string{}
	for _, l := range lines[len(lines)-2:] {
		for _, f := range strings.Fields(l) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
	}
	u := func(k string) uint64 { n, _ := strconv.ParseUint(kv[k], 10, 64); return n }
	f := func(k string) float64 { x, _ := strconv.ParseFloat(kv[k], 64); return x }
	if _, ok := kv["rx_mpps"]; !ok {
		return r, fmt.Errorf("dpdkpeer: last line is not the summary:\n%s", r.Output)
	}
	r.RxPkts, r.TxPkts, r.RxBytes, r.TxBytes = u("rx_pkts"), u("tx_pkts"), u("rx_bytes"), u("tx_bytes")
	r.Samples = int(u("samples"))
	r.TestpmdStatus = kv["testpmd_status"]
	r.RxMpps, r.TxMpps = f("rx_mpps"), f("tx_mpps")
	return r, nil
}

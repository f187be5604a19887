// Command memif-testpmd is the entrypoint of the DPDK image (hack/dpdk-image.sh): it starts
// dpdk-testpmd on every memif port of the pod from nothing but the ready config memifnet wrote
// into the slots (/run/memifnet/*/dpdk.args and dpdk.app-args, docs/peers.md), and ends the pod
// cleanly when the link's other end is done:
//
//	memif-testpmd [--dir /run/memifnet] [--mem 64] [--connect-timeout 2m] [-- testpmd args...]
//
// On the node, as a host port's data plane, --args names the host side's files instead
// (state/host-ports/<slot>.dpdk.args; the <slot>.dpdk.app-args beside it are read too):
//
//	memif-testpmd --args /var/lib/memifnet/state/host-ports/slot-003.dpdk.args --file-prefix host-003
//
// The testpmd arguments after "--" come last, so they override its defaults (io forwarding, the
// ports' largest queue count, one port looped onto itself). The forwarding mode retries a burst
// its Tx ring refuses for up to --tx-retry (testpmd's "set fwd <mode> retry", from a command
// file): testpmd's default is to drop it, and an echo whose peer verifies every packet must not
// lose one when the peer falls behind for a moment.
//
// testpmd's own exit status and end-of-run summary are not to be trusted with DPDK 22.11's
// net_memif (its server may segfault when the client leaves; its counters reset at a
// disconnect), so this program judges the run itself, from testpmd's log as internal/dpdkpeer
// (the testpmd supervisor the interop tests and hack/bench.sh use too) reads it: it stops testpmd
// (SIGINT) once the peer has left, and exits 0 if the link came up and testpmd forwarded
// packets, whatever testpmd's status then (reported on the last line); 1 if testpmd died while
// the peer was still there or forwarded nothing; 2 on a usage error; 3 if the link never came
// up. SIGTERM (pod deletion) stops testpmd the same way.
//
// A DPDK client connects once, at port start, and never retries: for a client port, testpmd is
// started only once something accepts connections on its socket. A server's stale socket file
// (a restarted container) is removed first: DPDK will not bind over it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/dpdkpeer"
	"github.com/memifnet/memifnet/internal/names"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitNoLink = 3
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("memif-testpmd", flag.ContinueOnError)
	dir := fs.String("dir", names.ContainerDir, "where the slots are (each port's "+names.DPDKArgsFile+", "+names.DPDKAppArgsFile+")")
	var files listFlag
	fs.Var(&files, "args", "a dpdk.args file to use instead of the slots' (repeatable; its dpdk.app-args beside it)")
	prefix := fs.String("file-prefix", "memif-testpmd", "EAL --file-prefix: unique per DPDK process on one host")
	mem := fs.Int("mem", 64, "MiB of memory for EAL --no-huge")
	mbufs := fs.Int("mbufs", 8192, "testpmd --total-num-mbufs")
	connectTO := fs.Duration("connect-timeout", 2*time.Minute, "how long to wait for a client port's server, and for the link")
	txRetry := fs.Duration("tx-retry", 5*time.Second, "how long testpmd retries a burst its Tx ring refuses before it drops it (0: drop at once, testpmd's default)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if len(files) == 0 {
		files, _ = filepath.Glob(filepath.Join(*dir, "*", names.DPDKArgsFile))
	}
	ports, err := readPorts(files)
	if err != nil {
		fmt.Fprintf(os.Stderr, "memif-testpmd: %v\n", err)
		return exitUsage
	}
	deadline := time.Now().Add(*connectTO)
	for _, p := range ports {
		if err := p.prepare(deadline); err != nil {
			fmt.Fprintf(os.Stderr, "memif-testpmd: %v\n", err)
			return exitNoLink
		}
	}
	cpu, err := pinToFirstCPU()
	if err != nil {
		fmt.Fprintf(os.Stderr, "memif-testpmd: %v\n", err)
		return exitFailed
	}
	o := options(ports, cpu, *mem, *mbufs, *prefix, fs.Args())
	o.ConnectTimeout = *connectTO
	o.StopGrace = *txRetry + 5*time.Second // a forwarding lcore may be retrying a burst when told to stop
	if *txRetry > 0 {
		f, err := retryCommands(forwardMode(fs.Args()), *txRetry)
		if err != nil {
			fmt.Fprintf(os.Stderr, "memif-testpmd: %v\n", err)
			return exitFailed
		}
		defer os.Remove(f)
		o.ExtraTestpmd = append(o.ExtraTestpmd, "--cmdline-file="+f)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	code, last := supervise(o, sigs)
	fmt.Println(last)
	return code
}

// retryStep is how long testpmd waits before each retry of a refused burst.
const retryStep = 100 * time.Microsecond

// retryCommands writes the testpmd commands that make mode retry a burst its Tx ring refuses
// for up to d (testpmd runs the file before it starts forwarding). Without them testpmd drops
// what a full ring refuses: a peer that falls behind for a moment loses packets, and an echo
// that a verifying sender counts on must not.
func retryCommands(mode string, d time.Duration) (string, error) {
	f, err := os.CreateTemp("", "memif-testpmd-*.cmd")
	if err != nil {
		return "", fmt.Errorf("testpmd command file: %w", err)
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "set fwd %s retry\nset burst tx delay %d retry %d\n",
		mode, retryStep.Microseconds(), max(1, int64(d/retryStep)))
	return f.Name(), err
}

// forwardMode is the last --forward-mode among testpmd's arguments (testpmd's default: io).
func forwardMode(args []string) string {
	mode := "io"
	for _, a := range args {
		if m, ok := strings.CutPrefix(a, "--forward-mode="); ok {
			mode = m
		}
	}
	return mode
}

// port is one slot's ready config.
type port struct {
	file   string   // its dpdk.args, for messages
	eal    []string // dpdk.args
	app    []string // dpdk.app-args
	role   string   // from the --vdev argument
	socket string
	queues int
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// readPorts reads each dpdk.args file (in order: DPDK numbers the ports in --vdev order; the
// slots' glob is sorted by slot) and the dpdk.app-args beside it.
func readPorts(files []string) ([]port, error) {
	if len(files) == 0 {
		return nil, errors.New("no dpdk.args: no Ethernet-mode memif port in this pod (see docs/peers.md)")
	}
	var ports []port
	for _, f := range files {
		p := port{file: f, queues: 1}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p.eal = strings.Fields(string(b))
		if b, err = os.ReadFile(strings.TrimSuffix(f, names.DPDKArgsFile) + names.DPDKAppArgsFile); err == nil {
			p.app = strings.Fields(string(b))
		}
		for _, w := range p.eal {
			vdev, ok := strings.CutPrefix(w, "--vdev=")
			for kv := range strings.SplitSeq(vdev, ",") {
				if k, v, _ := strings.Cut(kv, "="); ok && k == "role" {
					p.role = v
				} else if ok && k == "socket" {
					p.socket = v
				}
			}
		}
		for _, w := range p.app {
			if n, ok := strings.CutPrefix(w, "--rxq="); ok {
				p.queues, _ = strconv.Atoi(n)
			}
		}
		if p.role == "" || p.socket == "" {
			return nil, fmt.Errorf("%s: no --vdev with role= and socket=", f)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// prepare readies p's socket for testpmd: a client waits until its server accepts, a server
// removes a socket file nobody listens on.
func (p port) prepare(deadline time.Time) error {
	if p.role == "server" {
		return removeStale(p.socket)
	}
	for {
		err := probe(p.socket)
		switch {
		case err == nil:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%s: nothing accepts connections on %s: %v", p.file, p.socket, err)
		}
		time.Sleep(100 * time.Millisecond) // polling a socket in another pod: nothing to wait on
	}
}

// removeStale removes a server's socket file that nobody listens on. It looks at the path
// itself, never through a symlink: on the node, as a host port's data plane, the socket lies in
// the pod's slot, where the pod may plant anything (a link to some other socket of the node).
func removeStale(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("%s is not a socket (%v): not removing it", path, st.Mode().Type())
	}
	if err := probe(path); errors.Is(err, unix.ECONNREFUSED) {
		return os.Remove(path)
	}
	return nil
}

// probe connects to a memif control socket and hangs up at once (a memif server drops a
// client that leaves before its handshake). The listener may be in another pod's network
// namespace, so /proc/net/unix cannot tell.
func probe(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: path})
}

// pinToFirstCPU confines this process, and so testpmd and its EAL threads, to the first CPU it
// may use: testpmd needs a main and a forwarding lcore, both mapped onto that CPU.
func pinToFirstCPU() (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for cpu := range 1024 {
		if set.IsSet(cpu) {
			set.Zero()
			set.Set(cpu)
			return cpu, unix.SchedSetaffinity(0, &set)
		}
	}
	return 0, errors.New("no CPU in the affinity mask")
}

// options run testpmd on ports, its process confined to cpu (as this one is), with no hugepages:
// io forwarding on the ports' largest queue count, one port looped onto itself, two paired;
// extra testpmd arguments last, so they win.
func options(ports []port, cpu, mem, mbufs int, prefix string, extra []string) dpdkpeer.Options {
	o := dpdkpeer.Options{Core: cpu, Pinned: true, Memory: dpdkpeer.NoHuge, MemMB: mem, Mbufs: mbufs,
		Prefix: prefix, ExtraTestpmd: extra,
		// the sockets are readied (prepare), and a pod's logs keep testpmd's output
		WaitSocket: -1, NoLog: true, UntilPeerLeaves: true}
	if len(ports) > 1 {
		o.Topology = "paired"
	}
	for _, p := range ports {
		o.PortArgs = append(o.PortArgs, p.eal...)
		o.Queues = max(o.Queues, p.queues)
	}
	return o
}

// supervise runs testpmd, copies its output to stdout, stops it when the peer has left, the link
// did not come up in time, or a signal comes, and judges the run: the exit code and the last line.
func supervise(o dpdkpeer.Options, sigs <-chan os.Signal) (int, string) {
	o.Echo = func(l string) { fmt.Println(l) }
	var up atomic.Bool
	o.Report = func(msg string, e dpdkpeer.Event) {
		switch {
		case e == dpdkpeer.Connected:
			up.Store(true)
			fmt.Println("memif-testpmd: link up")
		case e == 0 && !up.Load():
			// the command line, why the link did not come up; once it was up, the last line
			// says how it ended (and testpmd's status, which is not judged)
			fmt.Fprintln(os.Stderr, "memif-testpmd: "+strings.TrimPrefix(msg, "memif-peer: "))
		}
	}
	p, err := dpdkpeer.Start(o)
	if err != nil {
		return exitFailed, fmt.Sprintf("memif-testpmd: %v; exit=%d", err, exitFailed)
	}
	var sig os.Signal
	select {
	case sig = <-sigs:
	case <-p.Done():
	}
	r := p.Stop()
	if r.Reason == "stopped" && sig != nil { // no earlier reason: the signal is why
		r.Reason = "stopped by " + sig.String()
	}
	return judge(r, p.Seen(dpdkpeer.Connected), p.Seen(dpdkpeer.Disconnected))
}

// judge says the exit code and the last line: the link came up and testpmd forwarded packets,
// whatever testpmd's status; testpmd dying while the peer was still there fails.
func judge(r dpdkpeer.Result, up, left bool) (int, string) {
	code := exitOK
	switch {
	case !up:
		code = exitNoLink
	case !left && r.ExitedByItself, r.TxPkts == 0:
		code = exitFailed
	}
	return code, fmt.Sprintf("memif-testpmd: %s; link_up=%t peer_left=%t tx_pkts=%d testpmd_status=%d exit=%d",
		r.Reason, up, left, r.TxPkts, r.TestpmdStatus, code)
}

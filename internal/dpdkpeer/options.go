package dpdkpeer

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Options describe one testpmd peer. Zero values give what an interop test wants: an echo (io)
// peer with small memory, on hugepages when enough are free.
type Options struct {
	// Role is "server" (memif listener) or "client"; required unless PortArgs are given.
	Role string
	// Socket is the control socket path (required unless PortArgs are given); abstract
	// ("\0"+Socket) unless FSSocket.
	Socket   string
	FSSocket bool // a filesystem socket at Socket (socket-abstract=no)
	ID       int  // memif interface id; must match the peer's
	// Mode is testpmd's forwarding mode: io (echo, the default), macswap, txonly or rxonly.
	Mode string
	// Topology is testpmd's --port-topology: loop (the default: io and macswap answer on the
	// port they received on) or paired (two ports forwarded to each other).
	Topology string
	PktSize  int    // txonly frame size (testpmd --txpkts; default 64)
	BSize    int    // memif buffer size (0: DPDK's 2048); the client's value rules
	RSize    int    // log2 of the ring size (0: DPDK's 10); the client's value rules
	Queues   int    // queue pairs (0: 1); one forwarding lcore serves them all
	Secret   string // memif secret (at most 24 bytes)
	MAC      string // the DPDK port's address (default random)
	ZeroCopy bool   // net_memif zero-copy (a client then exports its memory as regions 1..N)
	// Core is the CPU the whole process is pinned to: testpmd needs a main lcore and a
	// forwarding lcore, so both are mapped onto it (--lcores (0,1)@Core) and the process runs
	// under taskset; the main lcore sleeps in the stats loop.
	Core int
	// Pinned says the caller's process is already confined to Core (memif-testpmd pins itself
	// in its pod's CPU set), so testpmd, which inherits that, is started without taskset.
	Pinned bool
	// Duration stops the peer that long after the link came up (0: run until Stop).
	Duration time.Duration
	// UntilPeerLeaves stops the peer once its link has gone down (a client always stops then:
	// a DPDK client never reconnects; a server would wait for another client).
	UntilPeerLeaves bool
	// StopGrace is how long Stop waits for testpmd's clean exit before it kills it (0: 10 s).
	StopGrace time.Duration
	// ConnectTimeout stops a peer whose link is not up that long after its start (0: 60 s;
	// negative: wait forever).
	ConnectTimeout time.Duration
	// WaitSocket is how long a client waits for a listener on the socket before starting
	// testpmd (0: 10 s; negative: not at all): DPDK's memif client connects exactly once, at
	// port start, and never retries.
	WaitSocket time.Duration
	Mbufs      int    // mbuf pool size (0: 8192, enough for every test and quick to set up)
	Memory     Memory // hugepages or not (default: hugepages when enough are free)
	MemMB      int    // memory for NoHuge (0: 64 MiB)
	Prefix     string // EAL --file-prefix (default unique per peer); must differ per process
	LogDir     string // keep testpmd's log in a file here (default: a temp file, removed at exit)
	// NoLog keeps no copy of testpmd's output (Log is empty): a peer that runs for days would
	// fill a disk with its counters, printed every 2 s.
	NoLog    bool
	ExtraEAL []string // more EAL arguments
	// ExtraTestpmd are more testpmd arguments (after the ones Start always passes).
	ExtraTestpmd []string
	// Echo, if set, gets a copy of testpmd's output as it comes (the command's --verbose).
	Echo func(line string)
	// Report, if set, gets every message as the peer reports it (see Peer.Output), with the
	// event it reports (0 for others: the command line, errors).
	Report func(msg string, e Event)
	// Vdev, if set, is the whole net_memif device argument (what follows --vdev=, e.g. from a
	// generated dpdk.args), used instead of the one the fields above build. Role, Socket and
	// FSSocket must still say what it says: Start waits for the listener by them.
	Vdev string
	// PortArgs, if set, are the EAL arguments of the ports, one or more, as memifnet's ready
	// configs have them (each port's dpdk.args: its --vdev= and what the port needs, such as
	// --single-file-segments), in port order, used instead of the device the fields build.
	// Role and Socket may then be empty: the caller has readied the ports' sockets.
	PortArgs []string
}

// Memory selects where testpmd's memory comes from.
type Memory int

const (
	// AutoMemory uses hugepages when HugePagesFree, else NoHuge.
	AutoMemory Memory = iota
	// Hugepages runs EAL --in-memory: no hugepage files and no /var/run/dpdk state left
	// behind, even after a crash (multi-process is not needed).
	Hugepages
	// NoHuge runs EAL --no-huge -m MemMB: memfd-backed memory, which net_memif 22.11 takes for
	// copy and zero-copy alike. (--no-huge implies legacy memory, which refuses --in-memory.)
	NoHuge
)

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

var prefixSeq atomic.Int64

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	ports := len(o.PortArgs) > 0
	if o.Role != "server" && o.Role != "client" && !(ports && o.Role == "") {
		return o, fmt.Errorf("dpdkpeer: role %q, want server or client", o.Role)
	}
	if o.Socket == "" && !ports {
		return o, errors.New("dpdkpeer: no socket")
	}
	if o.Mode == "" {
		o.Mode = "io"
	}
	switch o.Mode {
	case "io", "macswap", "txonly", "rxonly":
	default:
		return o, fmt.Errorf("dpdkpeer: mode %q, want io, macswap, txonly or rxonly", o.Mode)
	}
	// Every vdev argument is one key=value of a comma-separated list.
	for _, v := range []string{o.Socket, o.Secret, o.MAC} {
		if strings.ContainsAny(v, ",=") {
			return o, fmt.Errorf("dpdkpeer: %q: no ',' or '=' in a vdev argument", v)
		}
	}
	if o.Topology == "" {
		o.Topology = "loop"
	}
	if o.Topology != "loop" && o.Topology != "paired" {
		return o, fmt.Errorf("dpdkpeer: port topology %q, want loop or paired", o.Topology)
	}
	o.Queues = max(o.Queues, 1)
	if o.PktSize == 0 {
		o.PktSize = 64
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 60 * time.Second
	}
	if o.StopGrace == 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.WaitSocket == 0 {
		o.WaitSocket = 10 * time.Second
	}
	if o.Mbufs == 0 {
		o.Mbufs = 8192
	}
	if o.MemMB == 0 {
		// Small: testpmd zeroes all of it at start, and 512 MiB costs ~10 s per peer here.
		o.MemMB = 64
	}
	if o.Memory == AutoMemory {
		o.Memory = NoHuge
		if HugePagesFree() {
			o.Memory = Hugepages
		}
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("memifnet-peer-%s-%d-%d", cmp.Or(o.Role, "ports"), os.Getpid(), prefixSeq.Add(1))
	}
	if strings.ContainsAny(o.Prefix, "/") || o.Prefix == "." || o.Prefix == ".." {
		return o, fmt.Errorf("dpdkpeer: file prefix %q names a path", o.Prefix)
	}
	return o, nil
}

// socketName is the socket as /proc/net/unix and Go's net package spell it ("@" for abstract).
func (o Options) socketName() string {
	if o.FSSocket {
		return o.Socket
	}
	return "@" + o.Socket
}

// vdev is the net_memif device string.
func (o Options) vdev() string {
	if o.Vdev != "" {
		return o.Vdev
	}
	abstract := "yes"
	if o.FSSocket {
		abstract = "no"
	}
	v := fmt.Sprintf("net_memif%d,role=%s,id=%d,socket=%s,socket-abstract=%s", o.ID, o.Role, o.ID, o.Socket, abstract)
	for _, kv := range [][2]string{
		{"bsize", itoaNonZero(o.BSize)}, {"rsize", itoaNonZero(o.RSize)}, {"secret", o.Secret}, {"mac", o.MAC},
	} {
		if kv[1] != "" {
			v += "," + kv[0] + "=" + kv[1]
		}
	}
	if o.ZeroCopy {
		v += ",zero-copy=yes"
	}
	return v
}

func itoaNonZero(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// Command is the command line Start runs for o, with o's defaults.
func (o Options) Command() ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return o.command(), nil
}

// command is the argument list: taskset (unless Pinned), testpmd, its EAL arguments, "--", its
// own.
func (o Options) command() []string {
	core := strconv.Itoa(o.Core)
	var args []string
	if !o.Pinned {
		args = []string{"taskset", "-c", core}
	}
	args = append(args, "dpdk-testpmd",
		"--lcores", "(0,1)@"+core, "--file-prefix", o.Prefix, "--no-pci", "--no-telemetry",
		// debug: the handshake and "Disconnected, id:" (which 22.11 logs at debug level)
		"--log-level", "pmd.net.memif:debug")
	if len(o.PortArgs) > 0 {
		args = append(args, o.PortArgs...)
	} else {
		args = append(args, "--vdev", o.vdev())
	}
	if o.Memory == NoHuge {
		args = append(args, "--no-huge", "-m", strconv.Itoa(o.MemMB))
	} else {
		args = append(args, "--in-memory")
	}
	if o.ZeroCopy {
		// the PMD refuses zero-copy without it ("Zero-copy doesn't support multi-file segments")
		args = append(args, "--single-file-segments")
	}
	args = append(args, o.ExtraEAL...)
	args = append(args, "--",
		"--forward-mode="+o.Mode, "--port-topology="+o.Topology,
		// non-interactive: start forwarding at once and print the counters every second
		"--auto-start", "--stats-period", "1", noFlushRx,
		"--nb-cores=1", "--rxq="+strconv.Itoa(o.Queues), "--txq="+strconv.Itoa(o.Queues),
		"--total-num-mbufs="+strconv.Itoa(o.Mbufs))
	if o.Mode == "txonly" {
		args = append(args, "--txpkts="+strconv.Itoa(o.PktSize))
	}
	return append(args, o.ExtraTestpmd...)
}

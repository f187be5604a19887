// Command memif-perf is a testpmd-like traffic tool for memif links: it sends, receives, echoes or
// pings over a memif interface, or forwards between two (--mode fwd, like testpmd's io forwarding
// with paired ports), optionally verifying every payload byte, prints a stats line each second
// and ends with one machine-readable summary line on stdout:
//
//	rx_pkts=N rx_mpps=X tx_pkts=N tx_mpps=X drops=N verify_errors=N
//
// (ping mode appends rtt_p50_us=.. rtt_p99_us=.. rtt_p999_us=.. samples=N; rx, echo and fwd append
// busy_cycles_per_pkt=X idle_share=X tsc_mhz=N, counted as testpmd's --record-core-cycles counts
// its "CPU cycles/packet": docs/performance.md, "Busy cycles per packet"; not with
// --record-cycles=false). Exit codes: 0 ok, 1
// verification failed (or a verified run received nothing), 2 usage, 3 link never up, 4 the peer
// refused the handshake.
//
// --metrics ADDR serves the ports' Prometheus metrics (pkg/memif/memifprom: link state, per-queue
// packets, bytes, drops, ring-full) at http://ADDR/metrics during the run.
//
// In a pod wired by memif-cni, --port NAME opens the port memif-cni described in
// /run/memifnet/*/port.json ($MEMIFNET_DIR overrides the directory) with memif.PortConfig: role,
// socket, id, secret, mode, queues and sizes then come from port.json, and the flags that would
// set them are refused.
//
// A second port (--socket2, --role2, --id2, --secret2, or --port2 NAME; the same defaults as the
// first) is for two modes: fwd, which forwards every frame received on either port to the other,
// burst by burst, dropping (and counting) what the other side has no room for; and txrx, which
// sends on the first port and receives (and with --verify checks) on the second: a generator and
// sink in one process for a chain of forwarders. In fwd, rx counts frames received on both
// ports and tx frames forwarded; --queues, --ring-size, --buffer-size and --zero-copy apply to
// both ports. Two zero-copy clients have a buffer pool each, and forwarding copies each frame
// once; with --peers-trust-each-other they share one pool and forwarding copies nothing, but each
// port's peer then maps the other port's frames too (read and write): only for two peers that
// are one party (docs/security.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/cmd/memif-perf/internal/traffic"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/portspec"
)

func main() { os.Exit(run(os.Args[1:])) }

// run is the whole program: the flags make a session, the session's result is the exit code.
func run(args []string) int {
	fs := flag.NewFlagSet("memif-perf", flag.ContinueOnError)
	f := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return traffic.ExitUsage // the flag package said why
	}
	s, err := f.session(fs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "memif-perf: %v\n", err)
		return traffic.ExitUsage
	}
	if *f.cpuProfile != "" {
		stop, err := startProfile(*f.cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "memif-perf: --cpuprofile: %v\n", err)
			return traffic.ExitUsage
		}
		defer stop()
	}
	// SIGINT/SIGTERM end the run early; the summary is still printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return s.Run(ctx)
}

// flags are the command line, as parsed.
type flags struct {
	mode, mac, peerMAC, logLevel, cpuProfile, rxMode   *string
	metrics                                            *string
	size, burst, queues, ringSize, bufSize, spins, win *int
	duration, connectTO                                *time.Duration
	verify, zeroCopy, cycles, trustPeers               *bool
	ports                                              [2]portFlags
}

// portFlags are the flags of one port: --role, --socket, ... for the first, --role2, ... for the
// second.
type portFlags struct {
	suffix                   string // "" or "2"
	role, sock, secret, port *string
	id                       *uint
}

func defineFlags(fs *flag.FlagSet) *flags {
	f := &flags{
		mode:       fs.String("mode", "rx", "tx | rx | txrx | echo | ping | fwd (fwd and a two-port txrx use a second port: --socket2, --role2, --id2, --secret2 or --port2)"),
		size:       fs.Int("size", 64, "frame size in bytes, Ethernet header included"),
		burst:      fs.Int("burst", 32, "packets per burst"),
		queues:     fs.Int("queues", 1, "queue pairs; queue i is polled by its own goroutine"),
		ringSize:   fs.Int("ring-size", memif.DefaultRingSize, "ring entries (power of two; the client's value is used)"),
		bufSize:    fs.Int("buffer-size", memif.DefaultBufferSize, "buffer size in bytes (the client's value is used); larger frames are chained"),
		duration:   fs.Duration("duration", 10*time.Second, "how long to run after the link came up (0 = until interrupted)"),
		connectTO:  fs.Duration("connect-timeout", 30*time.Second, "how long to wait for the link"),
		verify:     fs.Bool("verify", false, "stamp every payload with a sequence number and checksum, and check every received byte"),
		mac:        fs.String("mac", "02:fe:00:00:00:01", "source MAC of sent frames"),
		peerMAC:    fs.String("peer-mac", "02:00:00:00:00:00", "destination MAC of sent frames (testpmd's default peer address)"),
		logLevel:   fs.String("log-level", "warn", "library log level: debug, info, warn, error"),
		cpuProfile: fs.String("cpuprofile", "", "write a pprof CPU profile of the whole run to this file"),
		metrics:    fs.String("metrics", "", "serve the ports' Prometheus metrics (pkg/memif/memifprom) at http://ADDR/metrics during the run, e.g. :9100"),
		rxMode:     fs.String("rx-mode", "poll", "how receivers wait: poll (spin), interrupt (sleep on the ring eventfd after each empty poll) or adaptive (sleep after --spins empty polls)"),
		spins:      fs.Int("spins", 1000, "adaptive mode: empty polls before sleeping"),
		win:        fs.Int("window", 0, "txrx: packets in flight per queue (0: half the receiving ring; negative: no bound)"),
		cycles:     fs.Bool("record-cycles", true, "rx, echo, fwd: count busy TSC cycles per packet as testpmd --record-core-cycles does (two or three counter reads per poll; off for latency runs against a testpmd without the flag)"),
		zeroCopy:   fs.Bool("zero-copy", false, "client: announce a buffer pool and point descriptors at it (no copy on the peer's side of the region); fwd between two zero-copy clients: a pool each, one copy per frame"),
		trustPeers: fs.Bool("peers-trust-each-other", false, "fwd between two zero-copy clients: share one buffer pool, no copy at all; each port's peer maps the whole pool and so reads and rewrites the other port's frames: only when both peers are one party"),
	}
	for k, sfx := range []string{"", "2"} {
		what := "memif"
		if sfx != "" {
			what = "second port's"
		}
		f.ports[k] = portFlags{
			suffix: sfx,
			role:   fs.String("role"+sfx, "client", what+" role: server (listens) or client (connects, owns the memory)"),
			sock:   fs.String("socket"+sfx, memif.DefaultSocket, what+" control socket: a path, or @NAME for an abstract socket"),
			id:     fs.Uint("id"+sfx, 0, what+" interface id"),
			secret: fs.String("secret"+sfx, "", what+" secret (at most 23 bytes)"),
			port: fs.String("port"+sfx, "", "open the memif-cni port NAME from $MEMIFNET_DIR/*/port.json (default dir "+portspec.DefaultDir+
				") as the "+map[string]string{"": "first", "2": "second"}[sfx]+" port; port.json then sets its role, socket, id, secret, mode, queues and sizes"),
		}
	}
	return f
}

// session checks the flags and builds the run they describe; an error is a usage error.
func (f *flags) session(fs *flag.FlagSet) (*traffic.Session, error) {
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	tc, err := f.trafficConfig()
	if err != nil {
		return nil, err
	}
	n := 1
	if tc.Mode == traffic.ModeFwd || f.ports[1].given(fs) {
		n = 2
	}
	var ports []memif.Config
	for k := range n {
		cfg, spec, err := f.portConfig(fs, &f.ports[k])
		if err != nil {
			return nil, err
		}
		if spec != nil {
			if k == 0 {
				tc.Queues = spec.Queues
			}
			tc.Queues = min(tc.Queues, spec.Queues)
			tc.MaxFrame = max(tc.MaxFrame, spec.BufferSize)
		}
		cfg.Logger = logger
		ports = append(ports, cfg)
	}
	if *f.zeroCopy && !slices.ContainsFunc(ports, func(c memif.Config) bool { return c.ZeroCopy }) {
		return nil, errors.New("--zero-copy: only a client owns the memory it could share")
	}
	if *f.trustPeers && (tc.Mode != traffic.ModeFwd || !*f.zeroCopy) {
		return nil, errors.New("--peers-trust-each-other: only for --mode fwd with --zero-copy (it shares the two clients' buffer pool)")
	}
	if tc.Mode == traffic.ModeFwd && f.ports[1].same(&f.ports[0]) {
		return nil, errors.New("--mode fwd: the second port (--socket2, --role2, --id2 or --port2) is the first one")
	}
	if *f.connectTO <= 0 || *f.duration < 0 {
		return nil, errors.New("--connect-timeout must be positive and --duration not negative")
	}
	return &traffic.Session{
		Ports: ports, Traffic: tc,
		Duration: *f.duration, ConnectTimeout: *f.connectTO, Metrics: *f.metrics, PeersTrustEachOther: *f.trustPeers,
		Stdout: os.Stdout, Stderr: os.Stderr,
	}, nil
}

// given says whether any flag of the port was set.
func (p *portFlags) given(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) {
		for _, name := range []string{"role", "socket", "id", "secret", "port"} {
			set = set || fl.Name == name+p.suffix
		}
	})
	return set
}

// same says whether two ports' flags name the same interface.
func (p *portFlags) same(o *portFlags) bool {
	if *p.port != "" || *o.port != "" {
		return *p.port == *o.port
	}
	return *p.role == *o.role && *p.sock == *o.sock && *p.id == *o.id
}

// portConfig is the interface one port's flags describe, and its port.json with --port.
func (f *flags) portConfig(fs *flag.FlagSet, p *portFlags) (memif.Config, *portspec.PortSpec, error) {
	if *p.port == "" {
		cfg, err := f.memifConfig(p)
		return cfg, nil, err
	}
	spec, err := f.lookupPort(fs, p)
	if err != nil {
		return memif.Config{}, nil, err
	}
	cfg, err := memif.PortConfig(spec)
	if err != nil {
		return memif.Config{}, nil, fmt.Errorf("--port%s: %v", p.suffix, err)
	}
	fmt.Fprintf(os.Stderr, "memif-perf: port %q from %s: %s, socket %s, id %d, %d queue(s)\n",
		spec.Name, spec.File, spec.Role, spec.Socket, spec.ID, spec.Queues)
	return cfg, &spec, nil
}

// memifConfig is the interface one port's flags describe (without --port).
func (f *flags) memifConfig(p *portFlags) (memif.Config, error) {
	var r memif.Role
	switch *p.role {
	case "server":
		r = memif.RoleServer
	case "client":
		r = memif.RoleClient
	default:
		return memif.Config{}, fmt.Errorf("--role%s %q: must be server or client", p.suffix, *p.role)
	}
	if *p.id > 1<<32-1 {
		return memif.Config{}, fmt.Errorf("--id%s %d: must fit 32 bits", p.suffix, *p.id)
	}
	if *f.queues < 1 || *f.queues > memif.MaxQueues {
		return memif.Config{}, fmt.Errorf("--queues %d: must be 1..%d", *f.queues, memif.MaxQueues)
	}
	zc := *f.zeroCopy && r == memif.RoleClient // with two ports, the clients among them
	return memif.Config{
		Role: r, Socket: *p.sock, ID: uint32(*p.id), Secret: *p.secret, Mode: memif.ModeEthernet,
		RxQueues: *f.queues, TxQueues: *f.queues, RingSize: *f.ringSize, BufferSize: *f.bufSize,
		ZeroCopy: zc,
	}, nil
}

// trafficConfig is what the loops send and expect.
func (f *flags) trafficConfig() (traffic.Config, error) {
	m, err := traffic.ParseMode(*f.mode)
	if err != nil {
		return traffic.Config{}, fmt.Errorf("--mode: %v", err)
	}
	src, err := parseMAC(*f.mac)
	if err != nil {
		return traffic.Config{}, fmt.Errorf("--mac: %v", err)
	}
	dst, err := parseMAC(*f.peerMAC)
	if err != nil {
		return traffic.Config{}, fmt.Errorf("--peer-mac: %v", err)
	}
	rxm, err := traffic.ParseRxMode(*f.rxMode)
	if err != nil {
		return traffic.Config{}, fmt.Errorf("--rx-mode: %v", err)
	}
	return traffic.Config{
		Mode: m, Size: *f.size, Burst: *f.burst, Verify: *f.verify, Queues: *f.queues,
		MaxFrame: max(*f.size, *f.bufSize, 2048), Src: src, Dst: dst, RxMode: rxm, Spins: *f.spins, Window: *f.win,
		NoCycles: !*f.cycles,
	}, nil
}

// lookupPort finds a port's --port among the port.json files memif-cni wrote into the pod,
// refusing the flags port.json overrides.
func (f *flags) lookupPort(fs *flag.FlagSet, p *portFlags) (portspec.PortSpec, error) {
	var set []string
	fs.Visit(func(fl *flag.Flag) {
		first := p.suffix == "" && portSets[fl.Name]
		name, ok := strings.CutSuffix(fl.Name, p.suffix)
		if first || p.suffix != "" && ok && perPort[name] {
			set = append(set, "--"+fl.Name)
		}
	})
	if len(set) > 0 {
		return portspec.PortSpec{}, fmt.Errorf("--port%s %s takes %s from port.json; drop them", p.suffix, *p.port, strings.Join(set, ", "))
	}
	spec, err := lookupPort(*p.port)
	if err != nil {
		return portspec.PortSpec{}, fmt.Errorf("--port%s: %v", p.suffix, err)
	}
	return spec, nil
}

// startProfile starts a CPU profile into file; stop ends and writes it.
func startProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "memif-perf: --cpuprofile: %v\n", err)
		}
	}, nil
}

// portSets are the flags whose values come from port.json under --port; under --port2 those of
// them a second port has its own of (perPort, with the suffix 2).
var (
	portSets = map[string]bool{
		"role": true, "socket": true, "id": true, "secret": true, "queues": true, "ring-size": true, "buffer-size": true,
	}
	perPort = map[string]bool{"role": true, "socket": true, "id": true, "secret": true}
)

// lookupPort finds port name among the port.json files memif-cni wrote into the pod.
func lookupPort(name string) (portspec.PortSpec, error) {
	specs, err := portspec.Discover()
	if err != nil {
		return portspec.PortSpec{}, err
	}
	if spec, ok := portspec.Lookup(specs, name); ok {
		return spec, nil
	}
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return portspec.PortSpec{}, fmt.Errorf("no port %q in %s/*/%s (ports: %q)", name, portspec.Dir(), portspec.FileName, names)
}

func parseMAC(s string) ([6]byte, error) {
	var out [6]byte
	hw, err := net.ParseMAC(s)
	if err != nil {
		return out, err
	}
	if len(hw) != 6 {
		return out, fmt.Errorf("%q is not a 48-bit MAC", s)
	}
	copy(out[:], hw)
	return out, nil
}

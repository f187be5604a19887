// Command memif-perf is a testpmd-like traffic tool for memif links: it sends, receives, echoes or
// pings over a memif interface, optionally verifying every payload byte, prints a stats line each
// second and ends with one machine-readable summary line on stdout:
//
//	rx_pkts=N rx_mpps=X tx_pkts=N tx_mpps=X drops=N verify_errors=N
//
// (ping mode appends rtt_p50_us=.. rtt_p99_us=.. rtt_p999_us=.. samples=N). Exit codes: 0 ok, 1
// verification failed (or a verified run received nothing), 2 usage, 3 link never up, 4 the peer
// refused the handshake.
//
// In a pod wired by memif-cni, --port NAME opens the port memif-cni described in
// /run/memifnet/*/port.json ($MEMIFNET_DIR overrides the directory) with memif.PortConfig: role,
// socket, id, secret, mode, queues and sizes then come from port.json, and the flags that would
// set them are refused.
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
	role, sock, secret, mode, mac, peerMAC, logLevel, cpuProfile, rxMode, port *string
	id                                                                         *uint
	size, burst, queues, ringSize, bufSize, spins                              *int
	duration, connectTO                                                        *time.Duration
	verify, zeroCopy                                                           *bool
}

func defineFlags(fs *flag.FlagSet) *flags {
	return &flags{
		role:       fs.String("role", "client", "memif role: server (listens) or client (connects, owns the memory)"),
		sock:       fs.String("socket", memif.DefaultSocket, "control socket: a path, or @NAME for an abstract socket"),
		id:         fs.Uint("id", 0, "memif interface id"),
		secret:     fs.String("secret", "", "memif secret (at most 23 bytes)"),
		mode:       fs.String("mode", "rx", "tx | rx | txrx | echo | ping"),
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
		rxMode:     fs.String("rx-mode", "poll", "how receivers wait: poll (spin), interrupt (sleep on the ring eventfd after each empty poll) or adaptive (sleep after --spins empty polls)"),
		spins:      fs.Int("spins", 1000, "adaptive mode: empty polls before sleeping"),
		zeroCopy:   fs.Bool("zero-copy", false, "client: announce a buffer pool and point descriptors at it (no copy on the peer's side of the region)"),
		port:       fs.String("port", "", "open the memif-cni port NAME from $MEMIFNET_DIR/*/port.json (default dir "+portspec.DefaultDir+"); port.json then sets role, socket, id, secret, mode, queues and sizes"),
	}
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
	cfg, err := f.memifConfig()
	if err != nil {
		return nil, err
	}
	tc, err := f.trafficConfig()
	if err != nil {
		return nil, err
	}
	if *f.port != "" {
		spec, err := f.lookupPort(fs)
		if err != nil {
			return nil, err
		}
		if cfg, err = memif.PortConfig(spec); err != nil {
			return nil, fmt.Errorf("--port: %v", err)
		}
		tc.Queues, tc.MaxFrame = spec.Queues, max(*f.size, spec.BufferSize, 2048)
		fmt.Fprintf(os.Stderr, "memif-perf: port %q from %s: %s, socket %s, id %d, %d queue(s)\n",
			spec.Name, spec.File, spec.Role, spec.Socket, spec.ID, spec.Queues)
	}
	cfg.Logger = logger
	if *f.connectTO <= 0 || *f.duration < 0 {
		return nil, errors.New("--connect-timeout must be positive and --duration not negative")
	}
	return &traffic.Session{
		Memif: cfg, Traffic: tc,
		Duration: *f.duration, ConnectTimeout: *f.connectTO,
		Stdout: os.Stdout, Stderr: os.Stderr,
	}, nil
}

// memifConfig is the interface the flags describe (without --port).
func (f *flags) memifConfig() (memif.Config, error) {
	var r memif.Role
	switch *f.role {
	case "server":
		r = memif.RoleServer
	case "client":
		r = memif.RoleClient
	default:
		return memif.Config{}, fmt.Errorf("--role %q: must be server or client", *f.role)
	}
	if *f.id > 1<<32-1 {
		return memif.Config{}, fmt.Errorf("--id %d: must fit 32 bits", *f.id)
	}
	if *f.queues < 1 || *f.queues > memif.MaxQueues {
		return memif.Config{}, fmt.Errorf("--queues %d: must be 1..%d", *f.queues, memif.MaxQueues)
	}
	if *f.zeroCopy && r != memif.RoleClient {
		return memif.Config{}, errors.New("--zero-copy: only a client owns the memory it could share")
	}
	return memif.Config{
		Role: r, Socket: *f.sock, ID: uint32(*f.id), Secret: *f.secret, Mode: memif.ModeEthernet,
		RxQueues: *f.queues, TxQueues: *f.queues, RingSize: *f.ringSize, BufferSize: *f.bufSize,
		ZeroCopy: *f.zeroCopy,
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
		MaxFrame: max(*f.size, *f.bufSize, 2048), Src: src, Dst: dst, RxMode: rxm, Spins: *f.spins,
	}, nil
}

// lookupPort finds the --port among the port.json files memif-cni wrote into the pod, refusing
// the flags port.json overrides.
func (f *flags) lookupPort(fs *flag.FlagSet) (portspec.PortSpec, error) {
	var set []string
	fs.Visit(func(fl *flag.Flag) {
		if portSets[fl.Name] {
			set = append(set, "--"+fl.Name)
		}
	})
	if len(set) > 0 {
		return portspec.PortSpec{}, fmt.Errorf("--port %s takes %s from port.json; drop them", *f.port, strings.Join(set, ", "))
	}
	spec, err := lookupPort(*f.port)
	if err != nil {
		return portspec.PortSpec{}, fmt.Errorf("--port: %v", err)
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

// portSets are the flags whose values come from port.json under --port.
var portSets = map[string]bool{
	"role": true, "socket": true, "id": true, "secret": true, "queues": true, "ring-size": true, "buffer-size": true,
}

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

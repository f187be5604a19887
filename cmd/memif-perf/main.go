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

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("memif-perf", flag.ContinueOnError)
	var (
		role       = fs.String("role", "client", "memif role: server (listens) or client (connects, owns the memory)")
		sock       = fs.String("socket", memif.DefaultSocket, "control socket: a path, or @NAME for an abstract socket")
		id         = fs.Uint("id", 0, "memif interface id")
		secret     = fs.String("secret", "", "memif secret (at most 23 bytes)")
		mode       = fs.String("mode", "rx", "tx | rx | txrx | echo | ping")
		size       = fs.Int("size", 64, "frame size in bytes, Ethernet header included")
		burst      = fs.Int("burst", 32, "packets per burst")
		queues     = fs.Int("queues", 1, "queue pairs; queue i is polled by its own goroutine")
		ringSize   = fs.Int("ring-size", memif.DefaultRingSize, "ring entries (power of two; the client's value is used)")
		bufSize    = fs.Int("buffer-size", memif.DefaultBufferSize, "buffer size in bytes (the client's value is used); larger frames are chained")
		duration   = fs.Duration("duration", 10*time.Second, "how long to run after the link came up (0 = until interrupted)")
		connectTO  = fs.Duration("connect-timeout", 30*time.Second, "how long to wait for the link")
		verifyFlag = fs.Bool("verify", false, "stamp every payload with a sequence number and checksum, and check every received byte")
		mac        = fs.String("mac", "02:fe:00:00:00:01", "source MAC of sent frames")
		peerMAC    = fs.String("peer-mac", "02:00:00:00:00:00", "destination MAC of sent frames (testpmd's default peer address)")
		logLevel   = fs.String("log-level", "warn", "library log level: debug, info, warn, error")
		cpuProfile = fs.String("cpuprofile", "", "write a pprof CPU profile of the whole run to this file")
		rxMode     = fs.String("rx-mode", "poll", "how receivers wait: poll (spin), interrupt (sleep on the ring eventfd after each empty poll) or adaptive (sleep after --spins empty polls)")
		spins      = fs.Int("spins", 1000, "adaptive mode: empty polls before sleeping")
		zeroCopy   = fs.Bool("zero-copy", false, "client: announce a buffer pool and point descriptors at it (no copy on the peer's side of the region)")
		port       = fs.String("port", "", "open the memif-cni port NAME from $MEMIFNET_DIR/*/port.json (default dir "+portspec.DefaultDir+"); port.json then sets role, socket, id, secret, mode, queues and sizes")
	)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return traffic.ExitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "memif-perf: "+format+"\n", a...)
		return traffic.ExitUsage
	}
	if fs.NArg() != 0 {
		return usage("unexpected arguments %q", fs.Args())
	}
	var r memif.Role
	switch *role {
	case "server":
		r = memif.RoleServer
	case "client":
		r = memif.RoleClient
	default:
		return usage("--role %q: must be server or client", *role)
	}
	m, err := traffic.ParseMode(*mode)
	if err != nil {
		return usage("--mode: %v", err)
	}
	src, err := parseMAC(*mac)
	if err != nil {
		return usage("--mac: %v", err)
	}
	dst, err := parseMAC(*peerMAC)
	if err != nil {
		return usage("--peer-mac: %v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usage("--log-level: %v", err)
	}
	if *id > 1<<32-1 {
		return usage("--id %d: must fit 32 bits", *id)
	}
	if *queues < 1 || *queues > memif.MaxQueues {
		return usage("--queues %d: must be 1..%d", *queues, memif.MaxQueues)
	}
	rxm, err := traffic.ParseRxMode(*rxMode)
	if err != nil {
		return usage("--rx-mode: %v", err)
	}
	if *zeroCopy && r != memif.RoleClient {
		return usage("--zero-copy: only a client owns the memory it could share")
	}
	if *connectTO <= 0 || *duration < 0 {
		return usage("--connect-timeout must be positive and --duration not negative")
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg := memif.Config{
		Role: r, Socket: *sock, ID: uint32(*id), Secret: *secret, Mode: memif.ModeEthernet,
		RxQueues: *queues, TxQueues: *queues, RingSize: *ringSize, BufferSize: *bufSize,
		ZeroCopy: *zeroCopy, Logger: logger,
	}
	if *port != "" {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if portSets[f.Name] {
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return usage("--port %s takes %s from port.json; drop them", *port, strings.Join(set, ", "))
		}
		spec, err := lookupPort(*port)
		if err != nil {
			return usage("--port: %v", err)
		}
		if cfg, err = memif.PortConfig(spec); err != nil {
			return usage("--port: %v", err)
		}
		cfg.Logger = logger
		*queues, *bufSize = spec.Queues, spec.BufferSize
		fmt.Fprintf(os.Stderr, "memif-perf: port %q from %s: %s, socket %s, id %d, %d queue(s)\n",
			spec.Name, spec.File, spec.Role, spec.Socket, spec.ID, spec.Queues)
	}

	s := &traffic.Session{
		Memif: cfg,
		Traffic: traffic.Config{
			Mode: m, Size: *size, Burst: *burst, Verify: *verifyFlag, Queues: *queues,
			MaxFrame: max(*size, *bufSize, 2048), Src: src, Dst: dst, RxMode: rxm, Spins: *spins,
		},
		Duration: *duration, ConnectTimeout: *connectTO,
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return usage("--cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return usage("--cpuprofile: %v", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "memif-perf: --cpuprofile: %v\n", err)
			}
		}()
	}
	// SIGINT/SIGTERM end the run early; the summary is still printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return s.Run(ctx)
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

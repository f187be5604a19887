// Command dpdk-memif-peer runs DPDK's dpdk-testpmd as one memif peer (package dpdkpeer) for
// hack/bench.sh and for trying things by hand:
//
//	go run ./hack/dpdk-memif-peer --role server --socket /run/x.sock --mode io --duration 0
//
// stdout gets "memif-peer: listening socket=@/run/x.sock" (a server whose port has started: only
// now may a client connect), "memif-peer: connected", "memif-peer: disconnected", and at the end
// the summary, whose last line is always "rx_mpps=<x> tx_mpps=<y>" (the mean of the per-second
// samples of the active window, without its first and last one). Exit code: 0 ok; 2 never
// connected; 1 usage error, or testpmd died or ended with a non-zero status (139: the DPDK 22.11
// segfaults described in package dpdkpeer). SIGINT or SIGTERM stop it cleanly.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/internal/dpdkpeer"
)

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == nil {
		err = dpdkpeer.Prerequisites()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "memif-peer: error: %v\n", err)
		fmt.Println("rx_mpps=0.000 tx_mpps=0.000")
		os.Exit(dpdkpeer.ExitFailed)
	}
	o.Report = func(msg string, e dpdkpeer.Event) {
		if e != 0 {
			fmt.Println(msg)
		} else {
			fmt.Fprintln(os.Stderr, msg)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	p, err := dpdkpeer.Start(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "memif-peer: error: %v\n", err)
		fmt.Println("rx_mpps=0.000 tx_mpps=0.000")
		if errors.Is(err, dpdkpeer.ErrNoListener) {
			os.Exit(dpdkpeer.ExitNeverConnected)
		}
		os.Exit(dpdkpeer.ExitFailed)
	}
	select {
	case <-sigs:
	case <-p.Done():
	}
	r := p.Stop()
	fmt.Println(r.Summary())
	os.Exit(r.ExitCode)
}

func parseFlags(args []string) (dpdkpeer.Options, error) {
	var o dpdkpeer.Options
	fs := flag.NewFlagSet("dpdk-memif-peer", flag.ContinueOnError)
	fs.StringVar(&o.Role, "role", "", "server (listener) or client (required)")
	fs.StringVar(&o.Socket, "socket", "/run/memif.sock", "control socket path")
	abstract := fs.String("abstract", "yes", "yes: abstract socket \\0PATH (DPDK's default); no: a filesystem socket")
	fs.IntVar(&o.ID, "id", 0, "memif interface id")
	fs.StringVar(&o.Mode, "mode", "io", "testpmd forwarding mode: io, macswap, txonly, rxonly")
	fs.IntVar(&o.PktSize, "pkt-size", 64, "txonly frame size")
	fs.IntVar(&o.BSize, "bsize", 0, "memif buffer size (0: DPDK's 2048)")
	fs.IntVar(&o.RSize, "rsize", 0, "log2 of the ring size (0: DPDK's 10)")
	fs.IntVar(&o.Queues, "queues", 1, "queue pairs")
	fs.StringVar(&o.Secret, "secret", "", "memif secret")
	zeroCopy := fs.String("zero-copy", "no", "yes: net_memif zero-copy (a client exports its memory)")
	fs.StringVar(&o.MAC, "mac", "", "MAC address of the DPDK port (default random)")
	fs.IntVar(&o.Core, "core", 0, "CPU to pin testpmd to")
	dur := fs.Int("duration", 10, "seconds to run after link up (0: until SIGINT/SIGTERM)")
	connTO := fs.Int("connect-timeout", 60, "seconds to wait for link up (0: forever)")
	waitSock := fs.Int("wait-socket", 10, "client: seconds to wait for a listener before starting (0: don't)")
	fs.IntVar(&o.Mbufs, "mbufs", 65536, "mbuf pool size")
	noHuge := fs.Bool("no-huge", false, "EAL --no-huge -m MEM (no hugepages needed)")
	fs.IntVar(&o.MemMB, "mem", 512, "memory for --no-huge, MiB")
	fs.StringVar(&o.Prefix, "prefix", "", "EAL --file-prefix (default unique)")
	fs.StringVar(&o.LogDir, "log-dir", "", "keep testpmd's log in this directory (default: removed at exit)")
	eal := fs.String("eal", "", "extra EAL arguments")
	testpmd := fs.String("testpmd", "", "extra testpmd arguments")
	verbose := fs.Bool("v", false, "copy testpmd's output to stderr")
	fs.BoolVar(verbose, "verbose", false, "copy testpmd's output to stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	abs, err := yesNo("abstract", *abstract)
	if err != nil {
		return o, err
	}
	o.FSSocket = !abs
	if o.ZeroCopy, err = yesNo("zero-copy", *zeroCopy); err != nil {
		return o, err
	}
	o.Duration = time.Duration(*dur) * time.Second
	o.ConnectTimeout = seconds(*connTO)
	o.WaitSocket = seconds(*waitSock)
	o.Memory = dpdkpeer.Hugepages
	if *noHuge {
		o.Memory = dpdkpeer.NoHuge
	}
	o.ExtraEAL, o.ExtraTestpmd = strings.Fields(*eal), strings.Fields(*testpmd)
	if *verbose {
		o.Echo = func(l string) { fmt.Fprintln(os.Stderr, l) }
	}
	return o, nil
}

// seconds maps the command's "0 = no limit" onto Options' negative durations.
func seconds(n int) time.Duration {
	if n <= 0 {
		return -1
	}
	return time.Duration(n) * time.Second
}

func yesNo(flag, v string) (bool, error) {
	switch v {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, fmt.Errorf("--%s %q: want yes or no", flag, v)
}

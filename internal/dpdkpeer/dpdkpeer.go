// Package dpdkpeer runs DPDK's dpdk-testpmd (Debian packages dpdk-dev and librte-net-memif23)
// as a memif peer, for interop tests, for hack/bench.sh (through hack/dpdk-memif-peer) and for
// the DPDK image's entrypoint (hack/memif-testpmd, which hands it the ports of a pod's ready
// configs, PortArgs). It knows what testpmd needs to be a usable memif peer: one CPU for the whole process, no Rx flush
// at start, memory without leftovers, a client started only once a listener is there, a server
// reported ready only once its port has started, a file prefix per process, and cleanup.
//
// testpmd's exit status and end-of-run summary are not to be trusted, so a Peer exposes the
// periodic counters testpmd logs while connected (LatestStats, WaitStats) and a Result with the
// largest of them, and leaves the judging to the caller. What DPDK 22.11.11's net_memif does
// that a caller must allow for (seen in about 250 connect/disconnect cycles here):
//   - its server's forwarding thread may segfault (status 139) when the client leaves (14 of
//     the 16 crashes seen), and right after connect with 2 queues (eth_memif_rx computes queue
//     1's ring address before checking that the region is mapped): one fresh peer per case;
//   - its port counters cover only the current connection (zero after a disconnect, wrapped
//     values in the end-of-run summary);
//   - its copy-mode Tx never clears a first descriptor's NEXT flag, so mixing chained and
//     single-buffer packets yields bogus chains after ring wrap (fixed upstream in 26.03):
//     chained cases use one fixed size;
//   - its client connects once, at port start, and never retries or reconnects; its server
//     binds the listener at probe but refuses clients ("ID not found") until port start.
package dpdkpeer

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Event is something a peer reports, in the order it happened.
type Event int

const (
	// Listening: a server's listener is bound and its port has started. Only now may a client
	// connect: the listener is bound at probe, but until port start DPDK refuses a client with
	// Disconnect "ID not found", and a DPDK client never retries.
	Listening Event = iota + 1
	// Connected: the link is up (memif handshake done).
	Connected
	// Disconnected: the peer went away. A DPDK client then stops: it never reconnects.
	Disconnected
)

func (e Event) String() string {
	switch e {
	case Listening:
		return "listening"
	case Connected:
		return "connected"
	case Disconnected:
		return "disconnected"
	}
	return fmt.Sprintf("event(%d)", int(e))
}

// Exit codes of a peer (Result.ExitCode), the same as hack/dpdk-memif-peer's.
const (
	ExitOK             = 0
	ExitFailed         = 1 // testpmd died by itself or ended with a non-zero status
	ExitNeverConnected = 2 // no listener, "ID not found", wrong secret, port start failed, timeout
)

// Peer is one running testpmd.
type Peer struct {
	o    Options
	proc *testpmd

	mu       sync.Mutex
	events   []Event
	messages strings.Builder // what the peer reported: events, errors, the command line
	code     int             // the exit code so far (first reason wins)
	stats    statsParser
	diagRing []string // the last memif and EAL messages (keepDiag)
	// portStarted: a server's port has started (announceListener runs)
	portStarted bool
	change      chan struct{} // closed and replaced when anything above changes
	stopping    bool
	why         string        // why testpmd was stopped or ended (the first reason)
	done        chan struct{} // closed when testpmd has exited and the peer has cleaned up
}

// Start checks o, waits for a listener when o is a client, and starts testpmd. Stop it with
// Stop or Kill.
func Start(o Options) (*Peer, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Role == "client" && o.WaitSocket > 0 {
		if err := waitListener(context.Background(), o.socketName(), o.WaitSocket); err != nil {
			return nil, err
		}
	}
	if o.Role == "server" {
		if err := removeStaleSocket(o); err != nil {
			return nil, err
		}
	}
	p := &Peer{o: o, change: make(chan struct{}), done: make(chan struct{})}
	p.report("memif-peer: %s", strings.Join(o.command(), " "))
	if err := startTestpmd(o, &p.proc, p.line); err != nil {
		removeEALState(o.Prefix)
		return nil, err
	}
	go p.supervise()
	return p, nil
}

// report adds a message to Output.
func (p *Peer) report(format string, a ...any) { p.reportEvent(0, format, a...) }

func (p *Peer) reportEvent(e Event, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	p.mu.Lock()
	p.messages.WriteString(msg + "\n")
	if e != 0 {
		p.events = append(p.events, e)
		p.broadcast()
	}
	p.mu.Unlock()
	if p.o.Report != nil {
		p.o.Report(msg, e)
	}
}

// fail records why the peer failed, unless an earlier reason was recorded.
func (p *Peer) fail(code int, format string, a ...any) {
	p.report("memif-peer: error: "+format, a...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.code == ExitOK {
		p.code = code
	}
}

func (p *Peer) broadcast() {
	close(p.change)
	p.change = make(chan struct{})
}

// Wait waits until the peer reported e. It fails early if testpmd exits first.
func (p *Peer) Wait(ctx context.Context, e Event) error {
	for {
		if p.Seen(e) {
			return nil
		}
		p.mu.Lock()
		ch := p.change
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("dpdkpeer: waiting for %s: %w\n%s", e, ctx.Err(), p.Output())
		case <-p.done:
			if p.Seen(e) {
				return nil
			}
			return fmt.Errorf("dpdkpeer: exited before %s:\n%s", e, p.Output())
		case <-ch:
		}
	}
}

// Seen reports whether the peer reported e.
func (p *Peer) Seen(e Event) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range p.events {
		if x == e {
			return true
		}
	}
	return false
}

// Output is what the peer reported so far: the command line, events and errors.
func (p *Peer) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.messages.String()
}

// Log is testpmd's output so far (none with NoLog).
func (p *Peer) Log() string {
	if p.o.NoLog {
		return ""
	}
	b, _ := os.ReadFile(p.proc.logPath)
	return string(b)
}

// LatestStats are the counters of the last complete block testpmd logged (zero if none yet).
func (p *Peer) LatestStats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats.latest
}

// WaitStats waits until cond holds for the latest counters (testpmd logs them about every 2 s
// here) and returns them.
func (p *Peer) WaitStats(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	for {
		p.mu.Lock()
		s, ch := p.stats.latest, p.change
		p.mu.Unlock()
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
		case <-ch:
		}
	}
}

// Result is a stopped peer's summary. The counters are the largest testpmd logged while
// connected; TestpmdStatus (128+N for signal N, 139 for DPDK 22.11's segfaults) is reported,
// not judged.
type Result struct {
	RxPkts, TxPkts, RxBytes, TxBytes uint64
	Samples                          int     // blocks behind the rates
	RxMpps, TxMpps                   float64 // see statsParser.rates
	TestpmdStatus                    int
	ExitCode                         int // ExitOK, ExitFailed or ExitNeverConnected
	Output                           string
	// Reason is why testpmd ended: "stopped" (Stop), "the peer left", "no port started",
	// "the link did not come up in <ConnectTimeout>", "ran for <Duration>", "killed", or
	// "testpmd exited by itself" (then ExitedByItself).
	Reason         string
	ExitedByItself bool
}

// Summary is the result as the peer script printed it: counters, then the rates (the last line).
func (r Result) Summary() string {
	return fmt.Sprintf("rx_pkts=%d tx_pkts=%d rx_bytes=%d tx_bytes=%d samples=%d testpmd_status=%d\nrx_mpps=%.3f tx_mpps=%.3f",
		r.RxPkts, r.TxPkts, r.RxBytes, r.TxBytes, r.Samples, r.TestpmdStatus, r.RxMpps, r.TxMpps)
}

// Stop stops testpmd cleanly (SIGINT; SIGKILL after StopGrace), waits for it and returns the
// result.
func (p *Peer) Stop() Result {
	p.stop("stopped")
	<-p.done
	return p.result()
}

// Kill ends testpmd at once (test cleanup after a failure) and waits for it.
func (p *Peer) Kill() {
	p.mu.Lock()
	p.stopping = true
	p.why = cmp.Or(p.why, "killed")
	p.mu.Unlock()
	p.proc.kill()
	<-p.done
}

// Done is closed when testpmd has exited and the peer has cleaned up.
func (p *Peer) Done() <-chan struct{} { return p.done }

// stop asks testpmd to stop, once, saying why; it returns at once.
func (p *Peer) stop(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return
	}
	p.stopping, p.why = true, why
	go p.proc.interrupt(p.o.StopGrace)
}

func (p *Peer) result() Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.stats.max
	r := Result{RxPkts: m.RxPkts, TxPkts: m.TxPkts, RxBytes: m.RxBytes, TxBytes: m.TxBytes,
		TestpmdStatus: p.proc.status, ExitCode: p.code, Output: p.messages.String(),
		Reason: p.why, ExitedByItself: p.why == exitedByItself}
	r.RxMpps, r.TxMpps, r.Samples = p.stats.rates()
	return r
}

// Package traffic runs memif-perf's packet loops: one goroutine per queue pair, each polling its
// queues on a locked OS thread, like one testpmd forwarding lcore per queue.
package traffic

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Mode is what the loops do with packets.
type Mode string

// Modes.
const (
	ModeTx   Mode = "tx"   // send as fast as the ring allows (testpmd txonly)
	ModeRx   Mode = "rx"   // receive and count (testpmd rxonly)
	ModeTxRx Mode = "txrx" // send and receive at once: against a peer that echoes, or out on one port and back on another
	ModeEcho Mode = "echo" // send every received packet back (testpmd io forwarding, one port)
	ModePing Mode = "ping" // one packet at a time to an echoing peer, measuring round trips
	ModeFwd  Mode = "fwd"  // forward between two ports, both ways (testpmd io forwarding, paired ports)
)

// ParseMode checks a --mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeTx, ModeRx, ModeTxRx, ModeEcho, ModePing, ModeFwd:
		return m, nil
	}
	return "", fmt.Errorf("mode %q: must be tx, rx, txrx, echo, ping or fwd", s)
}

// Config of a run.
type Config struct {
	Mode   Mode
	Size   int // frame size in bytes, Ethernet header included
	Burst  int
	Verify bool
	Queues int
	// Window bounds the packets a txrx queue keeps in flight, so that an echoing peer or a
	// forwarder never has to drop (testpmd io drops what it cannot send). Default (0): half the
	// receiving ring; negative: no bound.
	Window int
	// MaxFrame is the receive buffer capacity (the largest frame accepted). Default: Size, at
	// least 2048.
	MaxFrame int
	// PingTimeout is how long ping waits for a reply before counting the packet lost.
	PingTimeout time.Duration
	Dst, Src    [6]byte
	// RxMode is how a queue waits for packets: RxPoll spins; RxInterrupt sleeps on the ring's
	// eventfd after every empty poll; RxAdaptive polls Spins times, then sleeps.
	RxMode RxMode
	Spins  int
	// NoCycles leaves the busy-cycle counters out of rx, echo and fwd (their TSC reads cost some
	// nanoseconds per poll): for latency runs against a testpmd that does not count either.
	NoCycles bool
}

// RxMode is how a receive loop waits when its ring is empty.
type RxMode string

// Receive modes.
const (
	RxPoll      RxMode = "poll"
	RxInterrupt RxMode = "interrupt"
	RxAdaptive  RxMode = "adaptive"
)

// ParseRxMode checks an --rx-mode value.
func ParseRxMode(s string) (RxMode, error) {
	switch m := RxMode(s); m {
	case RxPoll, RxInterrupt, RxAdaptive:
		return m, nil
	}
	return "", fmt.Errorf("rx mode %q: must be poll, interrupt or adaptive", s)
}

// Counters of one queue pair, written by its goroutine and read by the reporter.
type Counters struct {
	RxPkts, RxBytes, TxPkts, TxBytes atomic.Uint64
	Corrupt, Lost, Late              atomic.Uint64 // verification failures
	WrittenOff                       atomic.Uint64 // txrx: in flight too long without a reply
	// Polls counts the loop's turns and IdlePolls those where the receive poll found nothing (fwd:
	// the first port's, counted while both links are up; txrx: while its transmit link is up),
	// TxFull those where the transmit ring took nothing (txrx): who waits for whom. Kept in the worker and stored once, when the loop ends:
	// no atomic on the hot path.
	Polls, IdlePolls, TxFull atomic.Uint64
	// BusyCycles are the counter's cycles (cmd/memif-perf/internal/tsc) spent in polls that moved
	// packets, LoopCycles the loop's whole life (rx, echo and fwd: see busyMeter). Stored once,
	// when the loop ends.
	BusyCycles, LoopCycles atomic.Uint64
	_                      [64]byte // keep queues' counters on separate cache lines
}

// Totals sums every queue's counters and the library's.
type Totals struct {
	RxPkts, RxBytes, TxPkts, TxBytes uint64
	Corrupt, Lost, Late              uint64
	WrittenOff                       uint64 // txrx: packets given up on after a stalled window
	Drops                            uint64 // the library's per-queue drop counters, both directions
	Polls, IdlePolls, TxFull         uint64 // see Counters; complete once the loops have stopped
	BusyCycles, LoopCycles           uint64 // the same
}

// forwards says whether the run's loops move packets with the library's Forward, which counts
// their bytes itself (in the queues' Stats): fwd, and echo without --verify (verifying needs each
// packet in the application's buffer).
func (c Config) forwards() bool { return c.Mode == ModeFwd || c.Mode == ModeEcho && !c.Verify }

// VerifyErrors is every packet that failed verification or arrived out of sequence.
func (t Totals) VerifyErrors() uint64 { return t.Corrupt + t.Lost + t.Late }

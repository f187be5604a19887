// Package traffic runs memif-perf's packet loops: one goroutine per queue pair, each polling its
// queues on a locked OS thread, like one testpmd forwarding lcore per queue.
package traffic

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memifnet/memifnet/cmd/memif-perf/internal/verify"
	"github.com/memifnet/memifnet/pkg/memif"
)

// Mode is what the loops do with packets.
type Mode string

// Modes.
const (
	ModeTx   Mode = "tx"   // send as fast as the ring allows (testpmd txonly)
	ModeRx   Mode = "rx"   // receive and count (testpmd rxonly)
	ModeTxRx Mode = "txrx" // send and receive at once, against a peer that echoes
	ModeEcho Mode = "echo" // send every received packet back (testpmd io forwarding)
	ModePing Mode = "ping" // one packet at a time to an echoing peer, measuring round trips
)

// ParseMode checks a --mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeTx, ModeRx, ModeTxRx, ModeEcho, ModePing:
		return m, nil
	}
	return "", fmt.Errorf("mode %q: must be tx, rx, txrx, echo or ping", s)
}

// Config of a run.
type Config struct {
	Mode   Mode
	Size   int // frame size in bytes, Ethernet header included
	Burst  int
	Verify bool
	Queues int
	// Window bounds the packets a txrx queue keeps in flight, so that an echoing peer whose
	// transmit ring is no larger than ours never has to drop (testpmd io drops what it cannot
	// send). Default: half the ring, in buffers.
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
	_                                [64]byte      // keep queues' counters on separate cache lines
}

// Totals sums every queue's counters and the library's.
type Totals struct {
	RxPkts, RxBytes, TxPkts, TxBytes uint64
	Corrupt, Lost, Late              uint64
	Drops                            uint64 // the library's per-queue drop counters, both directions
}

// VerifyErrors is every packet that failed verification or arrived out of sequence.
func (t Totals) VerifyErrors() uint64 { return t.Corrupt + t.Lost + t.Late }

// Runner drives the loops over one interface.
type Runner struct {
	cfg   Config
	iface *memif.Interface
	ctr   []Counters
	stop  atomic.Bool
	ctx   context.Context // ends with the run: wakes receivers asleep in interrupt mode
	hist  []*Histogram    // ping: one per queue

	errMu    sync.Mutex
	firstErr []string // the first few verification failures, for the report
}

// maxReportedErrors bounds the verification failures kept word for word.
const maxReportedErrors = 5

// New checks cfg and prepares a Runner for iface.
func New(iface *memif.Interface, cfg Config) (*Runner, error) {
	ic := iface.Config()
	if cfg.Queues <= 0 {
		cfg.Queues = min(ic.RxQueues, ic.TxQueues)
	}
	if cfg.Queues > ic.RxQueues || cfg.Queues > ic.TxQueues {
		return nil, fmt.Errorf("traffic: %d queues, but the interface has %d rx and %d tx", cfg.Queues, ic.RxQueues, ic.TxQueues)
	}
	if cfg.Burst <= 0 {
		return nil, fmt.Errorf("traffic: burst %d: must be positive", cfg.Burst)
	}
	minSize := verify.EthHeaderLen
	if cfg.Verify || cfg.Mode == ModePing {
		minSize = verify.MinFrame
	}
	if cfg.Size < minSize {
		return nil, fmt.Errorf("traffic: size %d: at least %d bytes in mode %s", cfg.Size, minSize, cfg.Mode)
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = max(cfg.Size, 2048)
	}
	if cfg.Window <= 0 {
		segs := (cfg.Size + ic.BufferSize - 1) / ic.BufferSize
		cfg.Window = max(1, ic.RingSize/segs/2)
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = time.Second
	}
	if cfg.RxMode == "" {
		cfg.RxMode = RxPoll
	}
	if cfg.Spins <= 0 {
		cfg.Spins = 1000
	}
	r := &Runner{cfg: cfg, iface: iface, ctr: make([]Counters, cfg.Queues)}
	if cfg.Mode == ModePing {
		r.hist = make([]*Histogram, cfg.Queues)
		for q := range r.hist {
			r.hist[q] = NewHistogram()
		}
	}
	return r, nil
}

// Run starts one goroutine per queue and returns when ctx ends and every loop has stopped.
func (r *Runner) Run(ctx context.Context) {
	r.ctx = ctx
	var wg sync.WaitGroup
	for q := range r.cfg.Queues {
		wg.Go(func() {
			// One thread per queue, like a DPDK lcore: the poller never migrates between threads.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r.loop(q)
		})
	}
	<-ctx.Done()
	r.stop.Store(true)
	wg.Wait()
}

// Totals reads the counters now (safe while running).
func (r *Runner) Totals() Totals {
	var t Totals
	for q := range r.ctr {
		c := &r.ctr[q]
		t.RxPkts += c.RxPkts.Load()
		t.RxBytes += c.RxBytes.Load()
		t.TxPkts += c.TxPkts.Load()
		t.TxBytes += c.TxBytes.Load()
		t.Corrupt += c.Corrupt.Load()
		t.Lost += c.Lost.Load()
		t.Late += c.Late.Load()
	}
	ic := r.iface.Config()
	for q := range ic.RxQueues {
		t.Drops += r.iface.RxQueue(q).Stats().Drops
	}
	for q := range ic.TxQueues {
		t.Drops += r.iface.TxQueue(q).Stats().Drops
	}
	return t
}

// Errors returns the first verification failures, word for word.
func (r *Runner) Errors() []string {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return append([]string(nil), r.firstErr...)
}

// RTT merges the ping round-trip histograms of all queues (nil unless mode ping).
func (r *Runner) RTT() *Histogram {
	if r.hist == nil {
		return nil
	}
	h := NewHistogram()
	for _, q := range r.hist {
		h.Merge(q)
	}
	return h
}

func (r *Runner) noteError(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.firstErr) < maxReportedErrors {
		r.firstErr = append(r.firstErr, err.Error())
	}
}

// worker is one queue pair's private state.
type worker struct {
	r       *Runner
	q       int
	ctr     *Counters
	rxq     *memif.RxQueue
	txq     *memif.TxQueue
	stamper *verify.Stamper
	checker *verify.Checker
	seqs    verify.Sequence
	rxBufs  [][]byte // receive buffers, MaxFrame capacity each
	txPkts  [][]byte // frames to send, Size bytes each
	txOff   int      // txPkts[txOff:] are stamped and not yet taken by the ring
	txSeq   uint64   // next sequence number to stamp
	idle    int      // consecutive empty polls

	// Zero-copy client without --verify: frames are built in pool buffers and received as views.
	zc      bool
	zbufs   []memif.Buffer // receive views, and send buffers
	zpend   []memif.Buffer // allocated and stamped, not yet taken by the ring
	zheader []byte         // the Ethernet header written into each fresh send buffer
}

func (r *Runner) loop(q int) {
	w := &worker{
		r: r, q: q, ctr: &r.ctr[q],
		rxq: r.iface.RxQueue(q), txq: r.iface.TxQueue(q),
	}
	cfg := r.cfg
	if cfg.Verify || cfg.Mode == ModePing {
		w.stamper = verify.NewStamper(cfg.Size)
		w.checker = verify.NewChecker(cfg.MaxFrame)
	}
	w.rxBufs = make([][]byte, cfg.Burst)
	for k := range w.rxBufs {
		w.rxBufs[k] = make([]byte, 0, cfg.MaxFrame)
	}
	nTx := cfg.Burst
	if cfg.Mode == ModePing {
		nTx = 1
	}
	w.txPkts = make([][]byte, nTx)
	for k := range w.txPkts {
		// Like testpmd txonly: the Ethernet header is written once into a reused buffer, and
		// without --verify the payload is never touched again.
		w.txPkts[k] = make([]byte, cfg.Size)
		verify.EthHeader(w.txPkts[k], cfg.Dst, cfg.Src)
	}
	w.txOff = len(w.txPkts)
	ic := r.iface.Config()
	if ic.ZeroCopy && !cfg.Verify && cfg.Size <= ic.BufferSize && cfg.Mode != ModePing {
		w.zc = true
		w.zbufs = make([]memif.Buffer, cfg.Burst)
		w.zheader = w.txPkts[0][:verify.EthHeaderLen]
	}
	switch cfg.Mode {
	case ModeTx:
		w.runTx()
	case ModeRx:
		w.runRx()
	case ModeTxRx:
		w.runTxRx()
	case ModeEcho:
		w.runEcho()
	case ModePing:
		w.runPing()
	}
}

// pause is called after a poll that moved nothing. A poller spins, like a DPDK lcore; only after
// a long idle stretch does it give the Go scheduler a turn. Yielding often from a goroutine locked
// to its thread hands the thread off through futex sleeps and wake-ups, which cost more than the
// polls and, in the benchmark's profile, made the kernel favour our process over its peer.
func (w *worker) pause() {
	w.idle++
	if w.idle&(1<<14-1) == 0 {
		runtime.Gosched()
	}
}

// rxIdle is called after a receive poll that got nothing: it spins, or sleeps until the peer
// signals (interrupt mode, or adaptive mode after Spins empty polls in a row).
func (w *worker) rxIdle() {
	switch w.r.cfg.RxMode {
	case RxInterrupt:
		w.sleep()
	case RxAdaptive:
		w.idle++
		if w.idle >= w.r.cfg.Spins {
			w.idle = 0
			w.sleep()
		}
	default:
		w.pause()
	}
}

func (w *worker) sleep() {
	if err := w.rxq.Wait(w.r.ctx); errors.Is(err, memif.ErrDown) {
		w.pause() // link down: the session notices; keep polling for its return
	}
}

// send offers up to limit pending frames to the ring, stamping a new batch when the last one is
// gone. It returns how many the ring took.
func (w *worker) send(limit int) int {
	if w.zc {
		return w.sendZC(limit)
	}
	if w.txOff == len(w.txPkts) {
		if w.stamper != nil {
			for _, p := range w.txPkts {
				w.stamper.Stamp(p, uint16(w.q), w.txSeq)
				w.txSeq++
			}
		}
		w.txOff = 0
	}
	end := min(len(w.txPkts), w.txOff+limit)
	n := w.txq.TxBurst(w.txPkts[w.txOff:end])
	if n > 0 {
		w.txOff += n
		w.ctr.TxPkts.Add(uint64(n))
		w.ctr.TxBytes.Add(uint64(n * w.r.cfg.Size))
	}
	return n
}

// receive polls the rx queue once and verifies what came in (with --verify).
// sendZC is send for a zero-copy client: like testpmd txonly with a zero-copy PMD, it writes only
// the Ethernet header into each fresh pool buffer and hands the buffers over without a copy.
func (w *worker) sendZC(limit int) int {
	if len(w.zpend) == 0 {
		n := w.txq.Alloc(w.zbufs[:min(limit, len(w.zbufs))])
		for k := range w.zbufs[:n] {
			b := &w.zbufs[k]
			copy(b.Data, w.zheader)
			b.Data = b.Data[:w.r.cfg.Size]
		}
		w.zpend = w.zbufs[:n]
	}
	n := w.txq.TxBurstZC(w.zpend)
	if n > 0 {
		w.zpend = w.zpend[n:]
		w.ctr.TxPkts.Add(uint64(n))
		w.ctr.TxBytes.Add(uint64(n * w.r.cfg.Size))
	}
	return n
}

// receiveZC is receive for a zero-copy client: views of shared memory, counted and released.
func (w *worker) receiveZC() int {
	n := w.rxq.RxBurstZC(w.zbufs)
	if n == 0 {
		return 0
	}
	bytes := 0
	for _, b := range w.zbufs[:n] {
		bytes += len(b.Data)
	}
	w.rxq.Release(w.zbufs[:n])
	w.ctr.RxPkts.Add(uint64(n))
	w.ctr.RxBytes.Add(uint64(bytes))
	return n
}

func (w *worker) receive() int {
	if w.zc && w.r.cfg.Mode == ModeRx {
		return w.receiveZC()
	}
	n := w.rxq.RxBurst(w.rxBufs)
	if n == 0 {
		return 0
	}
	bytes := 0
	for _, p := range w.rxBufs[:n] {
		bytes += len(p)
		if w.r.cfg.Verify {
			w.check(p)
		}
	}
	w.ctr.RxPkts.Add(uint64(n))
	w.ctr.RxBytes.Add(uint64(bytes))
	return n
}

func (w *worker) check(p []byte) {
	stream, seq, err := w.checker.Check(p)
	if err != nil {
		w.ctr.Corrupt.Add(1)
		w.r.noteError(fmt.Errorf("queue %d: %w", w.q, err))
		return
	}
	lost, late := w.seqs.Lost, w.seqs.Late
	if !w.seqs.Observe(stream, seq) {
		if d := w.seqs.Lost - lost; d > 0 {
			w.ctr.Lost.Add(d)
			w.r.noteError(fmt.Errorf("queue %d: stream %d: %d packets missing before seq %d", w.q, stream, d, seq))
		}
		if d := w.seqs.Late - late; d > 0 {
			w.ctr.Late.Add(d)
			w.r.noteError(fmt.Errorf("queue %d: stream %d: seq %d arrived out of order", w.q, stream, seq))
		}
	}
}

func (w *worker) runTx() {
	for !w.r.stop.Load() {
		if w.send(len(w.txPkts)) == 0 {
			w.pause()
		}
	}
}

func (w *worker) runRx() {
	for !w.r.stop.Load() {
		if w.receive() == 0 {
			w.rxIdle()
		}
	}
}

// stallTimeout is how long a full txrx window may go without a reply before the packets in it
// are written off (the peer dropped them), so the loop does not wait forever.
const stallTimeout = 200 * time.Millisecond

func (w *worker) runTxRx() {
	window := uint64(w.r.cfg.Window)
	var writtenOff uint64
	var stalledSince time.Time // when the window filled up with no reply since
	for !w.r.stop.Load() {
		got := w.receive()
		var inFlight uint64 // a peer may send more than we did: never below zero
		if tx, rx := w.ctr.TxPkts.Load(), w.ctr.RxPkts.Load()+writtenOff; tx > rx {
			inFlight = tx - rx
		}
		if inFlight < window {
			stalledSince = time.Time{}
			if w.send(int(window-inFlight)) > 0 || got > 0 {
				continue
			}
		} else if got == 0 {
			now := time.Now()
			if stalledSince.IsZero() {
				stalledSince = now
			} else if now.Sub(stalledSince) > stallTimeout {
				writtenOff += inFlight
				stalledSince = time.Time{}
			}
		} else {
			stalledSince = time.Time{}
			continue
		}
		w.pause()
	}
}

func (w *worker) runEcho() {
	for !w.r.stop.Load() {
		n := w.receive()
		if n == 0 {
			w.rxIdle()
			continue
		}
		// Unlike testpmd io (which drops what its Tx ring refuses) echo waits for room, so an
		// echo test counts every packet.
		for sent := 0; sent < n; {
			k := w.txq.TxBurst(w.rxBufs[sent:n])
			if k == 0 {
				if w.r.stop.Load() || !w.txq.Up() {
					break
				}
				w.pause()
				continue
			}
			for _, p := range w.rxBufs[sent : sent+k] {
				w.ctr.TxBytes.Add(uint64(len(p)))
			}
			w.ctr.TxPkts.Add(uint64(k))
			sent += k
		}
	}
}

// ErrNoReply is what ping notes when a reply does not come back in time.
var ErrNoReply = errors.New("no reply")

func (w *worker) runPing() {
	h := w.r.hist[w.q]
	frame := w.txPkts[0]
	for !w.r.stop.Load() {
		seq := w.txSeq
		w.stamper.Stamp(frame, uint16(w.q), seq)
		w.txSeq++
		start := time.Now()
		if w.txq.TxBurst(w.txPkts[:1]) == 0 {
			w.txSeq-- // the ring did not take it (link down?): try the same number again
			w.pause()
			continue
		}
		w.ctr.TxPkts.Add(1)
		w.ctr.TxBytes.Add(uint64(len(frame)))
		// Wait for this packet to come back; anything else that arrives meanwhile is counted
		// and verified, but only the matching reply ends the wait.
		for !w.r.stop.Load() {
			n := w.rxq.RxBurst(w.rxBufs[:1])
			if n == 0 {
				if w.r.cfg.RxMode != RxPoll {
					w.rxIdle()
				}
				if time.Since(start) > w.r.cfg.PingTimeout {
					w.ctr.Lost.Add(1)
					w.r.noteError(fmt.Errorf("queue %d: ping seq %d: %w in %v", w.q, seq, ErrNoReply, w.r.cfg.PingTimeout))
					break
				}
				continue
			}
			rtt := time.Since(start)
			p := w.rxBufs[0]
			w.ctr.RxPkts.Add(1)
			w.ctr.RxBytes.Add(uint64(len(p)))
			stream, got, err := w.checker.Check(p)
			if err != nil {
				if w.r.cfg.Verify {
					w.ctr.Corrupt.Add(1)
					w.r.noteError(fmt.Errorf("queue %d: %w", w.q, err))
				}
				continue
			}
			if stream == uint16(w.q) && got == seq {
				h.Add(rtt)
				break
			}
		}
	}
}

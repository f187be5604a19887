package traffic

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/memifnet/memifnet/cmd/memif-perf/internal/verify"
	"github.com/memifnet/memifnet/pkg/memif"
)

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
	idle    int      // empty polls in a row: reset by every poll that moved a packet

	// Zero-copy client without --verify: frames are built in pool buffers (zcSend) and received
	// as views (zcRecv).
	zcSend, zcRecv bool
	zbufs          []memif.Buffer // send buffers
	zviews         []memif.Buffer // receive views
	zpend          []memif.Buffer // allocated and stamped, not yet taken by the ring
	zheader        []byte         // the Ethernet header written into each fresh send buffer
}

func (r *Runner) loop(q int) {
	// With two ports (a chain generator) frames go out on the first and come back on the second.
	w := &worker{
		r: r, q: q, ctr: &r.ctr[q],
		rxq: r.ports[len(r.ports)-1].RxQueue(q), txq: r.ports[0].TxQueue(q),
	}
	cfg := r.cfg
	if cfg.Mode == ModeFwd {
		w.runFwd()
		return
	}
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
	tc, rc := r.ports[0].Config(), r.ports[len(r.ports)-1].Config()
	if tc.ZeroCopy && !cfg.Verify && cfg.Size <= tc.BufferSize && cfg.Mode != ModePing {
		w.zcSend = true
	}
	// Receiving views: in rx mode, and as the sink of a chain generator.
	if rc.ZeroCopy && !cfg.Verify && (cfg.Mode == ModeRx || cfg.Mode == ModeTxRx && len(r.ports) == 2) {
		w.zcRecv = true
	}
	w.zbufs, w.zviews = make([]memif.Buffer, cfg.Burst), make([]memif.Buffer, cfg.Burst)
	w.zheader = w.txPkts[0][:verify.EthHeaderLen]
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
// a long idle stretch (idle counts empty polls in a row: every poll that moves a packet resets it)
// does it give the Go scheduler and the kernel a turn. Yielding from a goroutine locked to its
// thread hands the P to another thread and back (two futex wake-ups and two context switches on
// this CPU, microseconds), so it must not happen while traffic flows: when idle was never reset,
// the echo yielded every 16384 empty polls in total, once every few hundred round trips, and that
// was its p99.9 (5.4-6.5 us against 1.6-2.8 us, docs/performance.md). Never yielding is no better:
// on a loaded machine a spinner that never sleeps loses the CPU to other tasks exactly when its
// peer has work for it (forwarding collapsed to 0.2-6 Mpps where yielding kept 2-19, interleaved).
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
	if w.zcSend {
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
		w.idle = 0
		w.txOff += n
		w.ctr.TxPkts.Add(uint64(n))
		w.ctr.TxBytes.Add(uint64(n * w.r.cfg.Size))
	}
	return n
}

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
		w.idle = 0
		w.zpend = w.zpend[n:]
		w.ctr.TxPkts.Add(uint64(n))
		w.ctr.TxBytes.Add(uint64(n * w.r.cfg.Size))
	}
	return n
}

// receiveZC is receive for a zero-copy client: views of shared memory, counted and released.
func (w *worker) receiveZC() int {
	n := w.rxq.RxBurstZC(w.zviews)
	if n == 0 {
		return 0
	}
	w.idle = 0
	bytes := 0
	for _, b := range w.zviews[:n] {
		bytes += len(b.Data)
	}
	w.rxq.Release(w.zviews[:n])
	w.ctr.RxPkts.Add(uint64(n))
	w.ctr.RxBytes.Add(uint64(bytes))
	return n
}

// receive polls the rx queue once and verifies what came in (with --verify).
func (w *worker) receive() int {
	if w.zcRecv {
		return w.receiveZC()
	}
	n := w.rxq.RxBurst(w.rxBufs)
	if n == 0 {
		return 0
	}
	w.idle = 0
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

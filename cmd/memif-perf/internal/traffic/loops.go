package traffic

import (
	"errors"
	"fmt"
	"time"
)

func (w *worker) runTx() {
	for !w.r.stop.Load() {
		if w.send(len(w.txPkts)) == 0 {
			w.pause()
		}
	}
}

func (w *worker) runRx() {
	m := newBusyMeter(w.r.clock)
	defer m.store(w.ctr)
	for !w.r.stop.Load() {
		t0 := m.start()
		n := w.receive()
		if n == 0 {
			w.rxIdle()
			continue
		}
		m.end(t0, n)
	}
}

// stallTimeout is how long a full txrx window may go without a reply before the packets in it
// are written off (the peer dropped them), so the loop does not wait forever. Long enough for a
// loaded machine: through a chain of forwarders, the window may sit in the first ring while the
// last link of the chain is still connecting, and writing it off early sends more than the rings
// behind can hold (a forwarder then drops, and --verify counts the loss).
const stallTimeout = time.Second

func (w *worker) runTxRx() {
	window := uint64(w.r.cfg.Window)
	var writtenOff uint64
	var stalledSince time.Time // when the window filled up with no reply since
	var polls, idle, full uint64
	defer func() { w.ctr.Polls.Store(polls); w.ctr.IdlePolls.Store(idle); w.ctr.TxFull.Store(full) }()
	for !w.r.stop.Load() {
		// Turns while the link is down wait for no one: they count as neither polls nor full
		// (a generator outliving its forwarder would otherwise read as one that waited).
		up := w.txq.Up()
		if up {
			polls++
		}
		got := w.receive()
		if got == 0 && up {
			idle++
		}
		var inFlight uint64 // a peer may send more than we did: never below zero
		if tx, rx := w.ctr.TxPkts.Load(), w.ctr.RxPkts.Load()+writtenOff; tx > rx {
			inFlight = tx - rx
		}
		if inFlight < window {
			stalledSince = time.Time{}
			sent := w.send(int(min(window-inFlight, uint64(w.r.cfg.Burst))))
			if sent == 0 && up {
				full++
			}
			if sent > 0 || got > 0 {
				continue
			}
		} else if got == 0 {
			now := time.Now()
			if stalledSince.IsZero() {
				stalledSince = now
			} else if now.Sub(stalledSince) > stallTimeout {
				writtenOff += inFlight
				w.ctr.WrittenOff.Add(inFlight)
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
	if w.r.cfg.forwards() {
		w.runEchoForward()
		return
	}
	m := newBusyMeter(w.r.clock)
	defer m.store(w.ctr)
	for !w.r.stop.Load() {
		t0 := m.start()
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
		m.end(t0, n) // the wait for room is busy, as testpmd's Tx retries are
	}
}

// runEchoForward echoes through the library's forwarding path, as an application that only
// sends packets back would: each packet is copied once, from the receive ring's buffer into the
// transmit ring's (not at all for a zero-copy client, whose queue pair draws on one pool share),
// where RxBurst and TxBurst copy it twice. Like the verifying echo it waits for room instead of
// dropping: Forward leaves what the transmit ring cannot take in the receive ring.
func (w *worker) runEchoForward() {
	burst := w.r.cfg.Burst
	m := newBusyMeter(w.r.clock)
	defer m.store(w.ctr)
	for !w.r.stop.Load() {
		t0 := m.start()
		n := w.rxq.Forward(w.txq, burst)
		if n == 0 {
			w.rxIdle()
			continue
		}
		m.end(t0, n)
		w.idle = 0
		w.ctr.RxPkts.Add(uint64(n))
		w.ctr.TxPkts.Add(uint64(n))
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
			w.idle = 0
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

// runFwd is testpmd's io forwarding with paired ports: queue q of each port forwards to queue q
// of the other, burst by burst, one copy per packet (none between zero-copy ports of one pool);
// what the other side has no room for is dropped and counted.
func (w *worker) runFwd() {
	a, b := w.r.ports[0], w.r.ports[1]
	aRx, aTx, bRx, bTx := a.RxQueue(w.q), a.TxQueue(w.q), b.RxQueue(w.q), b.TxQueue(w.q)
	burst := w.r.cfg.Burst
	var polls, idle uint64
	m := newBusyMeter(w.r.clock)
	defer func() { w.ctr.Polls.Store(polls); w.ctr.IdlePolls.Store(idle); m.store(w.ctr) }()
	for !w.r.stop.Load() {
		// Two streams, as testpmd's paired io forwarding has: each direction's poll is busy or
		// idle on its own.
		t0 := m.start()
		f1, d1 := aRx.ForwardDrop(bTx, burst)
		t1 := m.end(t0, f1+d1)
		f2, d2 := bRx.ForwardDrop(aTx, burst)
		m.end(t1, f2+d2)
		switch {
		case f1+d1 != 0:
			polls++
		case aRx.Up() && bTx.Up(): // polls while a link is down are not waiting for traffic
			polls++
			idle++
		}
		if f1+d1+f2+d2 == 0 {
			w.pause()
			continue
		}
		w.idle = 0
		w.ctr.RxPkts.Add(uint64(f1 + d1 + f2 + d2))
		w.ctr.TxPkts.Add(uint64(f1 + f2))
	}
}

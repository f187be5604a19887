package memif

import (
	"runtime/debug"

	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

// Forwarding (a network function's data path): packets received on one interface's RxQueue are
// sent on another interface's TxQueue in one call, with as few copies as the memory allows.
//
//   - Zero-copy client interfaces sharing a Pool: the received buffers themselves go into the
//     transmit ring, no byte is copied, and when the transmit side's peer releases them they come
//     back to the share the receive ring re-arms from (Tx-to-Rx recycling).
//   - Anything else: each packet is copied once, straight from the receive ring's buffer into the
//     transmit ring's buffer. RxBurst followed by TxBurst would copy it twice (ring to the
//     application's buffer, and on into the other ring); DPDK's net_memif copy mode does the same
//     through an mbuf.
//
// Both queues are held (their guards taken) for the whole call, so neither connection's memory
// can be unmapped while a packet is between them, and a fault in either connection's shared
// memory takes only that link down.

// fwdBurst is the most packets one Forward call moves (larger max values are cut to it).
const fwdBurst = 256

// fwdChainMax is the largest chained packet the copying path forwards; a chain is gathered into a
// scratch buffer first, the one case with a second copy (DPDK's largest frames are 9.6 kB).
const fwdChainMax = 64 << 10

// fwdScratch is an RxQueue's memory for Forward, allocated at its first call.
type fwdScratch struct {
	views  [fwdBurst][]byte // packets looked at: views of the receive ring's buffers
	starts [fwdBurst]uint16 // ring position of each packet's first descriptor
	chain  []byte           // a chained packet, gathered
}

// Forward moves up to max packets received on q to tx and returns how many it moved. Packets tx
// has no room for stay in q's ring for the next call, so a slow receiver on tx's side pushes back
// on the sender at q's side, as over a direct link, and nothing is lost. With zero-copy client
// interfaces that share a Pool (Config.Pool) nothing is copied; otherwise each packet is copied
// once, from q's ring buffer into tx's.
//
// q and tx may belong to different interfaces of any role and mode; both have to be up for
// anything to move. The caller must own both queues (call their data-path methods from one
// goroutine), and with a shared pool q and tx must have the same index (queue pair k of every
// interface of a pool draws on share k). Forward allocates its scratch space at its first call
// (and at its first chained packet on the copying path), and never after.
func (q *RxQueue) Forward(tx *TxQueue, max int) int {
	n, _ := q.forward(tx, max, false)
	return n
}

// ForwardDrop is Forward with DPDK testpmd's io-forwarding policy: it receives up to max packets,
// and those tx has no room for are dropped (counted in tx's Stats.Drops) instead of left in q's
// ring. It returns how many it forwarded and how many it dropped.
func (q *RxQueue) ForwardDrop(tx *TxQueue, max int) (forwarded, dropped int) {
	return q.forward(tx, max, true)
}

func (q *RxQueue) forward(tx *TxQueue, max int, drop bool) (int, int) {
	if max <= 0 || !q.acquire() {
		return 0, 0
	}
	// An empty ring is the common poll (a forwarder polls both directions): answer it without
	// taking the other queue. Only where reading the ring cannot fault; else the trap below.
	if q.trap == nil && q.available() == 0 {
		q.release()
		return 0, 0
	}
	if !tx.acquire() {
		q.release()
		return 0, 0
	}
	if q.trap != nil || tx.trap != nil {
		defer caughtPair(&q.queue, &tx.queue, arm())
	}
	max = min(max, fwdBurst)
	var fwd, dropped int
	if q.zc != nil && q.zc == tx.zc {
		fwd, dropped = q.forwardZC(tx, max, drop)
	} else {
		fwd, dropped = q.forwardCopy(tx, max, drop)
	}
	tx.stats.Drops += uint64(dropped)
	tx.release()
	q.release()
	return fwd, dropped
}

// caughtPair is faultTrap.caught for a call that holds two queues: a fault in either
// connection's shared memory releases both and takes that connection's link down.
func caughtPair(rx, tx *queue, armed bool) {
	debug.SetPanicOnFault(armed)
	r := recover()
	if r == nil {
		return
	}
	for _, q := range [2]*queue{rx, tx} {
		if q.trap == nil {
			continue
		}
		if fe := q.trap.owns(r); fe != nil {
			rx.release()
			tx.release()
			q.trap.brk.fire(fe)
			return
		}
	}
	panic(r)
}

// forwardCopy looks at up to max packets in q's ring, lets tx copy them into its own ring, and
// then consumes those tx took (or, dropping, all it looked at).
func (q *RxQueue) forwardCopy(tx *TxQueue, max int, drop bool) (int, int) {
	if q.fwd == nil {
		q.fwd = new(fwdScratch)
	}
	s := q.fwd
	start := q.cursor
	m, end := q.peek(s, max)
	if m == 0 && end == start {
		return 0, 0
	}
	var took int
	if m != 0 {
		took = tx.path.send(tx, s.views[:m])
	}
	consumed, dropped := took, 0
	if drop {
		consumed, dropped = m, m-took
	}
	if consumed < m {
		end = s.starts[consumed] // the first packet left behind; bad descriptors before it are gone
	}
	bytes := 0
	for _, v := range s.views[:consumed] {
		bytes += len(v)
	}
	q.stats.Packets += uint64(consumed)
	q.stats.Bytes += uint64(bytes)
	q.cursor = end
	q.handBack(start)
	clear(s.views[:m]) // drop the references to shared memory
	return took, dropped
}

// peek records views of up to max packets from the cursor on, without consuming them, and
// returns how many and the ring position after them. Bad descriptors are counted and skipped. A
// chain is gathered into the scratch buffer, which holds one: a second chain ends the call.
func (q *RxQueue) peek(s *fwdScratch, max int) (int, uint16) {
	r := &q.ring
	cur := q.cursor
	stop := cur + q.available()
	m, gathered := 0, false
	for m < max && cur != stop {
		d := r.At(cur)
		// Read each field once: the peer may rewrite shared memory at any time.
		flags, region, length, offset := d.Flags, d.Region, d.Length, d.Offset
		if flags&ring.DescFlagNext == 0 {
			src, ok := q.path.segment(q, cur, region, length, offset)
			if !ok {
				q.stats.BadDescs++
				q.stats.Drops++
				cur++
				continue
			}
			s.views[m], s.starts[m] = src, cur
			m++
			cur++
			continue
		}
		if gathered {
			break // the scratch buffer is taken: this chain goes in the next call
		}
		if s.chain == nil {
			s.chain = make([]byte, 0, fwdChainMax)
		}
		used, _, ok := q.consumeOne(&s.chain, cur, stop)
		if used == 0 {
			break // the rest of the chain is not there yet
		}
		if ok {
			s.views[m], s.starts[m] = s.chain, cur
			m++
			gathered = true
		}
		cur += used
	}
	return m, cur
}

// forwardZC hands the buffers of up to max received packets to tx, whose ring draws on the same
// pool share: the descriptors move, the bytes stay where they are.
func (q *RxQueue) forwardZC(tx *TxQueue, max int, drop bool) (int, int) {
	free := tx.reclaimZC() // takes the share's lock itself
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock() // deferred: a trapped fault must not leave the share locked
	rd, rmask, td, tmask, zc := q.ring.Descs, q.ring.Mask, tx.ring.Descs, tx.ring.Mask, q.zc
	cur, stop, tcur := q.cursor, q.cursor+q.available(), tx.cursor
	fwd, dropped, bytes, rxBytes, rxPkts := 0, 0, 0, 0, 0
	for fwd+dropped < max && cur != stop {
		// The packet's descriptors: up to the first without NEXT, all present and sane.
		segs, size, bad := uint16(0), 0, false
		for {
			if cur+segs == stop {
				segs = 0 // the rest of the chain is not there yet
				break
			}
			d := &rd[(cur+segs)&rmask]
			flags, length := d.Flags, d.Length
			segs++
			if length-1 >= zc.bufSize {
				bad = true
			}
			size += int(length)
			if flags&ring.DescFlagNext == 0 {
				break
			}
		}
		if segs == 0 {
			break
		}
		if bad || (drop && segs > free) {
			for k := range segs {
				zc.free.PutOne(q.slots[(cur+k)&rmask])
			}
			if bad {
				q.stats.BadDescs++
				q.stats.Drops++
			} else {
				dropped++
				rxPkts++
				rxBytes += size
			}
			cur += segs
			continue
		}
		if segs > free {
			tx.stats.NoBuf++
			break
		}
		for k := range segs {
			slot := (cur + k) & rmask
			length := rd[slot].Length // read again: clamp what the peer may have changed since
			if length-1 >= zc.bufSize {
				length = zc.bufSize
			}
			idx := q.slots[slot] // our own record, not the peer's region and offset
			var flags uint16
			if k+1 < segs {
				flags = ring.DescFlagNext
			}
			td[tcur&tmask] = ring.Desc{Flags: flags, Region: zcRegionIndex, Length: length, Offset: zc.free.Offset(idx)}
			tx.slots[tcur&tmask] = idx
			tcur++
		}
		cur += segs
		free -= segs
		fwd++
		rxPkts++
		bytes += size
	}
	q.cursor = cur
	q.stats.Packets += uint64(rxPkts)
	q.stats.Bytes += uint64(bytes + rxBytes)
	tx.publish(tcur, fwd, bytes)
	q.refillZC()
	return fwd, dropped
}

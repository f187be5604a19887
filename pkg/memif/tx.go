package memif

import (
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

// TxBurst queues up to len(pkts) packets for the peer, copying them into shared memory, and
// returns how many it took: fewer than len(pkts) when the ring is full (count the rest again
// later). A packet that can never be sent (empty, or larger than the whole ring can carry) is
// taken, dropped and counted in Stats.Drops. A packet larger than one buffer is chained.
//
// TxBurst never allocates.
func (q *TxQueue) TxBurst(pkts [][]byte) int {
	if !q.acquire() {
		return 0
	}
	if t := q.trap; t != nil {
		defer t.caught(&q.queue, arm())
	}
	n := q.path.send(q, pkts)
	q.release()
	return n
}

// txPath is the transmit step that depends on the queue's role and mode, picked once when the
// connection is attached (pickTxPath), as DPDK's memif driver picks its Tx function at probe.
type txPath struct {
	// send copies up to len(pkts) packets into the ring, publishes them, and returns how many it
	// took (TxBurst's contract).
	send func(q *TxQueue, pkts [][]byte) int
}

var (
	txServer   = txPath{send: (*TxQueue).txPeer}   // into the buffers the client armed
	txClient   = txPath{send: (*TxQueue).txOwn}    // into its own slot buffers
	txClientZC = txPath{send: (*TxQueue).txCopyZC} // into buffers of its pool share
)

// pickTxPath is the transmit variant for a role and mode.
func pickTxPath(client, zeroCopy bool) *txPath {
	switch {
	case zeroCopy:
		return &txClientZC
	case client:
		return &txClient
	default:
		return &txServer
	}
}

// txOwn is the client's send path: it writes into its own buffers, one per ring slot, and
// rewrites every descriptor field from private state.
func (q *TxQueue) txOwn(pkts [][]byte) int {
	size := uint16(q.ring.Size())
	used := q.cursor - q.peer.Load()
	if used > size {
		used = size // the server's tail is nonsense: treat the ring as full
		q.stats.BadDescs++
	}
	free := size - used
	if free == 0 {
		q.stats.NoBuf++
		return 0
	}
	r, mask, bufSize, bufs, base, region := &q.ring, q.ring.Mask, q.bufSize, q.bufs, q.bufBase, q.bufRegion
	cur := q.cursor
	i, sent, bytes := 0, 0, 0
	for i < len(pkts) {
		// Fast path: packets of 1..bufSize bytes, one slot each, no segmentation.
		for cnt := min(len(pkts), i+int(free)); i < cnt; i++ {
			l := uint32(len(pkts[i]))
			if l-1 >= bufSize {
				break
			}
			off := base + uint32(cur&mask)*bufSize
			copy(bufs[off:off+l], pkts[i])
			*r.At(cur) = ring.Desc{Region: region, Length: l, Offset: off}
			cur++
			free--
			sent++
			bytes += int(l)
		}
		if i == len(pkts) || free == 0 {
			break
		}
		// General path: an empty packet (dropped) or one that needs a chain.
		p := pkts[i]
		segs := (len(p) + int(bufSize) - 1) / int(bufSize)
		if len(p) == 0 || segs > int(size) {
			q.stats.Drops++
			i++
			continue
		}
		if segs > int(free) {
			break
		}
		for rest := p; len(rest) > 0; {
			off := base + uint32(cur&mask)*bufSize
			k := copy(bufs[off:off+bufSize], rest)
			rest = rest[k:]
			var flags uint16
			if len(rest) > 0 {
				flags = ring.DescFlagNext
			}
			*r.At(cur) = ring.Desc{Flags: flags, Region: region, Length: uint32(k), Offset: off}
			cur++
		}
		free -= uint16(segs)
		sent++
		bytes += len(p)
		i++
	}
	if i < len(pkts) {
		q.stats.NoBuf++
	}
	q.publish(cur, sent, bytes)
	return i
}

// txPeer is the server's send path: it writes into the buffers the client armed, each no more
// than the length the client gave it, chaining across descriptors when a packet does not fit.
func (q *TxQueue) txPeer(pkts [][]byte) int {
	size := uint16(q.ring.Size())
	free := min(q.peer.Load()-q.cursor, size)
	descs, mask := q.ring.Descs, q.ring.Mask
	cur := q.cursor
	i, sent, bytes := 0, 0, 0
	for ; i < len(pkts) && free != 0; i++ {
		p := pkts[i]
		d := &descs[cur&mask]
		region, offset, room := d.Region, d.Offset, d.Length
		dst, ok := q.span(region, offset, room)
		if ok && len(p) != 0 && len(p) <= len(dst) { // fast path: fits the armed buffer
			copy(dst, p)
			d.Flags = 0
			d.Length = uint32(len(p))
			cur++
			free--
			sent++
			bytes += len(p)
			continue
		}
		if !ok {
			// An unusable slot: hand it back empty (the client drops it) and retry the packet.
			q.stats.BadDescs++
			d.Flags, d.Length = 0, 0
			cur++
			free--
			i--
			continue
		}
		if len(p) == 0 {
			q.stats.Drops++
			continue
		}
		used, status := q.txChain(p, cur, free)
		if status == chainNoRoom {
			q.stats.NoBuf++
			break
		}
		cur += used
		free -= used
		if status == chainSent {
			sent++
			bytes += len(p)
		}
	}
	if i < len(pkts) && free == 0 {
		q.stats.NoBuf++
	}
	q.publish(cur, sent, bytes)
	return i
}

// publish hands the descriptors from the cursor up to cur to the peer, if there are any: it counts
// the packets and bytes they carry, moves the cursor, publishes the index this side writes (head
// for the client, tail for the server) and signals the peer unless it polls (MASK_INT). Every
// transmit path ends here, so that the publish-then-look order the interrupt hand-shake relies on
// is written once.
func (q *TxQueue) publish(cur uint16, pkts, bytes int) {
	if cur == q.cursor {
		return
	}
	q.stats.Packets += uint64(pkts)
	q.stats.Bytes += uint64(bytes)
	q.cursor = cur
	// With a full barrier, so that the MASK_INT load below comes after the index store (see
	// ring.Fence): else we could read a stale MASK_INT while the peer, unmasking to sleep, reads
	// our stale index, and it would sleep with packets waiting.
	q.own.Publish(cur)
	if q.ring.LoadFlags()&ring.FlagMaskInt == 0 && q.eventfd >= 0 {
		// The kicker writes the eventfd, which the peer could make block; a kick already
		// pending covers this one.
		select {
		case q.kicker.ch <- struct{}{}:
		default:
		}
	}
}

type chainStatus int

const (
	chainSent chainStatus = iota
	chainNoRoom
	chainDropped
)

// txChain spreads p over the armed buffers from cur on. It first checks that the free slots can
// hold all of p, so that a partial packet is never published.
func (q *TxQueue) txChain(p []byte, cur, free uint16) (uint16, chainStatus) {
	descs, mask := q.ring.Descs, q.ring.Mask
	var segs uint16
	for need := len(p); need > 0; segs++ {
		if segs == free {
			if free == uint16(q.ring.Size()) {
				// Not even the whole ring holds it: it can never be sent.
				q.stats.Drops++
				return 0, chainDropped
			}
			return 0, chainNoRoom
		}
		d := &descs[(cur+segs)&mask]
		dst, ok := q.span(d.Region, d.Offset, d.Length)
		if !ok {
			q.stats.BadDescs++
			q.stats.Drops++
			// Give the packet up and consume the slots looked at, bad one included, empty.
			for k := range segs + 1 {
				descs[(cur+k)&mask].Flags, descs[(cur+k)&mask].Length = 0, 0
			}
			return segs + 1, chainDropped
		}
		need -= len(dst)
	}
	rest := p
	for k := range segs {
		d := &descs[(cur+k)&mask]
		dst, _ := q.span(d.Region, d.Offset, d.Length)
		n := copy(dst, rest)
		rest = rest[n:]
		d.Length = uint32(n)
		d.Flags = 0
		if k+1 < segs {
			d.Flags = ring.DescFlagNext
		}
	}
	return segs, chainSent
}

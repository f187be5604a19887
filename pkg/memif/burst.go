package memif

import "github.com/memifnet/memifnet/pkg/memif/internal/ring"

// RxBurst receives up to len(pkts) packets, copying each into pkts[i] (reusing its capacity:
// pkts[i] = pkts[i][:length]) and returns how many it received. An empty ring or a queue that
// is not connected gives 0. Each pkts[i] must have capacity for the largest packet expected; a
// packet larger than its buffer is dropped and counted in Stats.Drops. Chained packets (several
// descriptors) are reassembled segment after segment.
//
// RxBurst never allocates; the ring is released (server) or re-armed (client) before it returns.
func (q *RxQueue) RxBurst(pkts [][]byte) int {
	if !q.acquire() {
		return 0
	}
	var avail uint16
	if q.client {
		// The server may only have filled slots we armed; anything else is a lie we ignore.
		avail = min(q.ring.LoadTail()-q.cursor, q.head-q.cursor)
	} else {
		avail = min(q.ring.LoadHead()-q.cursor, uint16(q.ring.Size()))
	}
	start, n := q.cursor, 0
	if avail != 0 {
		n = q.consume(pkts, avail)
	}
	switch {
	case q.zc != nil:
		q.recycleConsumed(start)
		q.refillZC()
	case q.client:
		q.refill()
	case q.cursor != start:
		q.ring.StoreTail(q.cursor)
	}
	q.release()
	return n
}

// consume copies packets out of the avail descriptors from the cursor on.
func (q *RxQueue) consume(pkts [][]byte, avail uint16) int {
	descs, mask := q.ring.Descs, q.ring.Mask
	cur, end := q.cursor, q.cursor+avail
	n, bytes := 0, 0
	for n < len(pkts) && cur != end {
		d := &descs[cur&mask]
		// Read each field once: the peer may rewrite shared memory at any time.
		flags, region, length, offset := d.Flags, d.Region, d.Length, d.Offset
		if flags&ring.DescFlagNext != 0 {
			used, size, ok := q.consumeChain(&pkts[n], cur, end)
			if used == 0 {
				break // the rest of the chain is not there yet
			}
			cur += used
			if ok {
				bytes += size
				n++
			}
			continue
		}
		cur++
		src, ok := q.span(region, offset, length)
		if !ok {
			q.stats.BadDescs++
			q.stats.Drops++
			continue
		}
		dst := pkts[n]
		if len(src) > cap(dst) {
			q.stats.Drops++
			continue
		}
		pkts[n] = dst[:copy(dst[:len(src)], src)]
		bytes += len(src)
		n++
	}
	q.cursor = cur
	q.stats.Packets += uint64(n)
	q.stats.Bytes += uint64(bytes)
	return n
}

// consumeChain reassembles the packet whose first descriptor is at cur, appending each segment
// after the previous one. It returns how many descriptors it used (0: the chain is incomplete, try
// again later), the packet size and whether the packet was delivered (false: dropped and counted).
func (q *RxQueue) consumeChain(dst *[]byte, cur, end uint16) (used uint16, size int, ok bool) {
	descs, mask := q.ring.Descs, q.ring.Mask
	avail := end - cur
	// Find the chain's end first, so nothing is consumed before it is complete.
	var segs uint16
	for {
		if segs == avail {
			if avail == uint16(q.ring.Size()) || avail == 0 {
				// A chain as long as the whole ring can never complete: drop it.
				q.stats.BadDescs++
				q.stats.Drops++
				return avail, 0, false
			}
			return 0, 0, false
		}
		flags := descs[(cur+segs)&mask].Flags
		segs++
		if flags&ring.DescFlagNext == 0 {
			break
		}
	}
	buf := (*dst)[:0]
	good := true
	for i := range segs {
		d := &descs[(cur+i)&mask]
		region, length, offset := d.Region, d.Length, d.Offset
		src, valid := q.span(region, offset, length)
		if !valid {
			q.stats.BadDescs++
			good = false
			continue
		}
		if !good || len(buf)+len(src) > cap(buf) {
			good = false
			continue
		}
		buf = append(buf, src...) // within capacity: never allocates
	}
	if !good {
		q.stats.Drops++
		return segs, 0, false
	}
	*dst = buf
	return segs, len(buf), true
}

// refill arms every free slot of a client's receive ring with its own buffer and publishes head.
func (q *RxQueue) refill() {
	end := q.cursor + uint16(q.ring.Size())
	h := q.head
	if h == end {
		return
	}
	descs, mask, bufSize := q.ring.Descs, q.ring.Mask, q.bufSize
	for ; h != end; h++ {
		slot := h & mask
		descs[slot] = ring.Desc{
			Region: q.bufRegion,
			Length: bufSize,
			Offset: q.bufBase + uint32(slot)*bufSize,
		}
	}
	q.head = h
	q.ring.StoreHead(h)
}

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
	var n int
	switch {
	case q.zc != nil:
		n = q.txCopyZC(pkts)
	case q.client:
		n = q.txOwn(pkts)
	default:
		n = q.txPeer(pkts)
	}
	q.release()
	return n
}

// txOwn is the client's send path: it writes into its own buffers, one per ring slot, and
// rewrites every descriptor field from private state.
func (q *TxQueue) txOwn(pkts [][]byte) int {
	size := uint16(q.ring.Size())
	used := q.cursor - q.ring.LoadTail()
	if used > size {
		used = size // the server's tail is nonsense: treat the ring as full
		q.stats.BadDescs++
	}
	free := size - used
	descs, mask, bufSize, bufs := q.ring.Descs, q.ring.Mask, q.bufSize, q.bufs
	cur := q.cursor
	i, sent, bytes := 0, 0, 0
	for ; i < len(pkts); i++ {
		p := pkts[i]
		if uint32(len(p))-1 < bufSize && free != 0 { // fast path: 1..bufSize bytes, one slot
			slot := cur & mask
			off := q.bufBase + uint32(slot)*bufSize
			copy(bufs[off:off+bufSize], p)
			descs[slot] = ring.Desc{Region: q.bufRegion, Length: uint32(len(p)), Offset: off}
			cur++
			free--
			sent++
			bytes += len(p)
			continue
		}
		segs := (len(p) + int(bufSize) - 1) / int(bufSize)
		if len(p) == 0 || segs > int(size) {
			q.stats.Drops++
			continue
		}
		if segs > int(free) {
			q.stats.NoBuf++
			break
		}
		for rest := p; len(rest) > 0; {
			slot := cur & mask
			off := q.bufBase + uint32(slot)*bufSize
			k := copy(bufs[off:off+bufSize], rest)
			rest = rest[k:]
			var flags uint16
			if len(rest) > 0 {
				flags = ring.DescFlagNext
			}
			descs[slot] = ring.Desc{Flags: flags, Region: q.bufRegion, Length: uint32(k), Offset: off}
			cur++
		}
		free -= uint16(segs)
		sent++
		bytes += len(p)
	}
	if cur != q.cursor {
		q.stats.Packets += uint64(sent)
		q.stats.Bytes += uint64(bytes)
		q.cursor = cur
		q.ring.StoreHead(cur)
		q.notify()
	}
	return i
}

// txPeer is the server's send path: it writes into the buffers the client armed, each no more
// than the length the client gave it, chaining across descriptors when a packet does not fit.
func (q *TxQueue) txPeer(pkts [][]byte) int {
	size := uint16(q.ring.Size())
	free := min(q.ring.LoadHead()-q.cursor, size)
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
	if cur != q.cursor {
		q.stats.Packets += uint64(sent)
		q.stats.Bytes += uint64(bytes)
		q.cursor = cur
		q.ring.StoreTail(cur)
		q.notify()
	}
	return i
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

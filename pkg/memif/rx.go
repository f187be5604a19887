package memif

import (
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

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
	if t := q.trap; t != nil {
		defer t.caught(&q.queue, arm())
	}
	start, n := q.cursor, 0
	if avail := q.available(); avail != 0 {
		n = q.consume(pkts, avail)
	}
	q.handBack(start)
	q.release()
	return n
}

// available is how many descriptors the peer has filled beyond the cursor: up to the index it
// published, but never past limit, whatever that index says (a lie we ignore).
func (q *RxQueue) available() uint16 {
	return min(q.peer.Load()-q.cursor, q.limit-q.cursor)
}

// handBack gives the slots consumed since start back to the peer (rxPath.handBack). While the
// peer may fill a whole ring's worth past the cursor (limit-cursor is never more) there is
// nothing to give: the empty poll returns here without a call.
func (q *RxQueue) handBack(start uint16) {
	if q.limit-q.cursor <= q.ring.Mask {
		q.path.handBack(q, start)
	}
}

// rxPath is each receive step that depends on the queue's role and mode, picked once when the
// connection is attached (pickRxPath), as DPDK's memif driver picks its Rx function at probe.
// Each is an indirect call per burst or per run of packets (segment: per segment of a chain, and
// per packet on Forward's copying path), never per byte.
type rxPath struct {
	// fast copies out a run of single-buffer packets from cur on, and stops at the first
	// descriptor that is a chain, fails validation or does not fit the caller's buffer.
	fast func(q *RxQueue, pkts [][]byte, cur, avail uint16) (n, bytes int)
	// segment is the memory the descriptor in slot c names, validated for this side.
	segment func(q *RxQueue, c, region uint16, length, offset uint32) ([]byte, bool)
	// handBack gives the slots from start up to the cursor back to the peer.
	handBack func(q *RxQueue, start uint16)
}

var (
	// A server reads the client's buffers where the descriptors say, and publishes its tail.
	rxServer = rxPath{fast: (*RxQueue).fastPeer, segment: (*RxQueue).segmentPeer, handBack: (*RxQueue).publishTail}
	// A copy-mode client reads its own slot buffers, and re-arms them.
	rxClient = rxPath{fast: (*RxQueue).fastOwn, segment: (*RxQueue).segmentOwn, handBack: (*RxQueue).refill}
	// A zero-copy client copying out reads where the descriptors say, as a server does (its own
	// record of the slot's buffer is for RxBurstZC), recycles the buffers and re-arms from its
	// pool share.
	rxClientZC = rxPath{fast: (*RxQueue).fastPeer, segment: (*RxQueue).segmentPeer, handBack: (*RxQueue).rearmZC}
)

// pickRxPath is the receive variant for a role and mode.
func pickRxPath(client, zeroCopy bool) *rxPath {
	switch {
	case zeroCopy:
		return &rxClientZC
	case client:
		return &rxClient
	default:
		return &rxServer
	}
}

// publishTail is the server's handBack: the consumed slots are the client's again once tail says
// so, and the client may then fill a ring's worth past it.
func (q *RxQueue) publishTail(uint16) {
	q.own.Store(q.cursor)
	q.limit = q.cursor + uint16(q.ring.Size())
}

// consume copies packets out of the avail descriptors from the cursor on. Runs of single-buffer
// packets go through a fast loop; a chain, or a descriptor that fails validation, goes through
// the general path one packet at a time.
func (q *RxQueue) consume(pkts [][]byte, avail uint16) int {
	cur, end := q.cursor, q.cursor+avail
	n, bytes := 0, 0
	for n < len(pkts) && cur != end {
		k, b := q.path.fast(q, pkts[n:], cur, end-cur)
		n += k
		bytes += b
		cur += uint16(k)
		if n == len(pkts) || cur == end {
			break
		}
		used, size, ok := q.consumeOne(&pkts[n], cur, end)
		if used == 0 {
			break // the rest of a chain is not there yet
		}
		cur += used
		if ok {
			bytes += size
			n++
		}
	}
	q.cursor = cur
	q.stats.Packets += uint64(n)
	q.stats.Bytes += uint64(bytes)
	return n
}

// fastPeer is rxPath.fast for descriptors that name memory anywhere in the connection's regions
// (the server's view, and a zero-copy client's).
func (q *RxQueue) fastPeer(pkts [][]byte, cur, avail uint16) (n, bytes int) {
	r, regions := &q.ring, q.regions
	for cnt := min(len(pkts), int(avail)); n < cnt; n++ {
		d := r.At(cur)
		// Read each field once: the peer may rewrite shared memory at any time.
		flags, region, length, offset := d.Flags, d.Region, d.Length, d.Offset
		if flags&ring.DescFlagNext != 0 || int(region) >= len(regions) || length == 0 {
			break
		}
		mem := regions[region]
		e := uint64(offset) + uint64(length)
		if e > uint64(len(mem)) || int(length) > cap(pkts[n]) {
			break
		}
		pkts[n] = pkts[n][:copy(pkts[n][:length], mem[offset:e])]
		bytes += int(length)
		cur++
	}
	return n, bytes
}

// fastOwn is fastPeer for a copy-mode client, which knows which of its own buffers sits behind
// each slot: only the length is read from shared memory (region and offset are the server's to
// scribble on), and it must fit the buffer.
func (q *RxQueue) fastOwn(pkts [][]byte, cur, avail uint16) (n, bytes int) {
	r, bufs, bufSize, base, mask := &q.ring, q.bufs, q.bufSize, q.bufBase, q.ring.Mask
	for cnt := min(len(pkts), int(avail)); n < cnt; n++ {
		d := r.At(cur)
		flags, length := d.Flags, d.Length
		if flags&ring.DescFlagNext != 0 || length-1 >= bufSize || int(length) > cap(pkts[n]) {
			break
		}
		off := base + uint32(cur&mask)*bufSize
		pkts[n] = pkts[n][:copy(pkts[n][:length], bufs[off:off+length])]
		bytes += int(length)
		cur++
	}
	return n, bytes
}

// segmentOwn is rxPath.segment for a copy-mode client: its own buffer of slot c, up to the length
// the server wrote (region and offset are the server's to scribble on).
func (q *RxQueue) segmentOwn(c, _ uint16, length, _ uint32) ([]byte, bool) {
	if length-1 >= q.bufSize {
		return nil, false
	}
	off := q.bufBase + uint32(c&q.ring.Mask)*q.bufSize
	return q.bufs[off : off+length], true
}

// segmentPeer is rxPath.segment for the others: the region and offset given, if they are inside.
func (q *RxQueue) segmentPeer(_, region uint16, length, offset uint32) ([]byte, bool) {
	return q.span(region, offset, length)
}

// consumeOne takes the packet at cur that the fast loops left: a chain, reassembled by appending
// each segment after the previous one, or a single descriptor that is dropped and counted. It
// returns how many descriptors it used (0: the chain is incomplete, try again later), the packet
// size and whether the packet was delivered.
func (q *RxQueue) consumeOne(dst *[]byte, cur, end uint16) (used uint16, size int, ok bool) {
	r := &q.ring
	avail := end - cur
	// Find the packet's end first, so nothing is consumed before it is complete.
	var segs uint16
	for {
		if segs == avail {
			if avail == uint16(r.Size()) {
				// A chain as long as the whole ring can never complete: drop it.
				q.stats.BadDescs++
				q.stats.Drops++
				return avail, 0, false
			}
			return 0, 0, false
		}
		flags := r.At(cur + segs).Flags
		segs++
		if flags&ring.DescFlagNext == 0 {
			break
		}
	}
	buf := (*dst)[:0]
	good := true
	for i := range segs {
		d := r.At(cur + i)
		region, length, offset := d.Region, d.Length, d.Offset
		src, valid := q.path.segment(q, cur+i, region, length, offset)
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

// refill arms the free slots of a client's receive ring with its own buffers and publishes head,
// once at least min(32, ring/2) slots are free (DPDK's policy). Refilling on every poll instead
// keeps the ring fuller but, when the application polls a few packets at a time, republishes head
// for every packet, so the sender finds one armed slot at a time and sends bursts of one:
// BenchmarkPump server-to-client 64 B with receive bursts of 1 measured 2.3-9.1 Mpps every poll
// against 23.3-25.5 batched (8 interleaved runs); at receive bursts of 32 the two are within
// noise (medians 20.8 vs 19.0 Mpps of 6 each). docs/performance.md has the numbers. It is the
// copy-mode client's rxPath.handBack: its buffers stay with their slots, so start does not matter.
func (q *RxQueue) refill(uint16) {
	end := q.cursor + uint16(q.ring.Size())
	h := q.limit
	if end-h < min(refillBatch, uint16(q.ring.Size()/2)) {
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
	q.limit = h
	q.own.Store(h)
}

// refillBatch is the most free slots a client's receive ring waits for before it is re-armed.
const refillBatch = 32

package memif

import (
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

// Zero-copy mode (Config.ZeroCopy, client only, as in DPDK and VPP: only the side that owns the
// memory can point descriptors at its own buffers). The interface creates one buffer pool region
// at Open, announces it to every peer as region 1, and keeps it mapped until Close, so buffers the
// application holds stay valid across reconnects. The pool is split into one share per queue pair:
// RxQueue k and TxQueue k draw from and return to share k, and must therefore be used from one
// goroutine (which is what a forwarding loop does anyway). That is also what makes Tx-to-Rx
// recycling free: a buffer received on RxQueue k and sent on TxQueue k comes back to share k when
// the peer releases it, and RxQueue k re-arms its ring with it, never touching a shared structure.

// zcRegionIndex is the region the pool is announced as.
const zcRegionIndex = 1

// Buffer is one buffer of a zero-copy interface's pool. It belongs to the pool share of the queue
// pair that handed it out (RxBurstZC, Alloc): give it back there (Release, TxBurstZC), or to queue
// pair k of another interface of the same Pool, which shares share k.
type Buffer struct {
	// Data is the packet, a view of shared memory. For a received buffer it is valid until the
	// buffer is released or sent. It may be resliced (not re-allocated) before sending: the offset
	// of Data in its buffer travels in the descriptor.
	Data  []byte
	More  bool // the packet continues in the next Buffer (a chain)
	idx   uint32
	share *zcShare // where idx is a buffer: TxBurstZC and Release take only their own share's
}

// errForeignBuffer is the panic of TxBurstZC and Release given a buffer of another pool or queue
// pair: its index would name a buffer of this share, whose free list it would corrupt, and its
// own share would never get it back. A caller's bug, like a double free, not bad input.
const errForeignBuffer = "memif: a Buffer goes back only to the queue pair it came from, or queue pair k of an " +
	"interface sharing its Pool (PoolConfig.PeersTrustEachOther): between pools, Forward copies, or copy into Alloc'd buffers"

// mine panics unless every buffer is the share's.
func (p *zcShare) mine(bufs []Buffer) {
	for i := range bufs {
		if bufs[i].share != p {
			panic(errForeignBuffer)
		}
	}
}

// RxBurstZC receives up to len(bufs) buffers without copying: each Data is a view of shared
// memory. A chained packet arrives as several buffers, all but the last with More set. Give every
// buffer back with Release or pass it to TxBurstZC of the same queue pair; the ring is re-armed
// from the pool. It panics on an interface without Config.ZeroCopy.
func (q *RxQueue) RxBurstZC(bufs []Buffer) int {
	if q.zc == nil {
		panic("memif: RxBurstZC needs Config.ZeroCopy")
	}
	if !q.acquire() {
		return 0
	}
	if t := q.trap; t != nil {
		defer t.caught(&q.queue, arm())
	}
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock() // deferred: a trapped fault must not leave the share locked
	avail := q.available()
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc
	cur := q.cursor
	n, pkts, bytes := 0, 0, 0
	for ; n < len(bufs) && avail != 0; avail-- {
		slot := cur & mask
		cur++
		d := &descs[slot]
		flags, length := d.Flags, d.Length
		idx := q.slots[slot]        // our own record: the descriptor's region and offset are the peer's to scribble on
		if length-1 >= zc.bufSize { // 0 or more than the buffer: the peer lies
			q.stats.BadDescs++
			q.stats.Drops++
			zc.free.PutOne(idx)
			continue
		}
		more := flags&ring.DescFlagNext != 0
		b := &bufs[n] // field by field: a Buffer literal is built on the stack and copied
		b.Data, b.More, b.idx, b.share = zc.view(idx, length), more, idx, zc
		n++
		bytes += int(length)
		if !more {
			pkts++
		}
	}
	q.cursor = cur
	q.stats.Packets += uint64(pkts)
	q.stats.Bytes += uint64(bytes)
	q.refillZC()
	q.release()
	return n
}

// rearmZC returns the buffers RxBurst copied out of (slots from start up to the cursor) and arms
// the ring again, with the share locked (deferred: a trapped fault in the ring's memory must not
// leave it locked).
func (q *RxQueue) rearmZC(start uint16) {
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock()
	q.recycleConsumed(start)
	q.refillZC()
}

// refillZC arms every free slot of the receive ring with a buffer from the pool. Call with the
// share locked.
func (q *RxQueue) refillZC() {
	want := q.cursor + uint16(q.ring.Size()) - q.limit
	if want == 0 {
		return
	}
	got := q.zc.free.Get(q.scratch[:want])
	if got < int(want) {
		q.stats.NoBuf++
	}
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc
	h := q.limit
	for _, idx := range q.scratch[:got] {
		slot := h & mask
		q.slots[slot] = idx
		descs[slot] = ring.Desc{Region: zcRegionIndex, Length: zc.bufSize, Offset: zc.free.Offset(idx)}
		h++
	}
	if h != q.limit {
		q.limit = h
		q.own.Store(h)
	}
}

// Release gives received buffers back to the pool. Call it from the queue pair's goroutine. It
// panics on a buffer of another pool or queue pair.
func (q *RxQueue) Release(bufs []Buffer) {
	q.zc.mine(bufs)
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock()
	for i := range bufs {
		q.zc.free.PutOne(bufs[i].idx)
	}
}

// Alloc fills bufs with empty buffers of the pool (Data spans the whole buffer) and returns how
// many it could get. Send them with TxBurstZC.
func (q *TxQueue) Alloc(bufs []Buffer) int {
	if q.zc == nil {
		panic("memif: Alloc needs Config.ZeroCopy")
	}
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock()
	n := 0
	for n < len(bufs) {
		k := q.zc.free.Get(q.scratch[:min(len(q.scratch), len(bufs)-n)])
		if k == 0 {
			break
		}
		for _, idx := range q.scratch[:k] {
			b := &bufs[n] // field by field, as in RxBurstZC
			b.Data, b.More, b.idx, b.share = q.zc.view(idx, q.zc.bufSize), false, idx, q.zc
			n++
		}
	}
	return n
}

// TxBurstZC hands buffers to the peer without copying and returns how many it took; a chain is
// taken whole or not at all. The queue owns the buffers it took and returns them to the pool when
// the peer has released them. Fewer than len(bufs) means the ring is full. It panics on a buffer
// of another pool or queue pair (see Buffer).
func (q *TxQueue) TxBurstZC(bufs []Buffer) int {
	if q.zc == nil {
		panic("memif: TxBurstZC needs Config.ZeroCopy")
	}
	q.zc.mine(bufs) // before the queue is taken: the panic leaves it usable
	if !q.acquire() {
		return 0
	}
	if t := q.trap; t != nil {
		defer t.caught(&q.queue, arm())
	}
	free := q.reclaimZC()
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc // the loop below touches no free list
	cur := q.cursor
	i, pkts, bytes := 0, 0, 0
	for i < len(bufs) {
		segs := uint16(1)
		for int(segs) <= len(bufs)-i && bufs[i+int(segs)-1].More {
			segs++
		}
		if int(segs) > len(bufs)-i {
			break // the caller's chain is cut off at the end of bufs: it cannot be sent
		}
		if segs > free {
			q.stats.NoBuf++
			break
		}
		for _, b := range bufs[i : i+int(segs)] {
			slot := cur & mask
			// Data is a subslice of the buffer's view, so its capacity says where it starts.
			start := zc.bufSize - uint32(cap(b.Data))
			var flags uint16
			if b.More {
				flags = ring.DescFlagNext
			}
			descs[slot] = ring.Desc{Flags: flags, Region: zcRegionIndex, Length: uint32(len(b.Data)), Offset: zc.free.Offset(b.idx) + start}
			q.slots[slot] = b.idx
			cur++
			bytes += len(b.Data)
		}
		i += int(segs)
		free -= segs
		pkts++
	}
	q.publish(cur, pkts, bytes)
	q.release()
	return i
}

// reclaimZC returns the buffers the peer has released (tail passed them) to the pool and says how
// many slots are free. It takes the share's lock; callers must not hold it.
func (q *TxQueue) reclaimZC() uint16 {
	size := uint16(q.ring.Size())
	tail := q.peer.Load()
	if q.cursor-tail > size || tail-q.reclaim > q.cursor-q.reclaim {
		q.stats.BadDescs++ // the server's tail is nonsense: reclaim nothing, send nothing
		return 0
	}
	if q.reclaim == tail {
		return size - (q.cursor - tail)
	}
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock()
	mask := q.ring.Mask
	for q.reclaim != tail {
		k := 0
		for q.reclaim != tail && k < len(q.scratch) {
			q.scratch[k] = q.slots[q.reclaim&mask]
			q.reclaim++
			k++
		}
		q.zc.free.Put(q.scratch[:k])
	}
	return size - (q.cursor - tail)
}

// zcArmed is a receive ring a zero-copy client armed from its pool share before CONNECT. The
// buffers are the connection's until attach hands them to the queue, or close gives them back.
type zcArmed struct {
	share *zcShare
	idx   []uint32 // the buffer in slot s
}

// armZC arms every M2S ring with buffers from its queue's share before the client announces it:
// a server's link is up once it has CONNECT, and it may send before the client has read
// CONNECTED (the copy-mode client arms its rings in newClientConnection for the same reason). The
// queues are parked, so only the share, which the application may be using, needs its lock.
func (c *connection) armZC(rx []*RxQueue) {
	c.armed = make([]zcArmed, len(c.m2s))
	for k, ri := range c.m2s {
		share := rx[k].zc
		idx := make([]uint32, ri.r.Size())
		share.mu.Lock()
		n := share.free.Get(idx)
		share.mu.Unlock()
		for s, b := range idx[:n] {
			ri.r.Descs[s] = ring.Desc{Region: zcRegionIndex, Length: share.bufSize, Offset: share.free.Offset(b)}
		}
		ri.r.StoreHead(uint16(n))
		c.armed[k] = zcArmed{share: share, idx: idx[:n]}
	}
}

// returnArmedZC gives back the buffers of rings armed before CONNECT that no queue took over (the
// handshake failed, or the interface closed before attach).
func (c *connection) returnArmedZC() {
	for k := range c.armed {
		a := &c.armed[k]
		a.share.mu.Lock()
		a.share.free.Put(a.idx)
		a.share.mu.Unlock()
		a.idx = nil
	}
	c.armed = nil
}

// adoptArmedZC takes over the slots armed before CONNECT, as the server may already have filled
// some, and arms any the pool could not fill then. Head is stored again: DPDK's server zeroes head
// and tail when it gets CONNECT, and leaves the descriptors.
func (q *RxQueue) adoptArmedZC(a *zcArmed) {
	copy(q.slots, a.idx)
	q.limit = uint16(len(a.idx))
	a.idx = nil
	q.own.Store(q.limit)
	q.rearmZC(0) // nothing consumed yet
}

// recoverZC returns the buffers a dead connection's rings held (armed Rx slots, unreleased Tx
// slots) to the pool. The queue must be parked; the queue pair's owner may still be releasing or
// allocating meanwhile (that needs no connection), so the share is locked.
func (q *queue) recoverZC(rx bool) {
	if q.zc == nil || q.slots == nil {
		return
	}
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock()
	mask := uint16(len(q.slots) - 1)
	from, to := q.cursor, q.limit // Rx: armed but not received
	if !rx {
		from, to = q.reclaim, q.cursor // Tx: sent but not released
	}
	for s := from; s != to; s++ {
		q.zc.free.PutOne(q.slots[s&mask])
	}
	q.slots = nil
}

// recycleConsumed returns the buffers of the slots from start up to the cursor, which RxBurst
// copied out of, to the pool. Call with the share locked.
func (q *RxQueue) recycleConsumed(start uint16) {
	mask := q.ring.Mask
	for s := start; s != q.cursor; s++ {
		q.zc.free.PutOne(q.slots[s&mask])
	}
}

// txCopyZC is TxBurst on a zero-copy queue: packets are copied into pool buffers.
func (q *TxQueue) txCopyZC(pkts [][]byte) int {
	size := uint16(q.ring.Size())
	free := q.reclaimZC()
	q.zc.mu.Lock()
	defer q.zc.mu.Unlock()
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc
	bufSize := int(zc.bufSize)
	cur := q.cursor
	i, sent, bytes := 0, 0, 0
	for ; i < len(pkts); i++ {
		p := pkts[i]
		segs := (len(p) + bufSize - 1) / bufSize
		if len(p) == 0 || segs > int(size) {
			q.stats.Drops++
			continue
		}
		if segs > int(free) || segs > zc.free.Available() {
			q.stats.NoBuf++
			break
		}
		for rest := p; len(rest) > 0; {
			idx, _ := zc.free.GetOne()
			slot := cur & mask
			off := zc.free.Offset(idx)
			k := copy(zc.mem[off:off+zc.bufSize], rest)
			rest = rest[k:]
			var flags uint16
			if len(rest) > 0 {
				flags = ring.DescFlagNext
			}
			descs[slot] = ring.Desc{Flags: flags, Region: zcRegionIndex, Length: uint32(k), Offset: off}
			q.slots[slot] = idx
			cur++
		}
		free -= uint16(segs)
		sent++
		bytes += len(p)
	}
	q.publish(cur, sent, bytes)
	return i
}

// BuffersFree is how many buffers of the queue pair's pool share are free (zero-copy only; 0
// otherwise). Call it from the queue pair's goroutine.
func (q *queue) BuffersFree() int {
	if q.zc == nil {
		return 0
	}
	return q.zc.available()
}

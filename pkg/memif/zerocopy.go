package memif

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/memifnet/memifnet/pkg/alloc"
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

// Buffer is one buffer of a zero-copy interface's pool.
type Buffer struct {
	// Data is the packet, a view of shared memory. For a received buffer it is valid until the
	// buffer is released or sent. It may be resliced (not re-allocated) before sending: the offset
	// of Data in its buffer travels in the descriptor.
	Data []byte
	More bool // the packet continues in the next Buffer (a chain)
	idx  uint32
}

// zcShare is one queue pair's share of the pool.
type zcShare struct {
	mem     []byte // the whole pool region
	bufSize uint32
	free    *alloc.Pool // touched only by the share's owner: the goroutine of queue pairs k

	// Buffers a dead connection's rings held, returned by that interface's control goroutine.
	// It must not touch free: the owner may be in a burst of another interface of the pool, or in
	// Release or Alloc, which take no guard. The owner adopts them at its next allocation.
	orphanMu sync.Mutex
	orphans  []uint32
	orphaned atomic.Bool
}

// orphan hands buffers to the share from outside its owner goroutine.
func (p *zcShare) orphan(idx []uint32) {
	p.orphanMu.Lock()
	p.orphans = append(p.orphans, idx...)
	p.orphaned.Store(true)
	p.orphanMu.Unlock()
}

// adopt moves orphaned buffers into the free list; called by the owner before it allocates (one
// atomic load when there are none).
func (p *zcShare) adopt() {
	if !p.orphaned.Load() {
		return
	}
	p.orphanMu.Lock()
	p.free.Put(p.orphans)
	p.orphans = p.orphans[:0]
	p.orphaned.Store(false)
	p.orphanMu.Unlock()
}

// view is buffer idx as a slice of n bytes whose capacity ends at the buffer's end.
func (p *zcShare) view(idx, n uint32) []byte {
	off := p.free.Offset(idx)
	return p.mem[off : off+n : off+p.bufSize]
}

// Pool is the buffer pool of zero-copy client interfaces, announced to each peer as region 1.
// Open creates a private one for an interface with Config.ZeroCopy; create one with NewPool and
// put it in the Config of several interfaces to forward between them without copying (an l2fwd):
// a buffer received on interface A's RxQueue k can be sent on interface B's TxQueue k, and when
// B's peer releases it, it goes back to share k, from which A's RxQueue k re-arms its ring. That
// is Tx-to-Rx buffer recycling with no shared structure in between, which requires that queue
// pairs k of all interfaces of a pool are used from one goroutine. Open takes each receive ring's
// worth of buffers from the pool (to arm the ring at every connect): open the interfaces before
// that goroutine starts, or from it.
type Pool struct {
	region  *alloc.Region
	shares  []*zcShare
	bufSize int
	private bool // created by Open for one interface: closed with it

	mu     sync.Mutex
	users  int
	closed bool
}

// PoolConfig sizes a Pool.
type PoolConfig struct {
	Name string
	// Pairs is the number of shares: interfaces using the pool may have at most this many receive
	// and transmit queues.
	Pairs int
	// Buffers per share. Each interface's queue pair k can hold a full receive ring and a full
	// transmit ring of share k's buffers, and the application holds some: for two interfaces with
	// rings of R slots, 5R leaves R to the application.
	Buffers    int
	BufferSize int
	// Memory backs the pool: BackingAuto and BackingMemfd give a memfd of ordinary pages, sealed
	// against shrinking and growing and faulted in by this process, which pays for it.
	// BackingHugepages is refused: the application touches pool buffers itself, where no fault
	// is trapped, and a peer can punch a hole into hugetlbfs memory (only F_SEAL_WRITE would stop
	// that, and it rules out the peer's writable mapping) that is refilled on the next touch only
	// while a free huge page is left: else SIGBUS in the application. In ordinary memory a
	// punched hole reads as zeros.
	Memory alloc.Backing
	// NewRegion, when set, creates the pool's region instead; it must be one that cannot fault
	// (alloc.Region.MayFault false: a sealed memfd of ordinary memory), or NewPool refuses it.
	NewRegion func(name string, size int) (*alloc.Region, error)
}

// errPoolMayFault is why NewPool refuses memory a peer could make fault under the application.
var errPoolMayFault = errors.New("the region can fault when the peer truncates it or punches a hole into it " +
	"(a file, such as a hugepage pool unit, or hugetlbfs memory): zero-copy buffers are touched by the " +
	"application, where a fault kills the process; use a sealed memfd of ordinary memory (alloc.BackingMemfd)")

// NewPool creates a pool. Close it after every interface using it is closed.
func NewPool(c PoolConfig) (*Pool, error) {
	if c.Pairs < 1 || c.Pairs > MaxQueues || c.Buffers < 1 || c.BufferSize < MinBufferSize || c.BufferSize > MaxBufferSize {
		return nil, fmt.Errorf("memif pool %q: pairs %d (1..%d), buffers %d (>= 1) and buffer size %d (%d..%d) out of range",
			c.Name, c.Pairs, MaxQueues, c.Buffers, c.BufferSize, MinBufferSize, MaxBufferSize)
	}
	size := uint64(c.Pairs) * uint64(c.Buffers) * uint64(c.BufferSize)
	if size > 1<<32-1 {
		return nil, fmt.Errorf("memif pool %q: %d bytes is over the 4 GiB a region can address", c.Name, size)
	}
	var region *alloc.Region
	var err error
	switch {
	case c.NewRegion != nil:
		region, err = c.NewRegion("memif-pool-"+c.Name, int(size))
	case c.Memory == alloc.BackingHugepages:
		return nil, fmt.Errorf("memif pool %q: hugepages: %w", c.Name, errPoolMayFault)
	default:
		region, err = alloc.NewRegion("memif-pool-"+c.Name, int(size), alloc.BackingMemfd)
	}
	if err != nil {
		return nil, fmt.Errorf("memif pool %q: %w", c.Name, err)
	}
	if region.MayFault {
		region.Close()
		return nil, fmt.Errorf("memif pool %q: %w", c.Name, errPoolMayFault)
	}
	p := &Pool{region: region, bufSize: c.BufferSize, shares: make([]*zcShare, c.Pairs)}
	for k := range p.shares {
		p.shares[k] = &zcShare{
			mem:     region.Mem,
			bufSize: uint32(c.BufferSize),
			free:    alloc.NewPool(c.Buffers, uint32(k*c.Buffers*c.BufferSize), uint32(c.BufferSize)),
		}
	}
	return p, nil
}

// privatePool is the pool Open creates for one zero-copy interface: per queue pair, room for a
// full receive ring, a full transmit ring and as much again for the application to hold.
func privatePool(cfg Config) (*Pool, error) {
	p, err := NewPool(PoolConfig{Name: cfg.Name, Pairs: max(cfg.RxQueues, cfg.TxQueues), Buffers: 3 * cfg.RingSize,
		BufferSize: cfg.BufferSize, Memory: cfg.Memory, NewRegion: cfg.NewRegion})
	if err != nil {
		return nil, fmt.Errorf("memif: zero-copy pool: %w", err)
	}
	p.private = true
	return p, nil
}

// BuffersFree is how many buffers of share k are free. Call it from share k's goroutine.
func (p *Pool) BuffersFree(k int) int {
	p.shares[k].adopt()
	return p.shares[k].free.Available()
}

// join registers an interface as a user.
func (p *Pool) join() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("memif: the pool is closed")
	}
	p.users++
	return nil
}

// leave unregisters a user; a private pool is closed with its interface.
func (p *Pool) leave() error {
	p.mu.Lock()
	p.users--
	last := p.users == 0 && p.private
	p.mu.Unlock()
	if last {
		return p.Close()
	}
	return nil
}

// Close unmaps the pool. It fails while an interface using it is open: their rings point into it.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.users > 0 {
		return fmt.Errorf("memif: pool in use by %d open interfaces", p.users)
	}
	if p.closed {
		return nil
	}
	p.closed = true
	return p.region.Close()
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
	avail := min(q.ring.LoadTail()-q.cursor, q.head-q.cursor)
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
		bufs[n] = Buffer{Data: zc.view(idx, length), More: more, idx: idx}
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

// refillZC arms every free slot of the receive ring with a buffer from the pool.
func (q *RxQueue) refillZC() {
	want := q.cursor + uint16(q.ring.Size()) - q.head
	if want == 0 {
		return
	}
	q.zc.adopt()
	got := q.zc.free.Get(q.scratch[:want])
	if got < int(want) {
		q.stats.NoBuf++
	}
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc
	h := q.head
	for _, idx := range q.scratch[:got] {
		slot := h & mask
		q.slots[slot] = idx
		descs[slot] = ring.Desc{Region: zcRegionIndex, Length: zc.bufSize, Offset: zc.free.Offset(idx)}
		h++
	}
	if h != q.head {
		q.head = h
		q.ring.StoreHead(h)
	}
}

// armFromStash arms a freshly attached receive ring with the queue's reserved buffers (control
// goroutine, queue parked); the owner's next refill arms whatever is left.
func (q *RxQueue) armFromStash() {
	k := min(len(q.stash), q.ring.Size())
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc
	h := q.head
	for _, idx := range q.stash[len(q.stash)-k:] {
		slot := h & mask
		q.slots[slot] = idx
		descs[slot] = ring.Desc{Region: zcRegionIndex, Length: zc.bufSize, Offset: zc.free.Offset(idx)}
		h++
	}
	q.stash = q.stash[:len(q.stash)-k]
	if h != q.head {
		q.head = h
		q.ring.StoreHead(h)
	}
}

// Release gives received buffers back to the pool. Call it from the queue pair's goroutine.
func (q *RxQueue) Release(bufs []Buffer) {
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
	q.zc.adopt()
	n := 0
	for n < len(bufs) {
		k := q.zc.free.Get(q.scratch[:min(len(q.scratch), len(bufs)-n)])
		if k == 0 {
			break
		}
		for _, idx := range q.scratch[:k] {
			bufs[n] = Buffer{Data: q.zc.view(idx, q.zc.bufSize), idx: idx}
			n++
		}
	}
	return n
}

// TxBurstZC hands buffers to the peer without copying and returns how many it took; a chain is
// taken whole or not at all. The queue owns the buffers it took and returns them to the pool when
// the peer has released them. Fewer than len(bufs) means the ring is full.
func (q *TxQueue) TxBurstZC(bufs []Buffer) int {
	if q.zc == nil {
		panic("memif: TxBurstZC needs Config.ZeroCopy")
	}
	if !q.acquire() {
		return 0
	}
	if t := q.trap; t != nil {
		defer t.caught(&q.queue, arm())
	}
	free := q.reclaimZC()
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc
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
// many slots are free.
func (q *TxQueue) reclaimZC() uint16 {
	size := uint16(q.ring.Size())
	tail := q.ring.LoadTail()
	if q.cursor-tail > size || tail-q.reclaim > q.cursor-q.reclaim {
		q.stats.BadDescs++ // the server's tail is nonsense: reclaim nothing, send nothing
		return 0
	}
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

// recoverZC returns the buffers a dead connection's rings held (armed Rx slots, unreleased Tx
// slots) to the pool. The queue must be parked.
func (q *queue) recoverZC(rx bool) {
	if q.zc == nil || q.slots == nil {
		return
	}
	mask := uint16(len(q.slots) - 1)
	from, to := q.cursor, q.head // Rx: armed but not received
	if !rx {
		from, to = q.reclaim, q.cursor // Tx: sent but not released
	}
	// Not into the free list: this is the control goroutine (see zcShare). What an Rx ring held
	// arms it again at the next attach; what the peer never released from a Tx ring goes to the
	// owner.
	if rx {
		for s := from; s != to; s++ {
			q.stash = append(q.stash, q.slots[s&mask])
		}
	} else {
		held := make([]uint32, 0, to-from)
		for s := from; s != to; s++ {
			held = append(held, q.slots[s&mask])
		}
		q.zc.orphan(held)
	}
	q.slots = nil
}

// recycleConsumed returns the buffers of the slots from start up to the cursor, which RxBurst
// copied out of, to the pool.
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
	descs, mask, zc := q.ring.Descs, q.ring.Mask, q.zc
	bufSize := int(zc.bufSize)
	zc.adopt()
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
	q.zc.adopt()
	return q.zc.free.Available()
}

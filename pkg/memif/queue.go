package memif

import (
	"encoding/binary"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/memifnet/memifnet/pkg/memif/internal/release"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

// Stats are one queue's counters since the interface was opened. They survive reconnects.
type Stats struct {
	Packets  uint64 // packets received (Rx) or queued to the peer (Tx)
	Bytes    uint64 // payload bytes of those packets
	Drops    uint64 // packets lost: bad descriptors, too large for the caller's buffer, or unsendable
	BadDescs uint64 // descriptors from the peer that failed validation (region, offset, length)
	NoBuf    uint64 // Tx: bursts cut short by a full ring; Rx: refills short of buffers
}

// Guard states of a queue. The data path and the control goroutine hand the queue's connection
// state over through this word, so that a disconnect can never unmap memory under a running burst.
const (
	guardIdle     int32 = iota // connected, no burst running
	guardBusy                  // a burst (or a Stats reader) owns the queue
	guardDown                  // not connected: the control goroutine owns the connection state
	guardDownBusy              // not connected and a Stats reader is looking
)

// queue is what RxQueue and TxQueue share: the guard, the ring of the current connection and the
// private cursors. Fields below guard are written only by whoever holds the guard.
type queue struct {
	guard int32 // only through sync/atomic, and release.Store32 at the end of a burst

	ring     ring.Ring
	regions  [][]byte        // every region of the connection, by index
	eventfd  int             // the ring's interrupt eventfd
	efile    *os.File        // the same eventfd in the runtime poller (Rx: Wait sleeps on it)
	erc      syscall.RawConn // efile's raw reads (Rx: Wait drains with them)
	ringName string          // "S2M ring 0": what a DISCONNECT about its eventfd names
	brk      *breaker        // the connection's: ends it with a reason

	// The client's own buffers for this ring: buffer of slot s is at bufBase+s*bufSize in region
	// bufRegion. Never read back from shared memory, where the peer could change it.
	bufRegion uint16
	bufBase   uint32
	bufSize   uint32
	bufs      []byte // region bufRegion, for the client's own writes

	maxSleep time.Duration // Rx: the longest Wait (Config.MaxSleep)

	// The ring's two indices, picked at connect: the peer's (tail for a client, head for a
	// server), loaded to see how far it has got, and our own, published.
	peer ring.Index
	own  ring.Index

	cursor uint16 // next descriptor to consume (Rx) or produce (Tx)
	// Rx: the peer may fill descriptors up to here and no further, whatever its index says: up to
	// the slots a client armed, or a ring's worth past the tail a server published.
	limit uint16

	// Zero-copy (client): the queue pair's share of the pool, the buffer behind each ring slot
	// (our own record, never read back from shared memory), and the next Tx slot to reclaim.
	zc      *zcShare
	slots   []uint32
	scratch []uint32
	reclaim uint16

	stats Stats

	trap *faultTrap // the connection's, when one of its regions can shrink (fault.go)
}

// acquire takes the queue for a burst; false means the queue is not connected.
func (q *queue) acquire() bool {
	for {
		if atomic.CompareAndSwapInt32(&q.guard, guardIdle, guardBusy) {
			return true
		}
		if g := atomic.LoadInt32(&q.guard); g == guardDown || g == guardDownBusy {
			return false
		}
		// Another goroutine holds the queue: a Stats reader, or a caller breaking the one-owner
		// rule. Either way it is brief.
		runtime.Gosched()
	}
}

// release gives the queue back after a burst. A store-release is enough to unlock (the burst's
// writes are visible before the guard says idle); sync/atomic's Store would add a full barrier,
// a third of an empty poll's cost on amd64 (BenchmarkEmptyPoll).
func (q *queue) release() { release.Store32(&q.guard, guardIdle) }

// park takes the queue away from the data path (control side) and waits for a running burst.
func (q *queue) park() {
	for !atomic.CompareAndSwapInt32(&q.guard, guardIdle, guardDown) {
		if atomic.LoadInt32(&q.guard) == guardDown {
			return
		}
		runtime.Gosched()
	}
}

// unpark hands the queue, with fresh connection state, to the data path.
func (q *queue) unpark() {
	for !atomic.CompareAndSwapInt32(&q.guard, guardDown, guardIdle) {
		runtime.Gosched() // a Stats reader holds guardDownBusy
	}
}

// Stats returns the queue's counters. It may be called from any goroutine.
func (q *queue) Stats() Stats {
	for {
		if atomic.CompareAndSwapInt32(&q.guard, guardIdle, guardBusy) {
			s := q.stats
			atomic.StoreInt32(&q.guard, guardIdle)
			return s
		}
		if atomic.CompareAndSwapInt32(&q.guard, guardDown, guardDownBusy) {
			s := q.stats
			atomic.StoreInt32(&q.guard, guardDown)
			return s
		}
		runtime.Gosched()
	}
}

// Up reports whether the queue is connected to a peer ring.
func (q *queue) Up() bool {
	g := atomic.LoadInt32(&q.guard)
	return g == guardIdle || g == guardBusy
}

// span is the part of a region that a descriptor of the peer names, or false if it does not lie
// inside a region or is empty. Bounds are computed in 64 bits.
func (q *queue) span(region uint16, offset, length uint32) ([]byte, bool) {
	if int(region) >= len(q.regions) || length == 0 {
		return nil, false
	}
	r := q.regions[region]
	end := uint64(offset) + uint64(length)
	if end > uint64(len(r)) {
		return nil, false
	}
	return r[offset:end:end], true
}

// eventfdOne is what a write adds to an eventfd counter: 1, in the host's byte order.
var eventfdOne = func() (b [8]byte) { binary.NativeEndian.PutUint64(b[:], 1); return }()

// RxQueue receives packets. It has one owner: call RxBurst from one goroutine at a time.
type RxQueue struct {
	queue
	index int
	path  *rxPath     // the connection's receive steps, picked at attach
	fwd   *fwdScratch // Forward's, from its first call
}

// TxQueue sends packets. It has one owner: call TxBurst from one goroutine at a time.
type TxQueue struct {
	queue
	index  int
	path   *txPath // the connection's transmit step, picked at attach
	kicker *kicker // signals the peer on a goroutine of its own (interrupt.go)
}

// Index is the queue number.
func (q *RxQueue) Index() int { return q.index }

// Index is the queue number.
func (q *TxQueue) Index() int { return q.index }

// RingState is a snapshot of a queue's ring for diagnostics, like VPP's "show memif".
type RingState struct {
	Size   int
	Head   uint16 // written by the client
	Tail   uint16 // written by the server
	Flags  uint16 // written by the ring's receiver
	Cursor uint16 // this side's next descriptor to consume or produce
}

// RingState reads the ring's indices; ok is false while the queue is down.
func (q *queue) RingState() (s RingState, ok bool) {
	if !q.acquire() {
		return RingState{}, false
	}
	if t := q.trap; t != nil {
		defer t.caught(q, arm())
	}
	defer q.release()
	return RingState{
		Size: q.ring.Size(), Head: q.ring.LoadHead(), Tail: q.ring.LoadTail(),
		Flags: q.ring.LoadFlags(), Cursor: q.cursor,
	}, true
}

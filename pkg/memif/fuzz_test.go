package memif

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
)

// FuzzRxRing runs the receive path, in both roles, over ring memory the fuzzer controls entirely:
// descriptors, head, tail, and where the cursors stand. Whatever a peer writes, RxBurst must not
// panic, must not return more packets than it was given buffers for, and must not hand out bytes
// from outside the regions.
func FuzzRxRing(f *testing.F) {
	seed := make([]byte, 16*16+8)
	binary.NativeEndian.PutUint16(seed[0:], 3)   // head
	binary.NativeEndian.PutUint16(seed[2:], 3)   // tail
	binary.NativeEndian.PutUint32(seed[8+4:], 5) // desc 0 length
	f.Add(seed, uint16(0), uint16(0), true)
	f.Add(seed, uint16(0), uint16(0), false)
	f.Fuzz(func(t *testing.T, data []byte, cursor, head uint16, client bool) {
		const log2 = 4
		ringMem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatalf("map ring memory: %v", err)
		}
		defer unix.Munmap(ringMem)
		r, err := ring.New(ringMem, log2, 64)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) >= 8 {
			r.StoreHead(binary.NativeEndian.Uint16(data[0:]))
			r.StoreTail(binary.NativeEndian.Uint16(data[2:]))
			r.StoreFlags(binary.NativeEndian.Uint16(data[4:]))
			data = data[8:]
		}
		descBytes := unsafeDescBytes(r)
		copy(descBytes, data)
		// Two regions: the ring's own page and a small data region.
		dataRegion := make([]byte, 2048) // room for 16 slots of 64-byte buffers (the client layout) and more
		q := &RxQueue{}
		q.regions = [][]byte{ringMem, dataRegion}
		q.ring = r
		q.path = pickRxPath(client, false)
		q.eventfd = -1
		q.cursor = cursor
		q.peer, q.own = r.Head(), r.Tail()
		q.limit = cursor + uint16(r.Size()) // a server's: a ring's worth past its tail
		q.bufSize = 64
		q.bufBase = 0
		q.bufRegion = 1
		q.bufs = dataRegion
		if client {
			// The client's armed count never exceeds the ring.
			q.peer, q.own = q.own, q.peer
			q.limit = cursor + min(head, uint16(r.Size()))
		}
		bufs := make([][]byte, 8)
		for i := range bufs {
			bufs[i] = make([]byte, 0, 300)
		}
		for range 3 {
			n := q.RxBurst(bufs)
			if n > len(bufs) {
				t.Fatalf("RxBurst returned %d for %d buffers", n, len(bufs))
			}
			for _, b := range bufs[:n] {
				if len(b) == 0 || len(b) > 300 {
					t.Fatalf("packet of %d bytes", len(b))
				}
			}
		}
		if q.stats.Packets+q.stats.Drops > 3*uint64(r.Size()) {
			t.Fatalf("stats %+v: more packets than the ring could hold", q.stats)
		}
		if client {
			// The same ring as a zero-copy client's receive ring over its own pool.
			zq := &RxQueue{}
			zq.path = pickRxPath(true, true)
			zq.queue = queue{ring: r, regions: q.regions, eventfd: -1,
				peer: q.peer, own: q.own, cursor: q.cursor, limit: q.limit}
			zq.zc = &zcShare{mem: make([]byte, 3*r.Size()*64), bufSize: 64, free: alloc.NewPool(3*r.Size(), 0, 64)}
			zq.slots = make([]uint32, r.Size())
			zq.scratch = make([]uint32, r.Size())
			zq.zc.free.Get(zq.slots) // the armed slots hold buffers 0..size-1
			zbufs := make([]Buffer, 8)
			for range 3 {
				n := zq.RxBurstZC(zbufs)
				for _, b := range zbufs[:n] {
					if len(b.Data) == 0 || len(b.Data) > 64 {
						t.Fatalf("zero-copy buffer of %d bytes", len(b.Data))
					}
				}
				zq.Release(zbufs[:n])
			}
			return
		}
		// The server's transmit path follows the buffers the client armed in the same memory.
		tq := &TxQueue{path: pickTxPath(false, false)}
		tq.queue = queue{ring: r, regions: q.regions, eventfd: -1, cursor: cursor, peer: r.Head(), own: r.Tail()}
		pkts := [][]byte{make([]byte, 60), make([]byte, 200), make([]byte, 1500)}
		for range 3 {
			if n := tq.TxBurst(pkts); n > len(pkts) {
				t.Fatalf("TxBurst took %d of %d", n, len(pkts))
			}
		}
	})
}

package memif_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// fill writes a payload that identifies its sequence number and every byte's position, so that a
// segment landing at the wrong offset (DPDK once wrote every segment of a chain at offset 0),
// reordering, loss or truncation all show up as a mismatch.
func fill(p []byte, seq uint32) {
	for i := range p {
		p[i] = byte(seq*131 + uint32(i)*7 + uint32(i)>>8)
	}
	if len(p) >= 4 {
		binary.LittleEndian.PutUint32(p, seq)
	}
}

func check(p []byte, seq uint32, size int) error {
	if len(p) != size {
		return fmt.Errorf("packet %d: %d bytes, want %d", seq, len(p), size)
	}
	for i, b := range p {
		want := byte(seq*131 + uint32(i)*7 + uint32(i)>>8)
		if i < 4 && size >= 4 { // fill writes the sequence number only where it fits
			want = byte(seq >> (8 * i))
		}
		if b != want {
			return fmt.Errorf("packet %d (%d bytes): byte %d = %#x, want %#x", seq, size, i, b, want)
		}
	}
	return nil
}

// pump sends count packets of sizes chosen by sizeOf through tx and receives them through rx,
// checking every byte; bursts of up to burst packets, both sides in their own goroutines.
func pump(t *testing.T, tx *memif.TxQueue, rx *memif.RxQueue, count, burst int, sizeOf func(uint32) int) {
	t.Helper()
	errc := make(chan error, 2)
	deadline := time.Now().Add(60 * time.Second)
	go func() {
		pkts := make([][]byte, burst)
		bufs := make([][]byte, burst)
		for i := range bufs {
			bufs[i] = make([]byte, 0, 16384)
		}
		for seq := uint32(0); seq < uint32(count); {
			n := min(burst, count-int(seq))
			for i := range n {
				p := bufs[i][:sizeOf(seq+uint32(i))]
				fill(p, seq+uint32(i))
				pkts[i] = p
			}
			sent := tx.TxBurst(pkts[:n])
			seq += uint32(sent)
			if sent == 0 {
				runtime.Gosched() // many pumps share two cores
			}
			if time.Now().After(deadline) {
				errc <- fmt.Errorf("tx stuck at packet %d", seq)
				return
			}
		}
		errc <- nil
	}()
	go func() {
		bufs := make([][]byte, burst)
		for i := range bufs {
			bufs[i] = make([]byte, 0, 16384)
		}
		for seq := uint32(0); seq < uint32(count); {
			n := rx.RxBurst(bufs)
			if n == 0 {
				runtime.Gosched()
			}
			for i := range n {
				if err := check(bufs[i], seq, sizeOf(seq)); err != nil {
					errc <- err
					return
				}
				seq++
			}
			if time.Now().After(deadline) {
				errc <- fmt.Errorf("rx stuck at packet %d", seq)
				return
			}
		}
		errc <- nil
	}()
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestTrafficMatrix moves verified traffic both ways, 60..9000-byte packets, with and without
// chaining, over 1 and 4 queues, through rings small enough to wrap hundreds of times.
func TestTrafficMatrix(t *testing.T) {
	// 5000 packets through a 64-slot ring: 78 wraps of the ring, 5000/65536 of the 16-bit index.
	const packetsPerQueue = 5000
	sizes := []int{60, 61, 64, 127, 128, 1500, 2047, 2048, 2049, 4095, 4096, 4097, 8999, 9000}
	for _, queues := range []int{1, 4} {
		for _, bufSize := range []int{2048, 9216} {
			name := fmt.Sprintf("queues=%d/buffer=%d", queues, bufSize)
			t.Run(name, func(t *testing.T) {
				cfg := memif.Config{RxQueues: queues, TxQueues: queues, RingSize: 64, BufferSize: bufSize}
				srv, cli := memiftest.Pair(t, cfg, cfg)
				if link, _ := cli.Link(); link.RxQueues != queues || link.TxQueues != queues {
					t.Fatalf("negotiated %+v", link)
				}
				var wg sync.WaitGroup
				for q := range queues {
					for dir, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
						wg.Add(1)
						go func() {
							defer wg.Done()
							t.Run(fmt.Sprintf("q%d/dir%d", q, dir), func(t *testing.T) {
								pump(t, ends[0].TxQueue(q), ends[1].RxQueue(q), packetsPerQueue, 32,
									func(seq uint32) int { return sizes[int(seq)%len(sizes)] })
							})
						}()
					}
				}
				wg.Wait()
				for q := range queues {
					for _, s := range []memif.Stats{cli.TxQueue(q).Stats(), srv.RxQueue(q).Stats(), srv.TxQueue(q).Stats(), cli.RxQueue(q).Stats()} {
						if s.Packets != packetsPerQueue || s.Drops != 0 || s.BadDescs != 0 {
							t.Errorf("queue %d stats %+v", q, s)
						}
					}
				}
			})
		}
	}
}

// TestChainSegmentsAppendedInOrder sends one packet per direction spread over three buffers with
// distinct contents: each segment must land after the previous one.
func TestChainSegmentsAppendedInOrder(t *testing.T) {
	cfg := memif.Config{BufferSize: 128, RingSize: 16}
	srv, cli := memiftest.Pair(t, cfg, cfg)
	pkt := append(append(bytes.Repeat([]byte{'A'}, 128), bytes.Repeat([]byte{'B'}, 128)...), bytes.Repeat([]byte{'C'}, 100)...)
	buf := [][]byte{make([]byte, 0, 1024)}
	for _, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
		if n := ends[0].TxQueue(0).TxBurst([][]byte{pkt}); n != 1 {
			t.Fatalf("TxBurst = %d", n)
		}
		if n := ends[1].RxQueue(0).RxBurst(buf); n != 1 || !bytes.Equal(buf[0], pkt) {
			t.Fatalf("RxBurst = %d, %d bytes, first bytes %q", n, len(buf[0]), buf[0][:min(8, len(buf[0]))])
		}
	}
}

func TestFullRingIsACount(t *testing.T) {
	cfg := memif.Config{RingSize: 8}
	srv, cli := memiftest.Pair(t, cfg, cfg)
	pkts := make([][]byte, 20)
	for i := range pkts {
		pkts[i] = make([]byte, 100)
		fill(pkts[i], uint32(i))
	}
	for _, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
		tx, rx := ends[0].TxQueue(0), ends[1].RxQueue(0)
		if n := tx.TxBurst(pkts); n != 8 {
			t.Fatalf("TxBurst into an 8-slot ring took %d", n)
		}
		if n := tx.TxBurst(pkts[8:]); n != 0 {
			t.Fatalf("TxBurst into a full ring took %d", n)
		}
		if s := tx.Stats(); s.NoBuf == 0 {
			t.Errorf("full ring not counted: %+v", s)
		}
		buf := make([][]byte, 32)
		for i := range buf {
			buf[i] = make([]byte, 0, 2048)
		}
		if n := rx.RxBurst(buf); n != 8 {
			t.Fatalf("RxBurst = %d", n)
		}
		for i := range 8 {
			if err := check(buf[i], uint32(i), 100); err != nil {
				t.Fatal(err)
			}
		}
		if n := tx.TxBurst(pkts[8:16]); n != 8 {
			t.Fatalf("after draining, TxBurst took %d", n)
		}
		rx.RxBurst(buf)
	}
}

func TestUnsendableAndTooLargeForCaller(t *testing.T) {
	cfg := memif.Config{RingSize: 4, BufferSize: 128}
	srv, cli := memiftest.Pair(t, cfg, cfg)
	tx, rx := cli.TxQueue(0), srv.RxQueue(0)
	empty := []byte{}
	huge := make([]byte, 5*128) // needs 5 slots of a 4-slot ring: can never be sent
	ok := make([]byte, 200)
	fill(ok, 7)
	if n := tx.TxBurst([][]byte{empty, huge, ok}); n != 3 {
		t.Fatalf("TxBurst = %d, want all 3 taken", n)
	}
	if s := tx.Stats(); s.Drops != 2 || s.Packets != 1 {
		t.Fatalf("tx stats %+v", s)
	}
	small := [][]byte{make([]byte, 0, 100)}
	if n := rx.RxBurst(small); n != 0 {
		t.Fatalf("a 200-byte packet fitted a 100-byte buffer")
	}
	if s := rx.Stats(); s.Drops != 1 {
		t.Fatalf("rx stats %+v", s)
	}
}

func TestSteadyStateNoAllocs(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{BufferSize: 2048})
	pkts := make([][]byte, 32)
	bufs := make([][]byte, 32)
	for i := range pkts {
		pkts[i] = make([]byte, 3000) // chained
		bufs[i] = make([]byte, 0, 4096)
	}
	for _, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
		tx, rx := ends[0].TxQueue(0), ends[1].RxQueue(0)
		allocs := testing.AllocsPerRun(200, func() {
			if tx.TxBurst(pkts) != 32 || rx.RxBurst(bufs) != 32 {
				t.Fatal("burst short")
			}
		})
		if allocs != 0 {
			t.Errorf("%v allocations per TxBurst+RxBurst", allocs)
		}
	}
}

// TestIndexWrap runs the free-running 16-bit ring indices past 65535 several times.
func TestIndexWrap(t *testing.T) {
	cfg := memif.Config{RingSize: 256}
	srv, cli := memiftest.Pair(t, cfg, cfg)
	for _, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
		pump(t, ends[0].TxQueue(0), ends[1].RxQueue(0), 3*65536+100, 64, func(uint32) int { return 60 })
	}
}

// TestLargestRing fills a 2^15-entry ring completely: head - tail == 32768 must read as full, not
// empty, in both directions.
func TestLargestRing(t *testing.T) {
	cfg := memif.Config{RingSize: 1 << 15, BufferSize: 64}
	srv, cli := memiftest.Pair(t, cfg, cfg)
	pkts := make([][]byte, 1<<15+1)
	for i := range pkts {
		pkts[i] = make([]byte, 60)
		fill(pkts[i], uint32(i))
	}
	bufs := make([][]byte, len(pkts))
	for i := range bufs {
		bufs[i] = make([]byte, 0, 64)
	}
	for _, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
		tx, rx := ends[0].TxQueue(0), ends[1].RxQueue(0)
		if n := tx.TxBurst(pkts); n != 1<<15 {
			t.Fatalf("TxBurst took %d of %d", n, len(pkts))
		}
		if n := rx.RxBurst(bufs); n != 1<<15 {
			t.Fatalf("RxBurst got %d", n)
		}
		for i := range 1 << 15 {
			if err := check(bufs[i], uint32(i), 60); err != nil {
				t.Fatal(err)
			}
		}
	}
}

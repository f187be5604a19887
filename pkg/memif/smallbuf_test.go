package memif_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// TestSmallBuffers: a client takes any buffer size the protocol allows, down to one byte (DPDK's
// bsize and libmemif's buffer_size go below 64 too), and the server follows it. Verified traffic
// crosses both ways with packets shorter than, as long as and longer than one buffer, through a
// copy-mode and a zero-copy client.
func TestSmallBuffers(t *testing.T) {
	const count, ringSize = 2000, 256
	for _, bufSize := range []int{1, 7, 32, 63} {
		// Every size fits the ring at least twice over, so a full burst always makes progress.
		var sizes []int
		for _, s := range []int{1, 2, bufSize - 1, bufSize, bufSize + 1, 2*bufSize + 3, 60, 64, 100} {
			if s >= 1 && s*2 <= ringSize*bufSize {
				sizes = append(sizes, s)
			}
		}
		for _, zc := range []bool{false, true} {
			name := fmt.Sprintf("buffer=%d", bufSize)
			if zc {
				name += "/zero-copy"
			}
			t.Run(name, func(t *testing.T) {
				srv, cli := memiftest.Pair(t, memif.Config{RingSize: ringSize},
					memif.Config{RingSize: ringSize, BufferSize: bufSize, ZeroCopy: zc})
				if got := cli.Config().BufferSize; got != bufSize {
					t.Fatalf("client buffer size %d, want %d", got, bufSize)
				}
				for _, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
					pump(t, ends[0].TxQueue(0), ends[1].RxQueue(0), count, 32,
						func(seq uint32) int { return sizes[int(seq)%len(sizes)] })
				}
				for _, s := range []memif.Stats{cli.TxQueue(0).Stats(), srv.RxQueue(0).Stats(), srv.TxQueue(0).Stats(), cli.RxQueue(0).Stats()} {
					if s.Packets != count || s.Drops != 0 || s.BadDescs != 0 {
						t.Errorf("stats %+v, want %d packets, no drops", s, count)
					}
				}
			})
		}
	}
}

// TestSmallBuffersZeroCopyAPI sends and receives chains of 32-byte pool buffers through the
// zero-copy calls themselves.
func TestSmallBuffersZeroCopyAPI(t *testing.T) {
	const bufSize = 32
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{ZeroCopy: true, RingSize: 64, BufferSize: bufSize})
	ctx, crx := cli.TxQueue(0), cli.RxQueue(0)
	bufs := make([]memif.Buffer, 16)
	got := [][]byte{make([]byte, 0, 1024)}
	for seq := range uint32(300) {
		size := []int{1, 31, 32, 33, 100, 200}[seq%6]
		want := make([]byte, size)
		fill(want, seq)
		nseg := (size + bufSize - 1) / bufSize
		if ctx.Alloc(bufs[:nseg]) != nseg {
			t.Fatalf("packet %d: pool empty", seq)
		}
		for k := range nseg {
			bufs[k].Data = bufs[k].Data[:copy(bufs[k].Data, want[k*bufSize:min(size, (k+1)*bufSize)])]
			bufs[k].More = k < nseg-1
		}
		if n := ctx.TxBurstZC(bufs[:nseg]); n != nseg {
			t.Fatalf("packet %d: TxBurstZC took %d of %d", seq, n, nseg)
		}
		if n := srv.RxQueue(0).RxBurst(got); n != 1 {
			t.Fatalf("packet %d: server got %d", seq, n)
		}
		if err := check(got[0], seq, size); err != nil {
			t.Fatal(err)
		}
		if n := srv.TxQueue(0).TxBurst([][]byte{want}); n != 1 {
			t.Fatalf("packet %d: server TxBurst = %d", seq, n)
		}
		n := crx.RxBurstZC(bufs)
		var joined []byte
		for k, b := range bufs[:n] {
			if b.More != (k < n-1) || len(b.Data) > bufSize {
				t.Fatalf("packet %d: segment %d of %d: %d bytes, More=%v", seq, k, n, len(b.Data), b.More)
			}
			joined = append(joined, b.Data...)
		}
		if n != nseg {
			t.Fatalf("packet %d: RxBurstZC = %d buffers, want %d", seq, n, nseg)
		}
		if err := check(joined, seq, size); err != nil {
			t.Fatal(err)
		}
		crx.Release(bufs[:n])
	}
}

// TestBufferSizeBounds: 0 means the default, anything from 1 byte to MaxBufferSize is taken, and
// the error for the rest says the range.
func TestBufferSizeBounds(t *testing.T) {
	for _, c := range []struct {
		size int
		ok   bool
	}{{0, true}, {1, true}, {63, true}, {memif.MaxBufferSize, true}, {-1, false}, {memif.MaxBufferSize + 1, false}} {
		i, err := memif.Open(memif.Config{Role: memif.RoleServer, Socket: memiftest.UniqueSocket(), BufferSize: c.size,
			Logger: memiftest.QuietLogger()})
		if err == nil {
			i.Close()
		}
		if want := fmt.Sprintf("must be %d..%d", memif.MinBufferSize, memif.MaxBufferSize); c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("buffer size %d: %v, want ok=%v (or an error saying %q)", c.size, err, c.ok, want)
		}
		if c.size == 0 {
			continue // a pool has no default
		}
		p, err := memif.NewPool(memif.PoolConfig{Name: "bounds", Pairs: 1, Buffers: 1, BufferSize: c.size})
		if err == nil {
			p.Close()
		}
		if c.ok != (err == nil) {
			t.Errorf("pool buffer size %d: %v, want ok=%v", c.size, err, c.ok)
		}
	}
}

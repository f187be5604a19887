package memif_test

import (
	"testing"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/internal/ring"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/socket"
	"golang.org/x/sys/unix"
)

// TestLibmemifLayout: libmemif clients put the rings alone in region 0 and the buffers in region
// 1 (zero-copy peers add a region per buffer pool). The server must follow whatever region and
// offset each descriptor names, both ways.
func TestLibmemifLayout(t *testing.T) {
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	p := dialRaw(t, addr)
	p.init(0)
	rs := ring.Size(rawLog2, 64)
	rings, err := alloc.NewRegion("rings", 2*rs, alloc.BackingMemfd)
	if err != nil {
		t.Fatal(err)
	}
	defer rings.Close()
	bufs, err := alloc.NewRegion("bufs", 2*(1<<rawLog2)*rawBufSize, alloc.BackingMemfd)
	if err != nil {
		t.Fatal(err)
	}
	defer bufs.Close()
	var r [2]ring.Ring
	for k := range 2 {
		r[k], _ = ring.New(rings.Mem[k*rs:], rawLog2, 64)
		r[k].SetCookie(ring.Cookie)
		efd, _ := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		p.efds = append(p.efds, efd)
	}
	p.send(socket.AddRegion{Index: 0, Size: uint64(len(rings.Mem))}, rings.Fd)
	p.expect(socket.TypeAck)
	p.send(socket.AddRegion{Index: 1, Size: uint64(len(bufs.Mem))}, bufs.Fd)
	p.expect(socket.TypeAck)
	p.addRings()
	p.connectAs("libmemif-like")
	if err := waitUp(t, srv); err != nil {
		t.Fatal(err)
	}
	if link, _ := srv.Link(); link.Regions != 2 {
		t.Fatalf("link %+v", link)
	}
	// Client -> server: a two-segment chain in region 1, at offsets with headroom.
	copy(bufs.Mem[64:], "hello, ")
	copy(bufs.Mem[rawBufSize+128:], "libmemif")
	r[0].Descs[0] = ring.Desc{Flags: ring.DescFlagNext, Region: 1, Offset: 64, Length: 7}
	r[0].Descs[1] = ring.Desc{Region: 1, Offset: rawBufSize + 128, Length: 8}
	r[0].StoreHead(2)
	got := [][]byte{make([]byte, 0, 64)}
	if n := srv.RxQueue(0).RxBurst(got); n != 1 || string(got[0]) != "hello, libmemif" {
		t.Fatalf("RxBurst = %d %q", n, got[0])
	}
	// Server -> client: into buffers the client armed in region 1.
	base := uint32((1 << rawLog2) * rawBufSize)
	for s := range r[1].Descs {
		r[1].Descs[s] = ring.Desc{Region: 1, Offset: base + uint32(s)*rawBufSize, Length: rawBufSize}
	}
	r[1].StoreHead(1 << rawLog2)
	if n := srv.TxQueue(0).TxBurst([][]byte{[]byte("back to region 1")}); n != 1 {
		t.Fatalf("TxBurst = %d", n)
	}
	d := r[1].Descs[0]
	if r[1].LoadTail() != 1 || d.Region != 1 || string(bufs.Mem[d.Offset:d.Offset+d.Length]) != "back to region 1" {
		t.Fatalf("tail %d desc %+v", r[1].LoadTail(), d)
	}
}

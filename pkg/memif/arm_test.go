package memif_test

import (
	"testing"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
	"github.com/memifnet/memifnet/pkg/socket"
)

// TestClientArmsBeforeConnect: a server's link is up once it has the client's CONNECT, and it may
// send at once, before the client has even read CONNECTED. A copy-mode client's receive ring is
// therefore armed before CONNECT goes out, and packets that arrive in that window are delivered
// intact once the client's link is up. (Arming only at CONNECTED, the client once made a
// forwarder in front of it drop a whole window into a ring with no slot armed:
// TestChainOfTwoGoForwarders under load, docs/performance.md.)
func TestClientArmsBeforeConnect(t *testing.T) {
	addr := memiftest.UniqueSocket()
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, RingSize: 16, BufferSize: 256})
	p, reg, rings := rawServerUntilConnect(t, ln)
	m2s := &rings[1]
	if h := m2s.LoadHead(); h != 16 {
		t.Fatalf("at CONNECT the client has armed %d of 16 receive slots", h)
	}
	// Send before answering CONNECT, as a server whose link just came up may.
	want := []string{"a", "bb", "ccc"}
	for i, s := range want {
		d := &m2s.Descs[i]
		copy(reg.Mem[d.Offset:d.Offset+d.Length], s)
		d.Length = uint32(len(s))
	}
	m2s.StoreTail(uint16(len(want)))
	p.send(socket.Connected{Name: "raw"}, -1)
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	bufs := [][]byte{make([]byte, 0, 256), make([]byte, 0, 256), make([]byte, 0, 256), make([]byte, 0, 256)}
	n := cli.RxQueue(0).RxBurst(bufs)
	if n != len(want) {
		t.Fatalf("received %d packets, want %d", n, len(want))
	}
	for i, s := range want {
		if string(bufs[i]) != s {
			t.Errorf("packet %d = %q, want %q", i, bufs[i], s)
		}
	}
	if h := m2s.LoadHead(); h != 16 {
		t.Errorf("head %d after the first burst, want 16 (3 slots free: below the refill batch)", h)
	}
}

// TestZeroCopyClientArmsBeforeConnect: the same window for a zero-copy client, whose receive ring
// is armed with pool buffers (region 1) before CONNECT goes out. The packets the server sends
// before CONNECTED arrive intact, the ring stays armed with pool buffers, and a lost handshake
// gives the armed buffers back to the pool (the next connection arms the whole ring again).
func TestZeroCopyClientArmsBeforeConnect(t *testing.T) {
	addr := memiftest.UniqueSocket()
	ln, err := socket.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// 32 pool buffers for one queue pair: two armed rings of 16 would leave none if the first
	// connection's buffers were lost.
	pool, err := memif.NewPool(memif.PoolConfig{Pairs: 1, Buffers: 32, BufferSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cli := open(t, memif.Config{Role: memif.RoleClient, Socket: addr, RingSize: 16, BufferSize: 256, ZeroCopy: true, Pool: pool})

	// A server that goes away instead of answering CONNECT: the buffers armed for it must come back.
	p, _, rings := rawServerRegionsUntilConnect(t, ln)
	if h := rings[1].LoadHead(); h != 16 {
		t.Fatalf("at the first CONNECT the client has armed %d of 16 receive slots", h)
	}
	p.close()

	p, regs, rings := rawServerRegionsUntilConnect(t, ln)
	m2s := &rings[1]
	if h := m2s.LoadHead(); h != 16 {
		t.Fatalf("at CONNECT after a lost handshake the client has armed %d of 16 receive slots", h)
	}
	want := []string{"a", "bb", "ccc"}
	for i, s := range want {
		d := &m2s.Descs[i]
		if d.Region != 1 {
			t.Fatalf("slot %d armed in region %d, want the pool", i, d.Region)
		}
		copy(regs[1].Mem[d.Offset:d.Offset+d.Length], s)
		d.Length = uint32(len(s))
	}
	m2s.StoreTail(uint16(len(want)))
	p.send(socket.Connected{Name: "raw"}, -1)
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	bufs := make([]memif.Buffer, 4)
	n := cli.RxQueue(0).RxBurstZC(bufs)
	if n != len(want) {
		t.Fatalf("received %d packets, want %d", n, len(want))
	}
	for i, s := range want {
		if string(bufs[i].Data) != s {
			t.Errorf("packet %d = %q, want %q", i, bufs[i].Data, s)
		}
	}
	cli.RxQueue(0).Release(bufs[:n])
	if h := m2s.LoadHead(); h != 16+uint16(n) {
		t.Errorf("head %d after the first burst, want %d (re-armed from the pool)", h, 16+n)
	}
}

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

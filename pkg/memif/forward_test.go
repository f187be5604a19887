package memif_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// fwdSide is how the forwarder's interface on one side is opened: as a copy-mode client, a
// zero-copy client (own pool, or the pool shared by both sides) or a server.
type fwdSide string

const (
	sideClient fwdSide = "client"
	sideZC     fwdSide = "zero-copy"
	sideShared fwdSide = "shared-pool"
	sideServer fwdSide = "server"
)

// fwdLink is one side of a forwarder: its interface and the peer on the other end.
type fwdLink struct {
	fwd, peer *memif.Interface
}

// openSide connects the forwarder's interface of kind k to a peer of the opposite role.
func openSide(tb testing.TB, k fwdSide, ringSize, bufSize int, pool *memif.Pool) fwdLink {
	tb.Helper()
	switch k {
	case sideServer:
		srv, cli := memiftest.Pair(tb, memif.Config{RingSize: ringSize}, memif.Config{RingSize: ringSize, BufferSize: bufSize})
		return fwdLink{fwd: srv, peer: cli}
	case sideClient, sideZC, sideShared:
		cfg := memif.Config{RingSize: ringSize, BufferSize: bufSize, ZeroCopy: k != sideClient}
		if k == sideShared {
			cfg.Pool = pool
		}
		srv, cli := memiftest.Pair(tb, memif.Config{RingSize: ringSize}, cfg)
		return fwdLink{fwd: cli, peer: srv}
	}
	tb.Fatalf("side %q", k)
	return fwdLink{}
}

// forwarder builds the two sides of a forwarder; a shared pool is closed after both.
func forwarder(tb testing.TB, in, out fwdSide, ringSize, bufSize int) (a, b fwdLink) {
	tb.Helper()
	var pool *memif.Pool
	if in == sideShared || out == sideShared {
		var err error
		pool, err = memif.NewPool(memif.PoolConfig{Name: "fwd", Pairs: 1, Buffers: 5 * ringSize, BufferSize: bufSize,
			PeersTrustEachOther: true}) // both peers are the test's
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			if err := pool.Close(); err != nil { // after both interfaces (cleanups run last-in first-out)
				tb.Error(err)
			}
		})
	}
	return openSide(tb, in, ringSize, bufSize, pool), openSide(tb, out, ringSize, bufSize, pool)
}

var fwdCombos = [][2]fwdSide{
	{sideClient, sideClient}, {sideClient, sideServer}, {sideServer, sideClient}, {sideServer, sideServer},
	{sideZC, sideClient}, {sideServer, sideZC}, {sideZC, sideZC}, {sideShared, sideShared},
}

// TestForward sends numbered packets of mixed sizes, chains among them, into the forwarder's
// receiving interface, forwards them with Forward and checks every byte and the order at the
// other interface's peer, for every kind of interface on either side. The sender sends bursts of
// 32 against a ring of 64 and the forwarder moves at most 20 per call, so B's ring fills and
// Forward has to hold packets back; none may be lost.
func TestForward(t *testing.T) {
	for _, c := range fwdCombos {
		t.Run(fmt.Sprintf("%s-to-%s", c[0], c[1]), func(t *testing.T) {
			a, b := forwarder(t, c[0], c[1], 64, 256)
			gen, in := a.peer.TxQueue(0), a.fwd.RxQueue(0)
			out, sink := b.fwd.TxQueue(0), b.peer.RxQueue(0)
			sizes := []int{60, 256, 300, 1, 700, 64, 1500}
			sizeOf := func(seq uint32) int { return sizes[seq%uint32(len(sizes))] }
			const total = 6000
			pkts := make([][]byte, 32)
			got := make([][]byte, 8)
			for i := range got {
				got[i] = make([]byte, 0, 2048)
			}
			var sent, forwarded, received uint32
			for round := 0; received < total; round++ {
				if round > 100*total {
					t.Fatalf("stuck: sent %d, forwarded %d, received %d", sent, forwarded, received)
				}
				n := 0
				for ; n < len(pkts) && sent+uint32(n) < total; n++ {
					p := make([]byte, sizeOf(sent+uint32(n)))
					fill(p, sent+uint32(n))
					pkts[n] = p
				}
				sent += uint32(gen.TxBurst(pkts[:n]))
				forwarded += uint32(in.Forward(out, 20))
				// The sink reads less than the forwarder sends: 4 packets every fourth round.
				if round%4 == 0 {
					k := sink.RxBurst(got[:4])
					for _, p := range got[:k] {
						if err := check(p, received, sizeOf(received)); err != nil {
							t.Fatal(err)
						}
						received++
					}
				}
			}
			if forwarded != total || sent != total {
				t.Errorf("sent %d, forwarded %d, received %d of %d", sent, forwarded, received, total)
			}
			if s := out.Stats(); s.Drops != 0 || s.Packets != total || s.NoBuf == 0 {
				t.Errorf("tx stats %+v, want %d packets, no drops, and a full ring (NoBuf) that made Forward hold back", s, total)
			}
			if s := in.Stats(); s.Drops != 0 || s.BadDescs != 0 || s.Packets != total {
				t.Errorf("rx stats %+v, want %d packets", s, total)
			}
		})
	}
}

// TestForwardDrop: with testpmd's io policy, what the full transmit ring cannot take is dropped and
// counted, and the packets that did get through are intact and in order.
func TestForwardDrop(t *testing.T) {
	for _, c := range [][2]fwdSide{{sideServer, sideClient}, {sideShared, sideShared}} {
		t.Run(fmt.Sprintf("%s-to-%s", c[0], c[1]), func(t *testing.T) {
			a, b := forwarder(t, c[0], c[1], 64, 2048)
			gen, in := a.peer.TxQueue(0), a.fwd.RxQueue(0)
			out, sink := b.fwd.TxQueue(0), b.peer.RxQueue(0)
			pkts := make([][]byte, 48)
			for i := range pkts {
				pkts[i] = make([]byte, 100)
				fill(pkts[i], uint32(i))
			}
			// 96 packets against B's ring of 64: the last 32 find it full.
			var fwd, dropped int
			for k := range 2 {
				if n := gen.TxBurst(pkts); n != len(pkts) {
					t.Fatalf("burst %d: sent %d of %d", k, n, len(pkts))
				}
				f, d := in.ForwardDrop(out, 64)
				fwd, dropped = fwd+f, dropped+d
			}
			if fwd != 64 || dropped != 32 {
				t.Fatalf("forwarded %d, dropped %d; want 64 and 32", fwd, dropped)
			}
			if s := out.Stats(); s.Drops != 32 || s.Packets != 64 {
				t.Errorf("tx stats %+v: want 64 packets and 32 drops", s)
			}
			if s := in.Stats(); s.Packets != 96 {
				t.Errorf("rx stats %+v: want 96 packets received", s)
			}
			got := make([][]byte, 64)
			for i := range got {
				got[i] = make([]byte, 0, 2048)
			}
			if n := sink.RxBurst(got); n != 64 {
				t.Fatalf("sink got %d, want 64", n)
			}
			for i, p := range got {
				if err := check(p, uint32(i%48), 100); err != nil {
					t.Fatal(err)
				}
			}
			if f, d := in.ForwardDrop(out, 64); f != 0 || d != 0 {
				t.Errorf("empty ring: forwarded %d, dropped %d", f, d)
			}
		})
	}
}

// A forwarder whose other side is down moves nothing and loses nothing: the packets wait in the
// receive ring until it is back.
func TestForwardOtherSideDown(t *testing.T) {
	a, b := forwarder(t, sideServer, sideClient, 64, 2048)
	pkts := [][]byte{make([]byte, 64)}
	fill(pkts[0], 7)
	if a.peer.TxQueue(0).TxBurst(pkts) != 1 {
		t.Fatal("not sent")
	}
	b.peer.Close()
	waitFor(t, b.fwd, "forwarder's link to b down", func() bool { return !b.fwd.TxQueue(0).Up() })
	if n := a.fwd.RxQueue(0).Forward(b.fwd.TxQueue(0), 32); n != 0 {
		t.Fatalf("forwarded %d to a queue that is down", n)
	}
	got := [][]byte{make([]byte, 0, 2048)}
	if n := a.fwd.RxQueue(0).RxBurst(got); n != 1 || check(got[0], 7, 64) != nil {
		t.Fatalf("the held packet: %d received", n)
	}
}

// TestForwardNoAllocs: forwarding allocates nothing per packet, copying or not.
func TestForwardNoAllocs(t *testing.T) {
	for _, c := range [][2]fwdSide{{sideServer, sideClient}, {sideClient, sideServer}, {sideShared, sideShared}} {
		t.Run(fmt.Sprintf("%s-to-%s", c[0], c[1]), func(t *testing.T) {
			a, b := forwarder(t, c[0], c[1], 1024, 2048)
			gen, in := a.peer.TxQueue(0), a.fwd.RxQueue(0)
			out, sink := b.fwd.TxQueue(0), b.peer.RxQueue(0)
			pkts := make([][]byte, 32)
			got := make([][]byte, 32)
			for i := range pkts {
				pkts[i] = make([]byte, 64)
				got[i] = make([]byte, 0, 2048)
			}
			moved := 0
			allocs := testing.AllocsPerRun(500, func() {
				gen.TxBurst(pkts)
				moved += in.Forward(out, 32)
				sink.RxBurst(got)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per burst of 32", allocs)
			}
			if moved != 501*32 {
				t.Errorf("forwarded %d packets in 501 bursts of 32", moved)
			}
		})
	}
}

// TestForwardSurvivesRegionCut: a hostile client cuts its region short under a forwarding server.
// Forward in either direction faults inside that region: the process survives, the hostile link
// goes down with a FaultError, and the other interface, whose queue Forward held too, goes on
// working.
func TestForwardSurvivesRegionCut(t *testing.T) {
	for _, fromHostile := range []bool{true, false} {
		t.Run(fmt.Sprintf("from-hostile=%v", fromHostile), func(t *testing.T) {
			addr := memiftest.UniqueSocket()
			srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr, ID: 7})
			p := dialRaw(t, addr)
			p.init(7)
			p.makeUnsealedMemory()
			p.handshake()
			if err := waitUp(t, srv); err != nil {
				t.Fatal(err)
			}
			other := openSide(t, sideServer, 64, 2048, nil)
			p.sendRaw(0, []byte("before the cut"))
			if !fromHostile {
				other.peer.TxQueue(0).TxBurst([][]byte{[]byte("towards the cut")})
			}
			if err := unix.Ftruncate(p.region.Fd, 0); err != nil {
				t.Fatal(err)
			}
			var n int
			if fromHostile {
				n = srv.RxQueue(0).Forward(other.fwd.TxQueue(0), 32)
			} else {
				n = other.fwd.RxQueue(0).Forward(srv.TxQueue(0), 32)
			}
			if n != 0 {
				t.Fatalf("Forward over a cut region = %d", n)
			}
			p.expectRefusal("the peer cut the region short")
			p.region.Mem = nil
			p.close()
			var fe *memif.FaultError
			for deadline := time.Now().Add(5 * time.Second); !errors.As(srv.Err(), &fe); {
				if time.Now().After(deadline) {
					t.Fatalf("server Err = %v, want a FaultError", srv.Err())
				}
				time.Sleep(time.Millisecond) // polling Err: the disconnect runs on the control goroutine
			}
			// The other interface's queues were released: they still work.
			if k := other.fwd.TxQueue(0).TxBurst([][]byte{[]byte("after")}); k != 1 {
				t.Fatalf("other interface: TxBurst = %d after the fault", k)
			}
			got := make([][]byte, 4)
			for i := range got {
				got[i] = make([]byte, 0, 2048)
			}
			k := other.peer.RxQueue(0).RxBurst(got)
			if k == 0 || string(got[k-1]) != "after" {
				t.Fatalf("other interface's peer got %d packets, last %q", k, got[max(k-1, 0)])
			}
			if !fromHostile {
				if k := other.fwd.RxQueue(0).RxBurst(got); k != 1 || string(got[0]) != "towards the cut" {
					t.Fatalf("the packet Forward could not deliver: %d %q", k, got[0])
				}
			}
		})
	}
}

// TestSharedPoolReconnectWhileForwarding: interface A of a shared pool disconnects and reconnects
// over and over while another goroutine forwards on interface B of the same pool. A's control
// goroutine must not touch the share's free list, which B's goroutine owns (run with -race; a
// double return panics in the free list). Traffic on B goes on, payloads intact, and once all is
// quiet the pool is whole.
func TestSharedPoolReconnectWhileForwarding(t *testing.T) {
	const ringSize = 64
	pool, err := memif.NewPool(memif.PoolConfig{Name: "fwd", Pairs: 1, Buffers: 5 * ringSize, BufferSize: 2048, PeersTrustEachOther: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	})
	cfg := memif.Config{ZeroCopy: true, RingSize: ringSize, Pool: pool}
	addrA := memiftest.UniqueSocket()
	srvA := open(t, memif.Config{Role: memif.RoleServer, Socket: addrA})
	cliA := open(t, memif.Config{Role: memif.RoleClient, Socket: addrA, ZeroCopy: true, RingSize: ringSize, Pool: pool, ReconnectInterval: 10 * time.Millisecond})
	srvB, cliB := memiftest.Pair(t, memif.Config{}, cfg)
	if err := waitUp(t, cliA); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { // owns queue pair 0 of both A and B: B's traffic loops through B's own rings
		pkts, got := [][]byte{make([]byte, 200)}, [][]byte{make([]byte, 0, 2048)}
		seq := uint32(0)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			fill(pkts[0], seq)
			if srvB.TxQueue(0).TxBurst(pkts) != 1 {
				continue
			}
			for cliB.RxQueue(0).Forward(cliB.TxQueue(0), 32) == 0 {
			}
			for srvB.RxQueue(0).RxBurst(got) == 0 {
			}
			if err := check(got[0], seq, 200); err != nil {
				done <- err
				return
			}
			seq++
			cliA.RxQueue(0).Forward(cliB.TxQueue(0), 32) // A's queue pair is this goroutine's too
		}
	}()
	for range 10 {
		srvA.Close()
		waitFor(t, cliA, "client down", func() bool { return !cliA.Up() })
		srvA = open(t, memif.Config{Role: memif.RoleServer, Socket: addrA})
		if err := waitUp(t, cliA); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Quiet now: A's ring armed, B's rings armed and drained; the rest of the pool is free.
	cliB.TxQueue(0).TxBurstZC(nil)
	if free, want := pool.BuffersFree(0), 5*ringSize-2*ringSize; free != want {
		t.Errorf("%d buffers free, want %d (two receive rings armed)", free, want)
	}
}

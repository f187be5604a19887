package memif_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

var zcClient = memif.Config{ZeroCopy: true, RingSize: 64, BufferSize: 256}

// TestZeroCopyBothWays: a zero-copy client sends pool buffers and receives views of shared memory,
// single and chained, many times round the ring; a copying server checks and answers. Every
// buffer comes back to the pool.
func TestZeroCopyBothWays(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, zcClient)
	if link, _ := cli.Link(); link.Regions != 2 {
		t.Fatalf("zero-copy link %+v: want rings and pool as two regions", link)
	}
	ctx, ctr := cli.TxQueue(0), cli.RxQueue(0)
	full := ctx.BuffersFree()
	bufs := make([]memif.Buffer, 8)
	got := [][]byte{make([]byte, 0, 4096)}
	for seq := range uint32(500) {
		size := []int{60, 256, 300, 700}[seq%4] // 300 and 700 bytes are chains of 256-byte buffers
		// Client -> server without a copy: fill pool buffers in place.
		want := make([]byte, size)
		fill(want, seq)
		nseg := (size + 255) / 256
		if ctx.Alloc(bufs[:nseg]) != nseg {
			t.Fatalf("packet %d: pool empty (%d free)", seq, ctx.BuffersFree())
		}
		for k := range nseg {
			seg := want[k*256 : min(size, (k+1)*256)]
			bufs[k].Data = bufs[k].Data[:copy(bufs[k].Data, seg)]
			bufs[k].More = k < nseg-1
		}
		if n := ctx.TxBurstZC(bufs[:nseg]); n != nseg {
			t.Fatalf("TxBurstZC = %d of %d", n, nseg)
		}
		if n := srv.RxQueue(0).RxBurst(got); n != 1 {
			t.Fatalf("packet %d: server got %d", seq, n)
		}
		if err := check(got[0], seq, size); err != nil {
			t.Fatal(err)
		}
		// Server -> client: the client sees views of its own pool.
		if n := srv.TxQueue(0).TxBurst([][]byte{want}); n != 1 {
			t.Fatalf("server TxBurst = %d", n)
		}
		n := ctr.RxBurstZC(bufs)
		if n != nseg {
			t.Fatalf("packet %d: RxBurstZC = %d buffers, want %d", seq, n, nseg)
		}
		var joined []byte
		for k, b := range bufs[:n] {
			if b.More != (k < n-1) {
				t.Fatalf("segment %d More=%v", k, b.More)
			}
			joined = append(joined, b.Data...)
		}
		if err := check(joined, seq, size); err != nil {
			t.Fatal(err)
		}
		ctr.Release(bufs[:n])
	}
	// Everything sent has been released by the peer by now; one more send reclaims it, and the
	// pool is back where it started (the receive ring keeps its armed buffers throughout).
	ctx.TxBurstZC(nil)
	if free := ctx.BuffersFree(); free != full {
		t.Fatalf("%d buffers free at the end, %d at the start: leak", free, full)
	}
}

// TestZeroCopyRecycle is an echo through a zero-copy client: every buffer received is sent back
// as it is (Tx-to-Rx recycling: no copy, no pool round trip needed), and the server checks the
// echo byte for byte.
func TestZeroCopyRecycle(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, zcClient)
	stx, srx := srv.TxQueue(0), srv.RxQueue(0)
	ctx, ctr := cli.TxQueue(0), cli.RxQueue(0)
	bufs := make([]memif.Buffer, 32)
	got := make([][]byte, 32)
	for i := range got {
		got[i] = make([]byte, 0, 256)
	}
	const total = 20000
	sent, echoed := uint32(0), uint32(0)
	deadline := time.Now().Add(30 * time.Second)
	for echoed < total {
		if time.Now().After(deadline) {
			t.Fatalf("stuck: sent %d echoed %d", sent, echoed)
		}
		if sent < total && sent-echoed < 48 {
			p := make([]byte, 100)
			fill(p, sent)
			sent += uint32(stx.TxBurst([][]byte{p}))
		}
		if n := ctr.RxBurstZC(bufs); n > 0 {
			for k := 0; k < n; {
				k += ctx.TxBurstZC(bufs[k:n]) // the same buffers go straight back out
			}
		}
		n := srx.RxBurst(got)
		for _, p := range got[:n] {
			if err := check(p, echoed, 100); err != nil {
				t.Fatal(err)
			}
			echoed++
		}
	}
	if st := ctx.Stats(); st.Packets != total || st.Drops != 0 || st.BadDescs != 0 {
		t.Fatalf("client tx stats %+v", st)
	}
}

// TestZeroCopyCopyAPI runs the copying burst API over a zero-copy client: the traffic matrix's
// pump, both ways, chained sizes included.
func TestZeroCopyCopyAPI(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{ZeroCopy: true, RingSize: 64, BufferSize: 2048})
	sizes := []int{60, 1500, 2048, 2049, 9000}
	for dir, ends := range [][2]*memif.Interface{{cli, srv}, {srv, cli}} {
		t.Run(fmt.Sprint(dir), func(t *testing.T) {
			pump(t, ends[0].TxQueue(0), ends[1].RxQueue(0), 3000, 32, func(s uint32) int { return sizes[int(s)%len(sizes)] })
		})
	}
}

// TestZeroCopyHeldBuffersSurviveReconnect: views the application holds stay readable across a
// disconnect, and the pool is whole again once they are released.
func TestZeroCopyHeldBuffersSurviveReconnect(t *testing.T) {
	addr := memiftest.UniqueSocket()
	srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	cfg := zcClient
	cfg.Role, cfg.Socket, cfg.ReconnectInterval = memif.RoleClient, addr, 20*time.Millisecond
	cli := open(t, cfg)
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	rx := cli.RxQueue(0)
	full := rx.BuffersFree() + 64 // one ring is armed
	srv.TxQueue(0).TxBurst([][]byte{[]byte("keep me")})
	bufs := make([]memif.Buffer, 4)
	if n := rx.RxBurstZC(bufs); n != 1 {
		t.Fatalf("RxBurstZC = %d", n)
	}
	srv.Close() // the link goes down while the application holds the buffer
	waitFor(t, cli, "client down", func() bool { return !cli.Up() })
	if string(bufs[0].Data) != "keep me" {
		t.Fatalf("held buffer reads %q after disconnect", bufs[0].Data)
	}
	rx.Release(bufs[:1])
	if free := rx.BuffersFree(); free != full {
		t.Fatalf("%d buffers free after disconnect and release, want all %d", free, full)
	}
	srv2 := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
	if err := waitUp(t, cli); err != nil {
		t.Fatal(err)
	}
	if err := waitUp(t, srv2); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv2, cli)
}

func TestZeroCopyNoAllocs(t *testing.T) {
	srv, cli := memiftest.Pair(t, memif.Config{}, memif.Config{ZeroCopy: true})
	bufs := make([]memif.Buffer, 32)
	got := make([][]byte, 32)
	for i := range got {
		got[i] = make([]byte, 0, 2048)
	}
	ctx, ctr := cli.TxQueue(0), cli.RxQueue(0)
	allocs := testing.AllocsPerRun(200, func() {
		n := ctx.Alloc(bufs)
		for k := range bufs[:n] {
			bufs[k].Data = bufs[k].Data[:64]
		}
		ctx.TxBurstZC(bufs[:n])
		srv.RxQueue(0).RxBurst(got)
		srv.TxQueue(0).TxBurst(got[:n])
		ctr.Release(bufs[:ctr.RxBurstZC(bufs)])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per zero-copy round trip", allocs)
	}
}

// TestSharedPoolForward forwards from one interface to another through a shared pool: the
// buffers received on A are sent on B without a copy and come back to the pool share A re-arms
// from. Payloads are checked at B's server, single and chained; every buffer comes home.
func TestSharedPoolForward(t *testing.T) {
	pool, err := memif.NewPool(memif.PoolConfig{Name: "fwd", Pairs: 1, Buffers: 5 * 64, BufferSize: 256, PeersTrustEachOther: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil { // after both clients closed (cleanups run last-in first-out)
			t.Error(err)
		}
	})
	cfg := memif.Config{ZeroCopy: true, RingSize: 64, Pool: pool}
	srvA, cliA := memiftest.Pair(t, memif.Config{}, cfg)
	srvB, cliB := memiftest.Pair(t, memif.Config{}, cfg)
	if err := pool.Close(); err == nil {
		t.Fatal("closed a pool two open interfaces use")
	}
	full := pool.BuffersFree(0)
	in, out := cliA.RxQueue(0), cliB.TxQueue(0)
	bufs := make([]memif.Buffer, 32)
	got := [][]byte{make([]byte, 0, 1024)}
	const total = 5000
	for seq := uint32(0); seq < total; seq++ {
		size := []int{60, 256, 300, 700}[seq%4]
		p := make([]byte, size)
		fill(p, seq)
		if srvA.TxQueue(0).TxBurst([][]byte{p}) != 1 {
			t.Fatalf("packet %d: A's server could not send", seq)
		}
		n := in.RxBurstZC(bufs)
		if want := (size + 255) / 256; n != want {
			t.Fatalf("packet %d: %d buffers, want %d", seq, n, want)
		}
		if k := out.TxBurstZC(bufs[:n]); k != n {
			t.Fatalf("packet %d: forwarded %d of %d buffers", seq, k, n)
		}
		if srvB.RxQueue(0).RxBurst(got) != 1 {
			t.Fatalf("packet %d: B's server got nothing", seq)
		}
		if err := check(got[0], seq, size); err != nil {
			t.Fatal(err)
		}
	}
	// B's ring still holds the last sends until the next reclaim; an empty burst reclaims.
	out.TxBurstZC(nil)
	if free := pool.BuffersFree(0); free != full {
		t.Fatalf("%d buffers free after forwarding, %d before", free, full)
	}
}

// TestForeignBufferPanics: buffers received on A, which has a pool of its own, given to B's
// TxBurstZC or Release (B on another pool) panic with the reason and leave both queues as they
// were: B still sends, A takes its buffers back, and every buffer of either pool comes home. They
// used to be taken as B's buffers of the same index: B's peer got one of B's buffers, B's free
// list a buffer twice, and A's pool lost them.
func TestForeignBufferPanics(t *testing.T) {
	cfg := memif.Config{ZeroCopy: true, RingSize: 16, BufferSize: 256}
	srvA, cliA := memiftest.Pair(t, memif.Config{}, cfg)
	srvB, cliB := memiftest.Pair(t, memif.Config{}, cfg)
	in, out, release := cliA.RxQueue(0), cliB.TxQueue(0), cliB.RxQueue(0)
	freeA, freeB := in.BuffersFree(), out.BuffersFree()
	if srvA.TxQueue(0).TxBurst([][]byte{[]byte("for A")}) != 1 {
		t.Fatal("A's server could not send")
	}
	bufs := make([]memif.Buffer, 4)
	n := in.RxBurstZC(bufs)
	if n != 1 {
		t.Fatalf("A received %d buffers", n)
	}
	for name, misuse := range map[string]func(){
		"TxBurstZC": func() { out.TxBurstZC(bufs[:n]) },
		"Release":   func() { release.Release(bufs[:n]) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "goes back only to the queue pair it came from") {
					t.Errorf("%s of A's buffer on B: recovered %v, want the foreign-buffer panic", name, r)
				}
			}()
			misuse()
		}()
	}
	if out.TxBurst([][]byte{[]byte("from B")}) != 1 {
		t.Fatal("B cannot send after the refused burst")
	}
	got := [][]byte{make([]byte, 0, 256)}
	if srvB.RxQueue(0).RxBurst(got) != 1 || string(got[0]) != "from B" {
		t.Fatalf("B's server got %q", got[0])
	}
	in.Release(bufs[:n])
	out.TxBurstZC(nil) // reclaims what B's server released
	if a, b := in.BuffersFree(), out.BuffersFree(); a != freeA || b != freeB {
		t.Fatalf("buffers free: A %d (was %d), B %d (was %d)", a, freeA, b, freeB)
	}
}

func TestPoolConfigErrors(t *testing.T) {
	pool, err := memif.NewPool(memif.PoolConfig{Name: "p", Pairs: 1, Buffers: 64, BufferSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for name, cfg := range map[string]memif.Config{
		"server":      {Role: memif.RoleServer, ZeroCopy: true, Pool: pool},
		"copy mode":   {Role: memif.RoleClient, Pool: pool},
		"buffer size": {Role: memif.RoleClient, ZeroCopy: true, Pool: pool, BufferSize: 512},
		"queues":      {Role: memif.RoleClient, ZeroCopy: true, Pool: pool, RxQueues: 2},
	} {
		cfg.Socket = memiftest.UniqueSocket()
		if i, err := memif.Open(cfg); err == nil || !strings.Contains(err.Error(), "pool") {
			if i != nil {
				i.Close()
			}
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := memif.NewPool(memif.PoolConfig{Pairs: 0, Buffers: 1, BufferSize: 256}); err == nil {
		t.Error("a pool of 0 pairs")
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := memif.Open(memif.Config{Role: memif.RoleClient, ZeroCopy: true, Pool: pool, Socket: memiftest.UniqueSocket()}); err == nil {
		t.Error("opened an interface on a closed pool")
	}
}

package memif_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// TestZeroCopyReleaseDuringDisconnect: the application releases and allocates buffers on its
// own goroutine while the server goes away, so the client's control goroutine recovers the dead
// rings' buffers into the same pool share at the same time (the race a DPDK server stopped right
// after the last Release hit). Under -race an unguarded free list is reported; without it, a
// corrupted one shows as buffers lost or duplicated: every buffer must be free once the link is
// down and the application has given its back.
func TestZeroCopyReleaseDuringDisconnect(t *testing.T) {
	addr := memiftest.UniqueSocket()
	cfg := zcClient
	cfg.Role, cfg.Socket, cfg.ReconnectInterval = memif.RoleClient, addr, 5*time.Millisecond
	cli := open(t, cfg)
	rx, tx := cli.RxQueue(0), cli.TxQueue(0)
	const total = 3 * 64 // the private pool: three rings' worth
	for round := range 40 {
		srv := open(t, memif.Config{Role: memif.RoleServer, Socket: addr})
		if err := waitUp(t, srv); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		waitReconnected(t, cli)
		pkts := make([][]byte, 32)
		for k := range pkts {
			pkts[k] = []byte{byte(round), byte(k)}
		}
		if n := srv.TxQueue(0).TxBurst(pkts); n != len(pkts) {
			t.Fatalf("round %d: server sent %d", round, n)
		}
		held := make([]memif.Buffer, 32)
		n := 0
		for deadline := time.Now().Add(5 * time.Second); n < len(held); {
			n += rx.RxBurstZC(held[n:])
			if time.Now().After(deadline) {
				t.Fatalf("round %d: received %d of %d", round, n, len(held))
			}
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the queue pair's owner, one buffer per call to stretch the window
			defer wg.Done()
			one := make([]memif.Buffer, 1)
			for k := range held {
				rx.Release(held[k : k+1])
				if tx.Alloc(one) == 1 {
					rx.Release(one)
				}
			}
		}()
		srv.Close()
		wg.Wait()
		waitFor(t, cli, "client down", func() bool { return !cli.Up() })
		if free := rx.BuffersFree(); free != total {
			t.Fatalf("round %d: %d buffers free with the link down and nothing held, want %d", round, free, total)
		}
	}
}

// TestSharedPoolDisconnectDuringBursts: two zero-copy clients share a pool; while the owner of
// queue pair 0 keeps forwarding on B (bursts, Alloc, Release on share 0), A's server goes away
// and A's control goroutine recovers A's rings into share 0, and on reconnect arms A's receive
// ring from it. No data race, and no buffer lost or duplicated.
func TestSharedPoolDisconnectDuringBursts(t *testing.T) {
	pool, err := memif.NewPool(memif.PoolConfig{Name: "race", Pairs: 1, Buffers: 5 * 64, BufferSize: 256, PeersTrustEachOther: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() }) // after both clients (cleanups run last-in first-out)
	addrA := memiftest.UniqueSocket()
	cfgA := memif.Config{ZeroCopy: true, RingSize: 64, Pool: pool, Role: memif.RoleClient, Socket: addrA,
		ReconnectInterval: 5 * time.Millisecond}
	cliA := open(t, cfgA)
	srvB, cliB := memiftest.Pair(t, memif.Config{}, memif.Config{ZeroCopy: true, RingSize: 64, Pool: pool})
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- churnShare(cliB, srvB, stop) }()
	for range 20 {
		srvA := open(t, memif.Config{Role: memif.RoleServer, Socket: addrA})
		waitReconnected(t, cliA)
		srvA.Close()
		waitFor(t, cliA, "client down", func() bool { return !cliA.Up() })
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cliB.TxQueue(0).TxBurstZC(nil) // reclaim B's last sends
	// A is down (its rings hold nothing), B's receive ring holds one ring of armed buffers.
	if free, want := pool.BuffersFree(0), 5*64-64; free != want {
		t.Fatalf("%d buffers free, want %d: lost or duplicated", free, want)
	}
}

// churnShare sends and releases buffers of share 0 through cli until stop, checking what
// comes back through srv.
func churnShare(cli, srv *memif.Interface, stop <-chan struct{}) error {
	tx, rx := cli.TxQueue(0), cli.RxQueue(0)
	bufs := make([]memif.Buffer, 8)
	got := make([][]byte, 8)
	for k := range got {
		got[k] = make([]byte, 0, 256)
	}
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return nil
		default:
		}
		n := tx.Alloc(bufs)
		for k := range bufs[:n] {
			bufs[k].Data = append(bufs[k].Data[:0], byte(seq), byte(k))
		}
		sent := tx.TxBurstZC(bufs[:n])
		rx.Release(bufs[sent:n]) // Release takes any buffer of the share, allocated ones too
		for m := srv.RxQueue(0).RxBurst(got); m > 0; m = srv.RxQueue(0).RxBurst(got) {
			for _, p := range got[:m] {
				if len(p) != 2 || p[0] != byte(seq) {
					return fmt.Errorf("round %d: server got %x", seq, p)
				}
			}
		}
	}
}

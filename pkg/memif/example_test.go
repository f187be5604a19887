package memif_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// Two interfaces in one process: a server listening on an abstract socket and a client that
// connects to it. Packets sent on one side's TxQueue arrive on the other side's RxQueue.
func Example() {
	sock := memiftest.UniqueSocket() // "@name": an abstract socket, no file
	srv, err := memif.Open(memif.Config{Role: memif.RoleServer, Socket: sock, ID: 1, Logger: memiftest.QuietLogger()})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	cli, err := memif.Open(memif.Config{Role: memif.RoleClient, Socket: sock, ID: 1, Logger: memiftest.QuietLogger()})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cli.WaitUp(ctx); err != nil {
		log.Fatal(err)
	}

	// TxBurst copies the packets into shared memory and says how many it took.
	sent := cli.TxQueue(0).TxBurst([][]byte{[]byte("hello"), []byte("world")})

	// RxBurst fills caller-owned buffers; each needs room for the largest packet.
	bufs := [][]byte{make([]byte, 0, 2048), make([]byte, 0, 2048)}
	n := srv.RxQueue(0).RxBurst(bufs)
	fmt.Println(sent, n, string(bufs[0]), string(bufs[1]))
	// Output: 2 2 hello world
}

// A client whose server refuses it learns why at once; it keeps retrying in the background.
func ExampleInterface_WaitUp_refused() {
	sock := memiftest.UniqueSocket()
	srv, _ := memif.Open(memif.Config{Role: memif.RoleServer, Socket: sock, Secret: "open sesame", Logger: memiftest.QuietLogger()})
	defer srv.Close()
	cli, _ := memif.Open(memif.Config{Role: memif.RoleClient, Socket: sock, Secret: "guess", Logger: memiftest.QuietLogger()})
	defer cli.Close()

	err := cli.WaitUp(context.Background())
	fmt.Println(err)
	// Output: memif: peer disconnected: Incorrect secret
}

// A full ring is a count, not an error: TxBurst takes what fits and the caller retries the rest.
func ExampleTxQueue_TxBurst() {
	sock := memiftest.UniqueSocket()
	srv, _ := memif.Open(memif.Config{Role: memif.RoleServer, Socket: sock, Logger: memiftest.QuietLogger()})
	defer srv.Close()
	cli, _ := memif.Open(memif.Config{Role: memif.RoleClient, Socket: sock, RingSize: 4, Logger: memiftest.QuietLogger()})
	defer cli.Close()
	if err := cli.WaitUp(context.Background()); err != nil {
		log.Fatal(err)
	}
	pkts := make([][]byte, 10)
	for i := range pkts {
		pkts[i] = []byte{byte(i)}
	}
	fmt.Println(cli.TxQueue(0).TxBurst(pkts), cli.TxQueue(0).Stats().NoBuf)
	// Output: 4 1
}

// A forwarder between two interfaces (a network function's data path, like testpmd's io
// forwarding or DPDK's l2fwd): Forward moves what one interface received to the other's transmit
// ring, copying each packet once, from ring buffer to ring buffer (RxBurst then TxBurst would copy
// it twice). What the other ring has no room for stays in the receive ring for the next call.
// Here the forwarder is the server of both links; its peers are the clients east and west.
func ExampleRxQueue_Forward() {
	quiet := memiftest.QuietLogger()
	open := func(role memif.Role, sock string) *memif.Interface {
		i, err := memif.Open(memif.Config{Role: role, Socket: sock, Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		return i
	}
	sockA, sockB := memiftest.UniqueSocket(), memiftest.UniqueSocket()
	a, b := open(memif.RoleServer, sockA), open(memif.RoleServer, sockB)
	east, west := open(memif.RoleClient, sockA), open(memif.RoleClient, sockB)
	defer func() {
		for _, i := range []*memif.Interface{east, west, a, b} {
			i.Close()
		}
	}()
	for _, i := range []*memif.Interface{a, b, east, west} {
		if err := i.WaitUp(context.Background()); err != nil {
			log.Fatal(err)
		}
	}

	east.TxQueue(0).TxBurst([][]byte{[]byte("ping"), []byte("pong")})

	// The forwarding loop: one goroutine owns queue 0 of both interfaces, both ways.
	n := a.RxQueue(0).Forward(b.TxQueue(0), 32)
	b.RxQueue(0).Forward(a.TxQueue(0), 32) // nothing came from the west

	got := [][]byte{make([]byte, 0, 2048), make([]byte, 0, 2048)}
	k := west.RxQueue(0).RxBurst(got)
	fmt.Println(n, k, string(got[0]), string(got[1]))
	// Output: 2 2 ping pong
}

// Zero-copy forwarding: client interfaces that share one Pool hand the received buffers
// themselves to the other interface's transmit ring, and when its peer is done with them they
// return to the pool share the receive ring re-arms from (Tx-to-Rx recycling). Nothing is copied
// and nothing allocated; Forward does this by itself when both queues draw on the same share, and
// RxBurstZC plus TxBurstZC do it by hand (an application that looks at or rewrites headers).
// Both peers map the whole pool, so each reads and rewrites the other's frames: a pool is shared
// only when the peers trust each other (PeersTrustEachOther; without it the second Open fails
// with ErrPoolShared). Peers that are separate tenants get a pool each, and Forward copies once.
func ExamplePool_forward() {
	quiet := memiftest.QuietLogger()
	// Rings of 256 slots on two interfaces: 5 x 256 leaves a ring's worth to the application.
	// Here both peers (east and west) are this program's: they trust each other.
	pool, err := memif.NewPool(memif.PoolConfig{Name: "l2fwd", Pairs: 1, Buffers: 5 * 256, BufferSize: 2048,
		PeersTrustEachOther: true})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close() // after the interfaces: deferred calls run last-in first-out
	var ifs []*memif.Interface
	open := func(role memif.Role, sock string, pool *memif.Pool) *memif.Interface {
		i, err := memif.Open(memif.Config{Role: role, Socket: sock, RingSize: 256, ZeroCopy: pool != nil, Pool: pool, Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		ifs = append(ifs, i)
		return i
	}
	sockA, sockB := memiftest.UniqueSocket(), memiftest.UniqueSocket()
	east, west := open(memif.RoleServer, sockA, nil), open(memif.RoleServer, sockB, nil)
	a, b := open(memif.RoleClient, sockA, pool), open(memif.RoleClient, sockB, pool)
	defer func() {
		for _, i := range ifs {
			i.Close()
		}
	}()
	for _, i := range ifs {
		if err := i.WaitUp(context.Background()); err != nil {
			log.Fatal(err)
		}
	}
	free := pool.BuffersFree(0)

	east.TxQueue(0).TxBurst([][]byte{[]byte("hello"), []byte("world")})

	// By hand: the buffers received on a go out on b as they are; a TxBurstZC that takes fewer
	// leaves the rest to the caller (send them later, or Release them: a drop).
	bufs := make([]memif.Buffer, 32)
	n := a.RxQueue(0).RxBurstZC(bufs)
	sent := b.TxQueue(0).TxBurstZC(bufs[:n])
	a.RxQueue(0).Release(bufs[sent:n])

	got := [][]byte{make([]byte, 0, 2048), make([]byte, 0, 2048)}
	k := west.RxQueue(0).RxBurst(got)
	b.TxQueue(0).TxBurstZC(nil) // reclaims what west released
	fmt.Println(sent, k, string(got[0]), string(got[1]), pool.BuffersFree(0) == free)
	// Output: 2 2 hello world true
}

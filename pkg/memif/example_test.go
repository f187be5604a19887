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

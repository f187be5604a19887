package memif_test

import (
	"context"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// BenchmarkInterruptPingPong bounces one 64-byte packet between a client and a server whose
// receivers sleep in RxBurstWait (one poll, then Wait on the eventfd): each op is a round trip
// with two eventfd signals and two wake-ups, the interrupt-mode latency.
func BenchmarkInterruptPingPong(b *testing.B) {
	srv, cli := memiftest.Pair(b, memif.Config{}, memif.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	echoDone := make(chan struct{})
	go func() {
		defer close(echoDone)
		rx, tx := srv.RxQueue(0), srv.TxQueue(0)
		bufs := [][]byte{make([]byte, 0, 2048)}
		for {
			n, err := rx.RxBurstWait(ctx, bufs, 1)
			if err != nil {
				return
			}
			for tx.TxBurst(bufs[:n]) != n {
			}
		}
	}()
	rx, tx := cli.RxQueue(0), cli.TxQueue(0)
	pkt := [][]byte{make([]byte, 64)}
	bufs := [][]byte{make([]byte, 0, 2048)}
	b.ReportAllocs()
	for b.Loop() {
		for tx.TxBurst(pkt) != 1 {
		}
		if n, err := rx.RxBurstWait(ctx, bufs, 1); n != 1 || err != nil {
			b.Fatalf("RxBurstWait = %d %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/roundtrip")
	cancel()
	<-echoDone
}

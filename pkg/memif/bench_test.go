package memif_test

import (
	"fmt"
	"testing"

	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// BenchmarkBurst moves bursts through an in-process pair: each op is one TxBurst and one RxBurst
// on the same goroutine, so ns/pkt is the CPU cost of both sides of one packet (copy in, copy
// out, ring bookkeeping). Sizes above the 2048-byte buffers are chained.
func BenchmarkBurst(b *testing.B) {
	for _, dir := range []string{"client-to-server", "server-to-client"} {
		for _, size := range []int{64, 1500, 9000} {
			for _, burst := range []int{1, 32, 256} {
				b.Run(fmt.Sprintf("%s/size=%d/burst=%d", dir, size, burst), func(b *testing.B) {
					cfg := memif.Config{RingSize: 1024, BufferSize: 2048}
					srv, cli := memiftest.Pair(b, cfg, cfg)
					tx, rx := cli.TxQueue(0), srv.RxQueue(0)
					if dir == "server-to-client" {
						tx, rx = srv.TxQueue(0), cli.RxQueue(0)
					}
					pkts := make([][]byte, burst)
					bufs := make([][]byte, burst)
					for i := range pkts {
						pkts[i] = make([]byte, size)
						bufs[i] = make([]byte, 0, 9216)
					}
					b.SetBytes(int64(size * burst))
					b.ReportAllocs()
					pktsMoved := 0
					for b.Loop() {
						sent := tx.TxBurst(pkts)
						got := rx.RxBurst(bufs)
						if sent != burst || got != burst {
							b.Fatalf("sent %d received %d of %d", sent, got, burst)
						}
						pktsMoved += got
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pktsMoved), "ns/pkt")
					b.ReportMetric(float64(pktsMoved)/b.Elapsed().Seconds()/1e6, "Mpps")
				})
			}
		}
	}
}

// BenchmarkPump is a sender and a receiver goroutine on an in-process pair, as two pods would run
// them: it measures throughput including the cache-line traffic between the two cores.
func BenchmarkPump(b *testing.B) {
	for _, dir := range []string{"client-to-server", "server-to-client"} {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/size=%d", dir, size), func(b *testing.B) {
				cfg := memif.Config{RingSize: 1024, BufferSize: 2048}
				srv, cli := memiftest.Pair(b, cfg, cfg)
				tx, rx := cli.TxQueue(0), srv.RxQueue(0)
				if dir == "server-to-client" {
					tx, rx = srv.TxQueue(0), cli.RxQueue(0)
				}
				const burst = 32
				pkts := make([][]byte, burst)
				bufs := make([][]byte, burst)
				for i := range pkts {
					pkts[i] = make([]byte, size)
					bufs[i] = make([]byte, 0, 2048)
				}
				total := b.N
				done := make(chan struct{})
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				go func() {
					defer close(done)
					for sent := 0; sent < total; {
						sent += tx.TxBurst(pkts[:min(burst, total-sent)])
					}
				}()
				for got := 0; got < total; {
					got += rx.RxBurst(bufs)
				}
				<-done
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(total), "ns/pkt")
				b.ReportMetric(float64(total)/b.Elapsed().Seconds()/1e6, "Mpps")
			})
		}
	}
}

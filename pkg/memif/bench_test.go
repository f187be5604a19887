package memif_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memifnet/memifnet/pkg/alloc"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/internal/release"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// BenchmarkBurst moves bursts through an in-process pair: each op is one TxBurst and one RxBurst
// on the same goroutine, so ns/pkt is the CPU cost of both sides of one packet (copy in, copy
// out, ring bookkeeping). Sizes above the 2048-byte buffers are chained.
func BenchmarkBurst(b *testing.B) {
	benchBurst(b, []int{64, 1500, 9000}, []int{1, 32, 256}, nil)
}

// BenchmarkBurstTruncatable is BenchmarkBurst where the client's region is a file (as a
// hugepage pool unit is), which cannot be sealed against shrinking: both sides then run each burst
// with faults trapped (fault.go). Compare with BenchmarkBurst for the cost, on a machine without
// free huge pages: BenchmarkBurst's hugetlbfs memfds may fault too (a punched hole) and run trapped.
func BenchmarkBurstTruncatable(b *testing.B) {
	benchBurst(b, []int{64, 1500}, []int{1, 32}, func(b *testing.B) func(string, int) (*alloc.Region, error) {
		unit := filepath.Join(b.TempDir(), "unit")
		if err := os.WriteFile(unit, make([]byte, 8<<20), 0o600); err != nil {
			b.Fatal(err)
		}
		return func(_ string, n int) (*alloc.Region, error) { return alloc.OpenFileRegion(unit, n) }
	})
}

// benchBurst is the one body of the burst benchmarks: every direction, size and burst, with the
// client's regions from clientRegion when it is set.
func benchBurst(b *testing.B, sizes, bursts []int, clientRegion func(*testing.B) func(string, int) (*alloc.Region, error)) {
	for _, dir := range []string{"client-to-server", "server-to-client"} {
		for _, size := range sizes {
			for _, burst := range bursts {
				b.Run(fmt.Sprintf("%s/size=%d/burst=%d", dir, size, burst), func(b *testing.B) {
					cfg := memif.Config{RingSize: 1024, BufferSize: 2048}
					ccfg := cfg
					if clientRegion != nil {
						ccfg.NewRegion = clientRegion(b)
					}
					srv, cli := memiftest.Pair(b, cfg, ccfg)
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
// them: it measures throughput including the cache-line traffic between the two cores. The sender
// sends bursts of 32; the receiver polls with bursts of rxburst (small ones poll, and re-arm the
// receive ring, more often).
func BenchmarkPump(b *testing.B) {
	for _, dir := range []string{"client-to-server", "server-to-client"} {
		for _, size := range []int{64, 1500} {
			for _, rxBurst := range []int{1, 4, 32} {
				b.Run(fmt.Sprintf("%s/size=%d/rxburst=%d", dir, size, rxBurst), func(b *testing.B) {
					cfg := memif.Config{RingSize: 1024, BufferSize: 2048}
					srv, cli := memiftest.Pair(b, cfg, cfg)
					tx, rx := cli.TxQueue(0), srv.RxQueue(0)
					if dir == "server-to-client" {
						tx, rx = srv.TxQueue(0), cli.RxQueue(0)
					}
					const burst = 32
					pkts := make([][]byte, burst)
					bufs := make([][]byte, rxBurst)
					for i := range pkts {
						pkts[i] = make([]byte, size)
					}
					for i := range bufs {
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
}

// BenchmarkForward is an l2fwd between two zero-copy client interfaces A and B, each connected to
// a server: A's server sends a burst, the forwarder moves it from A to B, B's server receives it,
// all on one goroutine. The servers' work is the same in every variant, so the differences are
// the forwarder's:
//
//   - copy: RxBurst on A into the application's buffers, TxBurst on B (two copies);
//   - separate-pools: RxBurstZC on A, Alloc on B, one copy, TxBurstZC on B, Release on A;
//   - shared-pool: A and B share one Pool; RxBurstZC on A, TxBurstZC on B with the same
//     buffers, which come back to the share A re-arms from (Tx-to-Rx recycling, no copy);
//   - forward-copy: copy-mode clients, RxQueue.Forward (one copy, ring buffer to ring buffer);
//   - forward-separate-pools: RxQueue.Forward between zero-copy clients with a pool each, what
//     a forwarder gets unless its peers trust each other (one copy, pool buffer to pool buffer);
//   - forward-shared-pool: RxQueue.Forward between interfaces of one Pool (no copy).
func BenchmarkForward(b *testing.B) {
	for _, variant := range []string{"copy", "separate-pools", "shared-pool", "forward-copy", "forward-separate-pools", "forward-shared-pool"} {
		for _, size := range []int{64, 1500} {
			b.Run(fmt.Sprintf("%s/size=%d", variant, size), func(b *testing.B) {
				const burst, ringSize = 32, 1024
				cfg := memif.Config{RingSize: ringSize, BufferSize: 2048, ZeroCopy: variant != "copy" && variant != "forward-copy"}
				cfgA, cfgB := cfg, cfg
				if strings.HasSuffix(variant, "shared-pool") {
					pool, err := memif.NewPool(memif.PoolConfig{Name: "fwd", Pairs: 1, Buffers: 5 * ringSize, BufferSize: 2048, PeersTrustEachOther: true})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { pool.Close() })
					cfgA.Pool, cfgB.Pool = pool, pool
				}
				srvA, cliA := memiftest.Pair(b, memif.Config{RingSize: ringSize}, cfgA)
				srvB, cliB := memiftest.Pair(b, memif.Config{RingSize: ringSize}, cfgB)
				gen, sink := srvA.TxQueue(0), srvB.RxQueue(0)
				in, out := cliA.RxQueue(0), cliB.TxQueue(0)
				pkts := make([][]byte, burst)
				sinkBufs := make([][]byte, burst)
				fwdBufs := make([][]byte, burst)
				for i := range pkts {
					pkts[i] = make([]byte, size)
					sinkBufs[i] = make([]byte, 0, 2048)
					fwdBufs[i] = make([]byte, 0, 2048)
				}
				rxZC := make([]memif.Buffer, burst)
				txZC := make([]memif.Buffer, burst)
				forward := map[string]func() int{
					"copy": func() int {
						n := in.RxBurst(fwdBufs)
						return out.TxBurst(fwdBufs[:n])
					},
					"separate-pools": func() int {
						n := in.RxBurstZC(rxZC)
						m := out.Alloc(txZC[:n])
						for k := range m {
							txZC[k].Data = txZC[k].Data[:copy(txZC[k].Data, rxZC[k].Data)]
						}
						in.Release(rxZC[:n])
						return out.TxBurstZC(txZC[:m])
					},
					"shared-pool": func() int {
						n := in.RxBurstZC(rxZC)
						return out.TxBurstZC(rxZC[:n])
					},
					"forward-copy":           func() int { return in.Forward(out, burst) },
					"forward-separate-pools": func() int { return in.Forward(out, burst) },
					"forward-shared-pool":    func() int { return in.Forward(out, burst) },
				}[variant]
				b.SetBytes(int64(size * burst))
				b.ReportAllocs()
				moved := 0
				for b.Loop() {
					sent := gen.TxBurst(pkts)
					fwd := forward()
					got := sink.RxBurst(sinkBufs)
					if sent != burst || fwd != burst || got != burst {
						b.Fatalf("sent %d forwarded %d received %d of %d", sent, fwd, got, burst)
					}
					moved += got
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(moved), "ns/pkt")
				b.ReportMetric(float64(moved)/b.Elapsed().Seconds()/1e6, "Mpps")
			})
		}
	}
}

// BenchmarkEmptyPoll is one RxBurst on an up link with nothing to receive, per role: the cost of
// a polling receiver's turn, which bounds how late it notices a packet (half a turn on average).
// Guard is the queue guard's part of it on its own (a compare-and-swap to take it, a store-release
// to give it back, on a line the core owns), for the echo latency analysis in docs/performance.md.
func BenchmarkEmptyPoll(b *testing.B) {
	for _, role := range []string{"client", "server"} {
		b.Run(role, func(b *testing.B) {
			srv, cli := memiftest.Pair(b, memif.Config{RingSize: 1024, BufferSize: 2048}, memif.Config{})
			rx := srv.RxQueue(0)
			if role == "client" {
				rx = cli.RxQueue(0)
			}
			bufs := make([][]byte, 32)
			for i := range bufs {
				bufs[i] = make([]byte, 0, 2048)
			}
			b.ReportAllocs()
			for b.Loop() {
				if rx.RxBurst(bufs) != 0 {
					b.Fatal("received a packet nobody sent")
				}
			}
		})
	}
	b.Run("guard", func(b *testing.B) {
		var guard int32
		for b.Loop() {
			if !atomic.CompareAndSwapInt32(&guard, 0, 1) {
				b.Fatal("guard taken")
			}
			release.Store32(&guard, 0)
		}
	})
}

package memif_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// BenchmarkPingPongCrossCore is hack/bench.sh's latency case in one process: a pinger on CPU 1
// (the client, 64 B frames, one in flight, TxBurst then RxBurst until it is back) and an echo on
// CPU 0 (the server), one round trip per op. Variants of the echo:
//   - forward: RxQueue.Forward (memif-perf --mode echo), one copy;
//   - burst: RxBurst then TxBurst, two copies (memif-perf --mode echo --verify);
//   - descs: ForwardDescs (export_test.go), lengths move and no payload byte is touched: what
//     the rings alone cost.
func BenchmarkPingPongCrossCore(b *testing.B) {
	if runtime.NumCPU() < 2 {
		testutil.SkipOrFail(b, "BenchmarkPingPongCrossCore needs two CPUs, this process may use %d", runtime.NumCPU())
	}
	for _, variant := range []string{"forward", "burst", "descs"} {
		b.Run(variant, func(b *testing.B) { benchPingPong(b, variant) })
	}
}

func benchPingPong(b *testing.B, variant string) {
	srv, cli := memiftest.Pair(b, memif.Config{}, memif.Config{})
	in, out := srv.RxQueue(0), srv.TxQueue(0)
	bufs := make([][]byte, 32)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	echo := func() int { return in.Forward(out, 32) }
	switch variant {
	case "burst":
		echo = func() int {
			n := in.RxBurst(bufs)
			for sent := 0; sent < n; {
				sent += out.TxBurst(bufs[sent:n])
			}
			return n
		}
	case "descs":
		echo = func() int { return in.ForwardDescs(out, 32) }
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := pin(0); err != nil {
			b.Error(err)
			return
		}
		for !stop.Load() {
			echo()
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := pin(1); err != nil {
			b.Error(err)
			return
		}
		tx, rx := cli.TxQueue(0), cli.RxQueue(0)
		frame := [][]byte{make([]byte, 64)}
		got := [][]byte{make([]byte, 2048)}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			frame[0][0] = byte(i)
			for tx.TxBurst(frame) == 0 {
			}
			for rx.RxBurst(got) == 0 {
			}
			if variant != "descs" && (got[0][0] != byte(i) || len(got[0]) != 64) {
				b.Errorf("round trip %d: got %d bytes starting %d", i, len(got[0]), got[0][0])
				return
			}
			got[0] = got[0][:cap(got[0])]
		}
		b.StopTimer()
	}()
	<-done
	stop.Store(true)
	wg.Wait()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/rtt")
}

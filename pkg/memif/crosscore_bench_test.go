package memif_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memifnet/memifnet/internal/testutil"
	"github.com/memifnet/memifnet/pkg/memif"
	"github.com/memifnet/memifnet/pkg/memif/memiftest"
)

// BenchmarkForwardCrossCore is hack/bench.sh's forwarding case in one process, for what needs
// the library's insides: a generator goroutine on CPU 0 (two zero-copy clients, A and B, each
// with its own pool: header-only frames sent on A without a copy, received on B as views and
// released, like memif-perf --mode txrx --zero-copy --window -1) and a forwarder goroutine on
// CPU 1 (two servers: what comes in on A goes out on B), each locked to its thread. Variants:
//   - forward: RxQueue.ForwardDrop (memif-perf --mode fwd), one copy per packet;
//   - descs: the ideal forwarder, ForwardDescs (export_test.go): lengths move from one ring to
//     the other and no payload byte is touched; the most any forwarder can do with this
//     generator, which then is the bottleneck.
//
// It reports the generator's received Mpps, the share of the run the forwarder spent in polls that
// moved packets (the rest it found its ring empty: it waited for the generator) and how many of
// the generator's turns found its transmit ring full (it waited for the forwarder) per burst
// received. Needs 2 CPUs.
func BenchmarkForwardCrossCore(b *testing.B) {
	if runtime.NumCPU() < 2 {
		testutil.SkipOrFail(b, "BenchmarkForwardCrossCore needs two CPUs, this process may use %d", runtime.NumCPU())
	}
	for _, size := range []int{64, 1500} {
		for _, variant := range []string{"forward", "descs"} {
			b.Run(fmt.Sprintf("%s/size=%d", variant, size), func(b *testing.B) {
				benchCrossCore(b, variant, size)
			})
		}
	}
}

func benchCrossCore(b *testing.B, variant string, size int) {
	const burst, ringSize = 32, 1024
	zc := memif.Config{RingSize: ringSize, BufferSize: 2048, ZeroCopy: true}
	srvA, cliA := memiftest.Pair(b, memif.Config{RingSize: ringSize}, zc)
	srvB, cliB := memiftest.Pair(b, memif.Config{RingSize: ringSize}, zc)
	in, out := srvA.RxQueue(0), srvB.TxQueue(0)
	forward := func() int { f, d := in.ForwardDrop(out, burst); return f + d }
	if variant == "descs" {
		forward = func() int { return in.ForwardDescs(out, burst) }
	}
	var stop atomic.Bool
	var busy time.Duration // the forwarder's time in polls that moved packets
	var got, full int
	var wg sync.WaitGroup
	// Both goroutines end locked to their pinned threads, which then exit: no other goroutine
	// inherits the CPU affinity.
	wg.Go(func() {
		if err := pin(1); err != nil {
			b.Error(err)
			return
		}
		for !stop.Load() {
			t0 := time.Now()
			if forward() > 0 {
				busy += time.Since(t0)
			}
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	gen := make(chan struct{})
	go func() {
		defer close(gen)
		if err := pin(0); err != nil {
			b.Error(err)
			return
		}
		got, full = generate(cliA.TxQueue(0), cliB.RxQueue(0), size, burst, b.N)
	}()
	<-gen
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	b.ReportMetric(float64(got)/b.Elapsed().Seconds()/1e6, "Mpps")
	b.ReportMetric(100*busy.Seconds()/b.Elapsed().Seconds(), "%fwd-busy")
	b.ReportMetric(float64(full)/float64(got/burst+1), "full/burst")
}

// generate sends header-only frames on tx and receives them on rx until n have come back, and
// returns how many did and how many turns found the transmit ring full.
func generate(tx *memif.TxQueue, rx *memif.RxQueue, size, burst, n int) (got, full int) {
	header := make([]byte, 14)
	bufs, views := make([]memif.Buffer, burst), make([]memif.Buffer, burst)
	var pend []memif.Buffer
	for got < n {
		if k := rx.RxBurstZC(views); k > 0 {
			rx.Release(views[:k])
			got += k
		}
		if len(pend) == 0 {
			k := tx.Alloc(bufs)
			for i := range bufs[:k] {
				copy(bufs[i].Data, header)
				bufs[i].Data = bufs[i].Data[:size]
			}
			pend = bufs[:k]
		}
		k := tx.TxBurstZC(pend)
		if k == 0 && len(pend) > 0 {
			full++
		}
		pend = pend[k:]
	}
	return got, full
}

// pin locks the goroutine to its thread and the thread to cpu; the goroutine must end locked.
func pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

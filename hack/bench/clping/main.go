// Command clping measures the machine's cache-line ping-pong: two threads, pinned to two CPUs,
// take turns writing one shared word (each waits, spinning, for the other's write and answers
// it). One round trip moves the line from one core's cache to the other's and back, the least a
// polling memif round trip can cost: a ping and its echo each need at least one such transfer
// (descriptor, buffer and index lines, in practice several in a row).
//
//	go build -o clping ./hack/bench/clping && ./clping -cpus 0,1 -rounds 2000000
//
// Prints one line: rtt_p50_ns=.. rtt_p99_ns=.. (per round trip, from batches of -batch rounds,
// so that the clock's cost is spread over many of them) and one_way_ns=.. (p50 / 2).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// line is one word alone on its cache line (and the next, against the adjacent-line prefetcher).
type line struct {
	_ [128]byte
	v atomic.Uint64
	_ [128]byte
}

func main() {
	cpus := flag.String("cpus", "0,1", "the two CPUs: pinger,echoer")
	rounds := flag.Int("rounds", 2_000_000, "round trips")
	batch := flag.Int("batch", 1000, "round trips per timed batch")
	flag.Parse()
	a, b, err := parseCPUs(*cpus)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clping: -cpus: %v\n", err)
		os.Exit(2)
	}
	var l line
	stop := uint64(1 << 63)
	go func() { // the echoer: answers every odd value with the next even one
		pin(b)
		for {
			v := l.v.Load()
			if v == stop {
				return
			}
			if v&1 == 1 {
				l.v.Store(v + 1)
			}
		}
	}()
	pin(a)
	var samples []float64
	v := uint64(0)
	for done := 0; done < *rounds; done += *batch {
		t := time.Now()
		for range *batch {
			l.v.Store(v + 1)
			for l.v.Load() != v+2 {
			}
			v += 2
		}
		samples = append(samples, float64(time.Since(t).Nanoseconds())/float64(*batch))
	}
	l.v.Store(stop)
	slices.Sort(samples)
	p50, p99 := samples[len(samples)/2], samples[len(samples)*99/100]
	fmt.Printf("rtt_p50_ns=%.1f rtt_p99_ns=%.1f one_way_ns=%.1f batches=%d cpus=%d,%d\n", p50, p99, p50/2, len(samples), a, b)
}

// pin locks the goroutine to its thread and the thread to cpu.
func pin(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		fmt.Fprintf(os.Stderr, "clping: pin to CPU %d: %v\n", cpu, err)
		os.Exit(1)
	}
}

func parseCPUs(s string) (int, int, error) {
	x, y, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want A,B", s)
	}
	a, err := strconv.Atoi(x)
	if err != nil {
		return 0, 0, err
	}
	b, err := strconv.Atoi(y)
	return a, b, err
}

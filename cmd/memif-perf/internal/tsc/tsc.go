// Package tsc reads the CPU's time-stamp counter, the clock DPDK counts cycles with (rte_rdtsc),
// so that memif-perf's busy cycles per packet and testpmd's --record-core-cycles are the same unit
// on the same machine: no conversion, and no calibration error between the two numbers.
//
// Why the counter itself and not the monotonic clock converted to cycles: the conversion needs the
// TSC's frequency, which only the TSC gives (DPDK measures it against a sleep too), and a read of
// Go's clock (vDSO clock_gettime) costs several times an RDTSC, twice per burst on the hot path.
// On other architectures Read counts nanoseconds of the monotonic clock (a 1 GHz counter): DPDK's
// rte_rdtsc on arm64 reads the generic timer, not CPU cycles, either.
package tsc

import "time"

// Span measures the counter's rate against the monotonic clock over a stretch of time: the
// "MHz Clock" testpmd prints next to its cycles per packet.
type Span struct {
	t0 time.Time
	c0 uint64
}

// Start begins a span now.
func Start() Span { return Span{t0: time.Now(), c0: Read()} }

// MHz is the counter's rate since the span started (0 if no time has passed). Over a run of
// seconds the error is that of two clock reads, parts per million.
func (s Span) MHz() float64 {
	c, d := Read(), time.Since(s.t0)
	if d <= 0 {
		return 0
	}
	return float64(c-s.c0) / float64(d.Microseconds())
}

package tsc

// Read returns the time-stamp counter (RDTSC, unserialized like DPDK's rte_rdtsc: the reads
// around a burst may drift by the few instructions the CPU runs out of order, nothing next to a
// burst's hundreds of cycles). tsc_amd64.s.
//
//go:noescape
func Read() uint64

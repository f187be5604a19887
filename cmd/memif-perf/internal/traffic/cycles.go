package traffic

import "fmt"

// busyMeter counts a loop's cycles as testpmd's --record-core-cycles does: the counter is read
// before each poll of a stream (one receive queue and what the loop does with its packets) and,
// when the poll moved packets, again after it; the difference is busy. Polls that moved nothing
// cost cycles too but are idle: testpmd leaves them out of "CPU cycles/packet", which divides the
// busy cycles by the packets received (sent, for txonly), and counts them only in the lcore's
// total cycles (DPDK 23.03+: the lcore usage telemetry, busy/total). The meter keeps both: busy
// here, total as the loop's whole life (begin to finish), so the idle share is (total-busy)/total.
// It belongs to one loop: no atomics, stored in the Counters once, when the loop ends.
type busyMeter struct {
	clock func() uint64 // tsc.Read, a fake in tests
	first uint64        // the counter when the loop began
	busy  uint64
}

func newBusyMeter(clock func() uint64) busyMeter { return busyMeter{clock: clock, first: clock()} }

// start is the counter before a poll.
func (m *busyMeter) start() uint64 { return m.clock() }

// end closes a poll that began at t0 and moved n packets; it returns the counter now, which a
// loop polling another stream right after may use as that poll's start.
func (m *busyMeter) end(t0 uint64, n int) uint64 {
	t := m.clock()
	if n > 0 {
		m.busy += t - t0
	}
	return t
}

// store records the loop's busy and total cycles in c: call once, as the loop ends.
func (m *busyMeter) store(c *Counters) {
	c.BusyCycles.Store(m.busy)
	c.LoopCycles.Store(m.clock() - m.first)
}

// meters says whether a run's loops count busy cycles: the modes testpmd's figure describes, a
// receiver (rxonly) and a forwarder (io, one port or two), unless switched off.
func (c Config) meters() bool {
	return !c.NoCycles && (c.Mode == ModeRx || c.Mode == ModeEcho || c.Mode == ModeFwd)
}

// noClock stands in for the counter when cycles are not counted: the loops call it all the same
// (one indirect call, no branch on the hot path), and nothing is reported.
func noClock() uint64 { return 0 }

// cycleFields is the summary's account of the busy cycles: per received packet, and the share
// of the loops' cycles spent in polls that moved nothing (NA when nothing was received or
// counted).
func cycleFields(t Totals, mhz float64) string {
	perPkt, idle := "NA", "NA"
	if t.RxPkts > 0 && t.LoopCycles > 0 {
		perPkt = fmt.Sprintf("%.1f", float64(t.BusyCycles)/float64(t.RxPkts))
	}
	if t.LoopCycles > 0 {
		idle = fmt.Sprintf("%.3f", 1-float64(min(t.BusyCycles, t.LoopCycles))/float64(t.LoopCycles))
	}
	return fmt.Sprintf(" busy_cycles_per_pkt=%s idle_share=%s tsc_mhz=%.0f", perPkt, idle, mhz)
}
